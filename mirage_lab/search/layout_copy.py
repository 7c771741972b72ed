"""C-order copies and digests of strided fingerprint views, without numpy's slow generic copy.

At full shapes the search keeps a tile product as a transposed view of one BLAS result
(``tiles.matmul``) and a saved output as a transposed, broadcast view of its tiles
(``tiles.save_view``). Naming such a tensor (its XXH3 digest, in C order) or saving it needs
its elements in C order. ``np.ascontiguousarray`` copies these views with an inner loop of
a few elements and a large power-of-two stride between them (e.g. ``[512, 4096, 8]`` with
strides ``(8, 4096, 1)``), which thrashes the cache: 20-30 ms per 16 M elements on the CPU
box, the largest single cost of a full-shape search after the products
(``benchmarks/RESULTS.md``, "Search profile"). Here the view is first reduced to the fewest
axes that describe it, then copied by a compiled loop that walks the middle axis in blocks
(lines fetched for one block are reused by the next outer index; a transposed last axis is
walked in blocks too), or by numpy where numpy is faster (long contiguous rows, rows repeated
along a broadcast axis); a digest streams the copy through a small reused buffer, so no
array of the full size is allocated at all.

The bytes are exactly ``np.ascontiguousarray(x)``'s, so :func:`digest` equals
``xxh3_128_digest(np.ascontiguousarray(x))`` (``tests/search/test_layout_copy.py``).

    >>> import numpy as np
    >>> x = np.arange(24, dtype=np.uint16).reshape(4, 6).T
    >>> bool((contiguous(x) == np.ascontiguousarray(x)).all())
    True
"""
from __future__ import annotations

import threading

import numpy as np
import xxhash

try:
    from ..gpu.numba_compat import numba

    @numba.njit(cache=True, nogil=True)
    def _copy3(x: np.ndarray, out: np.ndarray, jb: int, kb: int) -> None:   # out[...] = x, both [a, b, c]
        a, b, c = x.shape
        for j0 in range(0, b, jb):
            j1 = min(b, j0 + jb)
            for k0 in range(0, c, kb):
                k1 = min(c, k0 + kb)
                for i in range(a):
                    for j in range(j0, j1):
                        for k in range(k0, k1):
                            out[i, j, k] = x[i, j, k]

    HAVE_NUMBA = True
except Exception:   # no numba here: numpy's copy (same bytes)
    HAVE_NUMBA = False

#: the middle axis is walked in blocks of this many indices (256: best of 16-1024 measured)
BLOCK = 256
#: when the last axis is strided too (a transpose), both are walked in blocks: 8 indices of the
#: last axis (each read from another row) by up to 1024 of the middle one. A transposed
#: [4096, 256] block of a [4096, 4096] array: 0.67 ms, against 2.1 ms with (128, 32)
TBLOCK = (1024, 8)
#: contiguous rows of at least this many elements are copied by numpy
LONG_ROW = 64
#: a digest streams its copy through a buffer of at most this many elements (2 MiB of uint16)
CHUNK = 1 << 20
#: arrays below this size are copied by numpy (the compiled call costs more than it saves)
MIN_ELEMENTS = 1 << 15

_local = threading.local()


def collapse(x: np.ndarray) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The fewest axes describing ``x``'s C-order walk: shape and byte strides, size-1 axes
    dropped and an axis merged into the next when it steps over it exactly."""
    shape: list[int] = []
    strides: list[int] = []
    for n, s in zip(x.shape, x.strides):
        if n == 1:
            continue
        if shape and strides[-1] == s * n:
            shape[-1] *= n
            strides[-1] = s
        else:
            shape.append(n)
            strides.append(s)
    return tuple(shape), tuple(strides)


def _as3(x: np.ndarray) -> np.ndarray | None:
    """``x`` as a 3-axis view in the same C order, or None when it needs more axes."""
    shape, strides = collapse(x)
    if len(shape) > 3:
        return None
    pad = 3 - len(shape)
    return np.lib.stride_tricks.as_strided(x, shape=(1,) * pad + shape, strides=(0,) * pad + strides,
                                           writeable=False)


def _copy(x3: np.ndarray, out: np.ndarray) -> None:
    """``out[...] = x3`` (both 3-axis): numpy's copy for long contiguous rows or rows repeated
    (broadcast) along the middle axis (measured 2-6x faster there, e.g. a tile broadcast over
    the grid), else the blocked loop (short contiguous rows moved as whole words, :func:`_widen`)."""
    if x3.strides[2] == x3.itemsize and (x3.shape[2] >= LONG_ROW or x3.strides[1] == 0):
        np.copyto(out, x3)
    elif abs(x3.strides[2]) <= 4 * x3.itemsize:    # short rows of the last axis, (nearly) contiguous
        x3, out = _widen(x3, out)
        _copy3(x3, out, BLOCK, max(1, x3.shape[2]))
    else:
        _copy3(x3, out, TBLOCK[0], TBLOCK[1])


def _widen(x3: np.ndarray, out: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``x3`` and ``out`` seen as 8- (or 4-) byte words where a contiguous row of ``x3`` is a whole
    number of aligned words (e.g. rows of 8 uint16 as 2 uint64): the same bytes in a quarter
    of the loop's steps (a [32, 4096, 8] block of rows 4096 apart: 0.32 ms against 0.67 ms);
    else both unchanged."""
    if x3.strides[2] != x3.itemsize:
        return x3, out
    row = x3.shape[2] * x3.itemsize
    for w, dt in ((8, np.uint64), (4, np.uint32)):
        if w <= x3.itemsize:
            break
        if row % w == 0 and x3.strides[0] % w == 0 and x3.strides[1] % w == 0 \
                and x3.ctypes.data % w == 0 and out.ctypes.data % w == 0:
            return x3.view(dt), out.view(dt)
    return x3, out


def contiguous(x: np.ndarray) -> np.ndarray:
    """``np.ascontiguousarray(x)``, copied by the blocked loop when ``x`` is a large strided view."""
    x = np.asarray(x)
    if x.flags.c_contiguous or not HAVE_NUMBA or x.size < MIN_ELEMENTS:
        return np.ascontiguousarray(x)
    x3 = _as3(x)
    if x3 is None:
        return np.ascontiguousarray(x)
    out = np.empty(x.shape, x.dtype)
    _copy(x3, out.reshape(x3.shape))
    return out


def _buffer(n: int, dtype: np.dtype) -> np.ndarray:
    buf = getattr(_local, "buf", None)
    if buf is None or buf.dtype != dtype or buf.size < n:
        buf = _local.buf = np.empty(max(n, CHUNK), dtype)
    return buf[:n]


def digest(x: np.ndarray) -> bytes:
    """XXH3-128 of ``x``'s elements in C order (``xxh3_128_digest(np.ascontiguousarray(x))``),
    streamed through a small buffer when ``x`` is a large strided view."""
    x = np.asarray(x)
    if x.flags.c_contiguous:
        return xxhash.xxh3_128_digest(x)
    if not HAVE_NUMBA or x.size < MIN_ELEMENTS:
        return xxhash.xxh3_128_digest(np.ascontiguousarray(x))
    x3 = _as3(x)
    if x3 is None:
        return xxhash.xxh3_128_digest(np.ascontiguousarray(x))
    a, b, c = x3.shape
    h = xxhash.xxh3_128()
    if b * c <= CHUNK:          # whole rows of the outer axis per chunk
        rows = max(1, CHUNK // (b * c))
        for i0 in range(0, a, rows):
            part = x3[i0:i0 + rows]
            buf = _buffer(part.size, x.dtype).reshape(part.shape)
            _copy(part, buf)
            h.update(buf)
    else:                       # a row is too large: blocks of the middle axis
        rows = max(1, CHUNK // c)
        for i in range(a):
            for j0 in range(0, b, rows):
                part = x3[i:i + 1, j0:j0 + rows]
                buf = _buffer(part.size, x.dtype).reshape(part.shape)
                _copy(part, buf)
                h.update(buf)
    return h.digest()


def contiguous_digest(x: np.ndarray) -> tuple[np.ndarray, bytes]:
    """``(contiguous(x), digest(x))`` in one pass: each chunk of the copy is hashed right after it
    is written, while it is still in cache (a saved output is copied and then named by its
    digest; hashing the whole copy afterwards read it back from memory, ~3x the hash's time)."""
    x = np.asarray(x)
    x3 = None if x.flags.c_contiguous or not HAVE_NUMBA or x.size < MIN_ELEMENTS else _as3(x)
    if x3 is None:
        out = np.ascontiguousarray(x)
        return out, xxhash.xxh3_128_digest(out)
    out = np.empty(x.shape, x.dtype)
    o3 = out.reshape(x3.shape)
    a, b, c = x3.shape
    h = xxhash.xxh3_128()
    if b * c <= CHUNK:          # whole rows of the outer axis per chunk
        rows = max(1, CHUNK // (b * c))
        for i0 in range(0, a, rows):
            _copy(x3[i0:i0 + rows], o3[i0:i0 + rows])
            h.update(o3[i0:i0 + rows])
    else:                       # a row is too large: blocks of the middle axis
        rows = max(1, CHUNK // c)
        for i in range(a):
            for j0 in range(0, b, rows):
                _copy(x3[i:i + 1, j0:j0 + rows], o3[i:i + 1, j0:j0 + rows])
                h.update(o3[i:i + 1, j0:j0 + rows])
    return out, h.digest()
