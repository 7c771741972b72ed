"""Keep freed memory in a search worker instead of handing it back to the OS at every ``free``.

At full shapes a search state makes and drops arrays of 32 MB to 512 MB (fingerprints of all
blocks and iterations, float64 tile products). glibc serves every allocation above 32 MB with
a fresh ``mmap`` and returns it with ``munmap`` when freed, so each new array page-faults all of
its pages again: on the dev VM a 512 MB product took 1.5–3.6 s in the search against 0.18 s
once its memory was warm (RESULTS.md, "Fixed costs and search speed on the user's path").
:func:`keep_freed_memory` tells glibc (``mallopt``) to serve large blocks from the heap and not
to trim it, so freed pages are reused warm. The peak is unchanged (measured: 1.89 vs 1.86 GB
max RSS over the same 10,000 states); the memory goes back to the OS when the worker exits.
Applied in the search's own pool workers, never in the caller's process (a notebook would
keep its peak for its whole life). Elsewhere than glibc it does nothing.

    >>> keep_freed_memory() in (True, False)
    True
"""
from __future__ import annotations

import sys

_M_TRIM_THRESHOLD = -1   # <malloc.h>
_M_MMAP_MAX = -4
_NEVER_TRIM = 2 ** 31 - 1   # mallopt takes an int: trim only a heap top over 2 GiB free


def keep_freed_memory() -> bool:
    """Ask glibc to keep freed memory for reuse in this process; True when it agreed."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
    except (OSError, AttributeError):   # not glibc (musl has no mallopt)
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    # mmap nothing (large blocks come from the heap, reused when freed) and never trim the heap
    return bool(mallopt(_M_MMAP_MAX, 0)) and bool(mallopt(_M_TRIM_THRESHOLD, _NEVER_TRIM))


__all__ = ["keep_freed_memory"]
