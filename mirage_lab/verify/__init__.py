"""The probabilistic verifier: μGraph fingerprints over Z_p × Z_q (MIRAGE_SPEC §4).

    >>> import mirage_lab as mi
    >>> from mirage_lab import examples
    >>> bool(mi.verify.equivalent(examples.gqa_program(2, 32, 16, 256),
    ...                           examples.gqa_flashdecoding(2, 32, 16, 256, kv_splits=4, q_blocks=2, forloop_range=2)))
    True

Modules, bottom up: :mod:`.field` (the arithmetic: constants and lookup tables),
:mod:`.tile_plans` (where each block's tile lies), :mod:`.numpy_backend` (``FieldOps``, the
ops on numpy arrays), :mod:`.cuda_backend` (the same on a GPU through Numba-CUDA),
:mod:`.backends` (the one choice between them: ``resolve_backend``, ``get_ops``),
:mod:`.fingerprint` (whole graphs), :mod:`.float_check` (the float64 second check where the
field models an op loosely), :mod:`.equivalence`.
"""
from .backends import BACKENDS, get_ops, resolve_backend
from .equivalence import EquivalenceResult, VerifyError, equivalent, match_outputs
from .field import P, PQ, Q, FieldError
from .fingerprint import block_op, fingerprint_block_graph, fingerprint_graph, kernel_op, random_inputs
from .numpy_backend import FieldOps

__all__ = ["equivalent", "EquivalenceResult", "VerifyError", "match_outputs", "P", "Q", "PQ", "FieldOps", "FieldError",
           "get_ops", "resolve_backend", "BACKENDS", "random_inputs", "fingerprint_graph", "fingerprint_block_graph",
           "kernel_op", "block_op"]
