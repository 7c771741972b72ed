"""Small search problems shared by the search tests (seconds on 2 cores)."""
from __future__ import annotations

from mirage_lab import examples as ex

# RMSNorm+Linear with one kernel op after the inputs: only customized ops, 192 subtrees.
SMALL = dict(max_kernel_ops=3)


def small_program():
    return ex.rms_norm_linear_program(4, 64, 64)
