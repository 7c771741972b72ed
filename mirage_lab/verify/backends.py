"""Which fingerprint backend runs here: the one choice between numpy and Numba-CUDA.

Every caller that picks a backend by name (the verifier's ``equivalent`` and
``fingerprint_graph``, the search's fingerprint arrays) goes through
:func:`resolve_backend`, so ``"auto"`` and ``"cuda"`` mean the same everywhere. numba is
imported only when cuda or auto is asked for.

    >>> resolve_backend("numpy"), get_ops("numpy").name
    ('numpy', 'numpy')
"""
from __future__ import annotations

from .field import FieldError
from .numpy_backend import NUMPY_OPS, FieldOps

#: The backend names :func:`resolve_backend` and :func:`get_ops` accept.
BACKENDS = ("numpy", "cuda", "auto")


def resolve_backend(backend: str) -> str:
    """The backend (``"numpy"`` or ``"cuda"``) that the name ``backend`` stands for on this machine.

    ``"auto"`` is cuda when a real CUDA GPU is usable, else numpy (the CUDA simulator does
    not count). ``"cuda"`` needs a GPU or the simulator (``NUMBA_ENABLE_CUDASIM=1``).
    Raises :class:`.field.FieldError` for an unknown name, or for cuda where it cannot run.

    >>> resolve_backend("numpy")
    'numpy'
    """
    if backend == "numpy":
        return "numpy"
    if backend not in ("cuda", "auto"):
        raise FieldError(f"unknown backend {backend!r}; use 'numpy', 'cuda' or 'auto'")
    from ..gpu.numba_compat import SIMULATOR, gpu_available

    if gpu_available():
        return "cuda"
    if backend == "auto":
        return "numpy"
    if SIMULATOR:
        return "cuda"
    raise FieldError(
        "backend='cuda' needs a CUDA GPU (or NUMBA_ENABLE_CUDASIM=1 for the simulator); "
        "use backend='numpy' or 'auto' on this machine"
    )


def get_ops(backend: str = "numpy") -> FieldOps:
    """The ops object of a backend: ``"numpy"``, ``"cuda"`` (Numba-CUDA, or its simulator),
    or ``"auto"`` (cuda when a real GPU is present, else numpy); see :func:`resolve_backend`.

    >>> get_ops("numpy").name
    'numpy'
    """
    if resolve_backend(backend) == "numpy":
        return NUMPY_OPS
    from .cuda_backend import CudaFieldOps

    return CudaFieldOps.instance()
