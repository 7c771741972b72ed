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

It also stops numpy from asking the kernel for transparent huge pages (``madvise(MADV_HUGEPAGE)``
on every array of 4 MiB and more, :func:`no_huge_pages`): the heap's first growth to its peak
(~1.4 GB in the first 10,000 states of RMSNorm+Linear at full shape) was then faulted in 2 MB
pages, which on the dev VM cost ~4 ms each to zero (567 of them: 2.2 s of system time, against
0.5 s for the same memory in 4 KB pages, measured there with THP "madvise"/"madvise"). The
search's passes over its arrays lose a little to TLB misses (~0.4 s of user time over those
states): where a huge page's first touch costs no more than its 4 KB pages', this is a small loss.

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
    no_huge_pages()
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


def no_huge_pages() -> bool:
    """Stop numpy advising huge pages for its large arrays in this process; True when it did
    (numpy's private switch: an older or newer numpy without it is left as it is)."""
    try:
        from numpy._core.multiarray import _set_madvise_hugepage
    except ImportError:
        try:
            from numpy.core.multiarray import _set_madvise_hugepage
        except ImportError:
            return False
    try:
        _set_madvise_hugepage(False)
    except Exception:   # a numpy that refuses: as it was
        return False
    return True


__all__ = ["keep_freed_memory", "no_huge_pages"]
