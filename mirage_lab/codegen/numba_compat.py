"""The one place mirage_lab imports numba from.

numba-cuda 0.30.x still calls ``np.row_stack``, which NumPy 2.5 removed, so every kernel
compile fails there. Restoring the alias before numba is imported fixes it. Keeping all
kernel code behind this module also lets the backend be swapped later (numba-cuda is in
maintenance; its successor is numba-cuda-mlir).

    >>> from mirage_lab.codegen.numba_compat import cuda, gpu_available
"""
from __future__ import annotations

import os

import numpy as np

if not hasattr(np, "row_stack"):
    np.row_stack = np.vstack  # type: ignore[attr-defined]

import numba  # noqa: E402
from numba import cuda  # noqa: E402

SIMULATOR = os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"


def gpu_available() -> bool:
    """True when a real CUDA GPU is usable (the simulator does not count)."""
    if SIMULATOR:
        return False
    try:
        return bool(cuda.is_available())
    except Exception:  # a broken driver counts as no GPU
        return False


__all__ = ["numba", "cuda", "gpu_available", "SIMULATOR"]

# Names generated kernel modules need (added for the code generator; see codegen/prelude.py).
from numba import types  # noqa: E402
from numba.cuda.extending import intrinsic  # noqa: E402
from llvmlite import ir as llvm_ir  # noqa: E402

__all__ += ["types", "intrinsic", "llvm_ir"]
