"""Moved to :mod:`mirage_lab.gpu.numba_compat`; this name stays for existing imports."""
from ..gpu.numba_compat import *  # noqa: F401,F403
from ..gpu.numba_compat import (FAST_LOWERING, SIMULATOR, __all__, cuda, gpu_available, intrinsic,  # noqa: F401
                                llvm_ir, numba, quiet_occupancy_warnings, types)
