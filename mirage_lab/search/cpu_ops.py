"""The search's CPU field ops: the verifier's numpy :class:`FieldOps`, with its hot primitives compiled.

At full shapes the search spends most of its time in a few whole-array passes over the
fingerprints of all blocks and iterations (``benchmarks/RESULTS.md``, "Search profile"):
``reduce_sum`` (numpy casts the uint16 array to int64, sums, takes ``%`` and casts back, four
passes; often of a strided view, copied first), the add/sub/mul of ``_arith`` (the same casts), and the float64 product's reduction
mod ``PQ``. Here each is one compiled pass (a transposed view is read in place) (Numba ``njit`` loops and ``vectorize`` ufuncs,
imported through :mod:`mirage_lab.gpu.numba_compat`). The values are exactly the numpy
backend's (integer arithmetic mod ``PQ`` either way; ``tests/search/test_cpu_ops.py``).
Without Numba the class is the numpy one unchanged.

    >>> import numpy as np
    >>> ops = SearchFieldOps()
    >>> ops.reduce_sum(np.array([[25650, 2]], np.uint16), -1).tolist()
    [[1]]
"""
from __future__ import annotations

import math
import sys
from collections import OrderedDict
from functools import lru_cache
from typing import Any

import numpy as np

from ..verify.field import FP_DTYPE, PQ
from ..verify.numpy_backend import FieldOps

#: the largest partial product the float64 reduction takes (headroom below 2**53 for q·PQ)
F64_EXACT_MAX = 2 ** 53 - 4 * PQ
#: terms per float64 BLAS product, so that a partial product stays within F64_EXACT_MAX
F64_TERMS = F64_EXACT_MAX // ((PQ - 1) ** 2)
_INV_PQ = 1.0 / PQ
#: sums of at most this many field elements fit a uint32 accumulator
SUM32_TERMS = (2 ** 32 - 1) // (PQ - 1)
_F_PQ = float(PQ)

try:
    from ..gpu.numba_compat import numba

    _U = np.uint64(PQ)
    _U32 = np.uint32(PQ)

    @numba.njit(cache=True, nogil=True)
    def _sum_mid(x3: np.ndarray) -> np.ndarray:   # [outer, r, inner] -> [outer, inner]
        o, r, n = x3.shape
        out = np.empty((o, n), np.uint16)
        acc = np.empty(n, np.uint64)
        for i in range(o):
            acc[:] = 0
            for j in range(r):
                for k in range(n):
                    acc[k] += x3[i, j, k]
            for k in range(n):
                out[i, k] = acc[k] % _U
        return out

    @numba.njit(cache=True, nogil=True)
    def _sum_mid32(x3: np.ndarray) -> np.ndarray:   # _sum_mid for r <= SUM32_TERMS: twice the SIMD lanes
        o, r, n = x3.shape
        out = np.empty((o, n), np.uint16)
        acc = np.empty(n, np.uint32)
        for i in range(o):
            acc[:] = 0
            for j in range(r):
                for k in range(n):
                    acc[k] += x3[i, j, k]
            for k in range(n):
                out[i, k] = acc[k] % _U32
        return out

    @numba.njit(cache=True, nogil=True)
    def _sum_last(x2: np.ndarray) -> np.ndarray:  # [outer, r] -> [outer]
        o, r = x2.shape
        out = np.empty(o, np.uint16)
        for i in range(o):
            s = np.uint64(0)
            for j in range(r):
                s += x2[i, j]
            out[i] = s % _U
        return out

    @numba.vectorize(["uint16(uint16, uint16)"], nopython=True, cache=True)
    def _add(a, b):  # type: ignore[no-untyped-def]
        s = np.uint32(a) + np.uint32(b)
        return s - np.uint32(PQ) if s >= np.uint32(PQ) else s

    @numba.vectorize(["uint16(uint16, uint16)"], nopython=True, cache=True)
    def _sub(a, b):  # type: ignore[no-untyped-def]
        return np.uint32(a) - np.uint32(b) if a >= b else np.uint32(a) + np.uint32(PQ) - np.uint32(b)

    @numba.vectorize(["uint16(uint16, uint16)"], nopython=True, cache=True)
    def _mul(a, b):  # type: ignore[no-untyped-def]
        return (np.uint32(a) * np.uint32(b)) % np.uint32(PQ)

    # x mod PQ for an integer-valued float64 0 <= x <= F64_EXACT_MAX, in floating point (SIMD;
    # int64 % is not vectorised): x·(1/PQ) is within 1e-4 of x/PQ, so the floor is off by at
    # most one, which the correction undoes; q·PQ <= x + PQ < 2**53 and x - q·PQ are exact.
    @numba.vectorize(["uint16(float64)"], nopython=True, cache=True)
    def _mod_f64(x):  # type: ignore[no-untyped-def]
        q = np.floor(x * _INV_PQ)
        r = x - q * _F_PQ
        if r < 0:
            r += _F_PQ
        elif r >= _F_PQ:
            r -= _F_PQ
        return np.uint16(r)

    @numba.vectorize(["uint16(float64, uint16)"], nopython=True, cache=True)
    def _mod_f64_add(x, acc):  # type: ignore[no-untyped-def]
        q = np.floor(x * _INV_PQ)
        r = x - q * _F_PQ
        if r < 0:
            r += _F_PQ
        elif r >= _F_PQ:
            r -= _F_PQ
        r += np.float64(acc)
        if r >= _F_PQ:
            r -= _F_PQ
        return np.uint16(r)

    @numba.njit(cache=True, nogil=True)
    def _matmul_few_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:   # [B, m, K] @ [B, K, n], m small
        nb, m, kk = a.shape
        n = b.shape[2]
        out = np.empty((nb, m, n), np.uint16)
        acc = np.empty(n, np.uint64)
        for z in range(nb):
            for i in range(m):
                acc[:] = 0
                for k in range(kk):
                    av = np.uint32(a[z, i, k])
                    for j in range(n):
                        acc[j] += np.uint64(av * np.uint32(b[z, k, j]))   # < 2**30 each: no overflow below 2**34 terms
                for j in range(n):
                    out[z, i, j] = acc[j] % _U
        return out

    # Sums of very short rows (2, 4 or 8 elements, or pairs of columns): the loops above run a
    # few additions per row with a loop's overhead each. Here the row is read as one or two wide
    # words whose 16-bit lanes are the elements (little-endian), so the loop over rows has no
    # inner loop and vectorises. Two field elements add up to at most 2·(PQ - 1) < 2**16, so
    # the lanes of a sum of two words do not carry into each other.
    _M16 = np.uint64(0xFFFF)

    @numba.njit(cache=True, nogil=True)
    def _lanes2(v: np.ndarray) -> np.ndarray:   # [o] uint32 (a row of 2) -> [o]
        out = np.empty(v.shape[0], np.uint16)
        for i in range(v.shape[0]):
            w = v[i]
            out[i] = ((w & np.uint32(0xFFFF)) + (w >> np.uint32(16))) % _U32
        return out

    @numba.njit(cache=True, nogil=True)
    def _lanes4(v: np.ndarray) -> np.ndarray:   # [o] uint64 (a row of 4) -> [o]
        out = np.empty(v.shape[0], np.uint16)
        for i in range(v.shape[0]):
            w = v[i]
            s = (w & _M16) + ((w >> np.uint64(16)) & _M16) + ((w >> np.uint64(32)) & _M16) + (w >> np.uint64(48))
            out[i] = np.uint32(s) % _U32
        return out

    @numba.njit(cache=True, nogil=True)
    def _lanes8(v: np.ndarray) -> np.ndarray:   # [o, 2] uint64 (a row of 8) -> [o]
        out = np.empty(v.shape[0], np.uint16)
        for i in range(v.shape[0]):
            w = v[i, 0] + v[i, 1]    # lanes hold sums of two elements: no carry
            s = (w & _M16) + ((w >> np.uint64(16)) & _M16) + ((w >> np.uint64(32)) & _M16) + (w >> np.uint64(48))
            out[i] = np.uint32(s) % _U32
        return out

    @numba.njit(cache=True, nogil=True)
    def _sum_pairs(v: np.ndarray) -> np.ndarray:   # [o, r] uint32 (lanes: columns 0, 1) -> [o, 2]
        o, r = v.shape
        out = np.empty((o, 2), np.uint16)
        blk = 1024   # rows summed together, column by column (the accumulators stay in L1)
        lo = np.empty(blk, np.uint32)
        hi = np.empty(blk, np.uint32)
        for i0 in range(0, o, blk):
            n = min(blk, o - i0)
            for ii in range(n):
                w = v[i0 + ii, 0]
                lo[ii] = w & np.uint32(0xFFFF)
                hi[ii] = w >> np.uint32(16)
            for j in range(1, r):
                for ii in range(n):
                    w = v[i0 + ii, j]
                    lo[ii] += w & np.uint32(0xFFFF)
                    hi[ii] += w >> np.uint32(16)
            for ii in range(n):
                out[i0 + ii, 0] = lo[ii] % _U32
                out[i0 + ii, 1] = hi[ii] % _U32
        return out

    HAVE_NUMBA = True
except Exception:   # no numba, or it fails to import here: the numpy code below is used
    HAVE_NUMBA = False

_ARITH = {"add": "_add", "sub": "_sub", "mul": "_mul"}



class SearchFieldOps(FieldOps):
    """:class:`FieldOps` with compiled ``reduce_sum``, ``_arith`` and matmul reduction (same values)."""

    name = "numpy"

    def reduce_sum(self, x: Any, axis: int) -> np.ndarray:
        if not HAVE_NUMBA:
            return super().reduce_sum(x, axis)
        x = np.asarray(x)
        ax = axis % x.ndim
        if x.shape[ax] == 1 and x.dtype == FP_DTYPE:
            # A sum of one term: the values are already field elements (< PQ). Returning the
            # array itself (maybe a view) saves a pass, and for a transposed tile product a
            # copy, which at full shapes was the search's largest single cost.
            return x
        if not x.flags.c_contiguous:
            # A transposed array (a tile product, see tiles.matmul) is read in its memory order
            # instead of copied: its axes sorted by stride are C-contiguous. The result stays
            # in that order (a view); whoever needs it contiguous copies the smaller array.
            perm = _memory_order(x)
            if perm is not None:
                r = self._sum_contiguous(x.transpose(perm), perm.index(ax))
                return r.transpose(np.argsort(perm))
        return self._sum_contiguous(np.ascontiguousarray(x), ax)

    @staticmethod
    def _sum_contiguous(x: np.ndarray, ax: int) -> np.ndarray:
        shape = x.shape
        outer = int(np.prod(shape[:ax], dtype=np.int64))
        inner = int(np.prod(shape[ax + 1:], dtype=np.int64))
        r = _sum_short_rows(x, outer, shape[ax], inner)
        if r is None:
            if inner == 1:
                r = _sum_last(x.reshape(outer, shape[ax]))
            elif shape[ax] <= SUM32_TERMS:
                r = _sum_mid32(x.reshape(outer, shape[ax], inner))
            else:
                r = _sum_mid(x.reshape(outer, shape[ax], inner))
        return r.reshape(shape[:ax] + (1,) + shape[ax + 1:])

    #: ``scale`` multiplies arrays of at least this many elements (smaller ones: the table lookup)
    SCALE_MIN_ELEMENTS = 1 << 12

    def scale(self, x: Any, c: int) -> Any:
        """``c·x``: the numpy backend looks every element up in a table (a gather, ~3x the time of
        a pass at 16 M elements); here one compiled multiply mod ``PQ`` over the array in its
        memory order, against a row of ``c`` (a stride-0 scalar is not vectorised). The loop
        accumulators of a tile that does not change with the iteration scale by the loop range."""
        x = np.asarray(x)
        c %= PQ
        if c == 1 or not HAVE_NUMBA or x.dtype != FP_DTYPE or x.size < self.SCALE_MIN_ELEMENTS:
            return super().scale(x, c)
        perm = _memory_order(x)
        if perm is None:
            return super().scale(x, c)
        xt = x.transpose(perm)
        row = math.gcd(xt.size, SCALE_ROW)
        if row < 64:
            return super().scale(x, c)
        r = _mul(xt.reshape(-1, row), _const_row(c, row)).reshape(xt.shape)
        return r.transpose(np.argsort(perm))

    def _arith(self, op: str, a: Any, b: Any) -> np.ndarray:
        a, b = np.asarray(a), np.asarray(b)
        if not HAVE_NUMBA or a.dtype != FP_DTYPE or b.dtype != FP_DTYPE:
            return super()._arith(op, a, b)
        return globals()[_ARITH[op]](a, b)

    #: products of at most this many rows are summed in integers (no float64 copy of the other
    #: operand): 10x faster for one row against [4096, 256], even at 4 rows, slower from ~8
    FEW_ROWS = 4
    #: ... and so are products of at most this many terms (an outer product [4096, 1] x [1, 8]
    #: of 512 blocks: 40 ms vs 64 ms; from 16 terms BLAS wins)
    FEW_TERMS = 8
    #: ... when the other operand is this large (on small arrays the float64 path costs less)
    FEW_MIN_ELEMENTS = 1 << 14

    #: products of at least this many multiply-adds are memoized by their operands' digests
    MEMO_MIN_MACS = 1 << 26
    MEMO_BYTES = 128 << 20

    def __init__(self) -> None:
        self._memo: OrderedDict[tuple, np.ndarray] = OrderedDict()
        self._memo_bytes = 0

    def _matmul_exact(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        few = (a.shape[-2] <= self.FEW_ROWS or a.shape[-1] <= self.FEW_TERMS) and b.size >= self.FEW_MIN_ELEMENTS
        if HAVE_NUMBA and few and a.dtype == FP_DTYPE and b.dtype == FP_DTYPE:
            batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
            a3, b3 = _batched3(a, batch), _batched3(b, batch)
            if a3 is not None and b3 is not None:
                return _matmul_few_rows(a3, b3).reshape(batch + (a.shape[-2], b.shape[-1]))
        macs = max(a.size // a.shape[-1] * b.shape[-1], b.size // b.shape[-2] * a.shape[-2]) * a.shape[-1]
        if macs < self.MEMO_MIN_MACS:
            return self.matmul_f64(a, b.astype(np.float64))
        # Confirming a hit multiplies the target's random inputs again, candidate after
        # candidate (X·W of every RMSNorm+Linear candidate): the same operands, by content.
        from .layout_copy import digest

        key = (a.shape, b.shape, a.dtype.str, b.dtype.str, digest(a), digest(b))
        hit = self._memo.get(key)
        if hit is not None:
            self._memo.move_to_end(key)
            return hit
        r = self.matmul_f64(a, b.astype(np.float64))
        r.flags.writeable = False
        self._remember(key, r)
        return r

    def _remember(self, key: tuple, value: np.ndarray) -> None:
        self._memo[key] = value
        self._memo_bytes += value.nbytes
        while self._memo_bytes > self.MEMO_BYTES and len(self._memo) > 1:
            self._memo_bytes -= self._memo.popitem(last=False)[1].nbytes

    #: the float64 product is computed this many output elements at a time (1 MiB of float64,
    #: reused while in cache) and reduced into the uint16 result at once, in blocks of at least
    #: F64_MIN_ROWS rows: BLAS streams all of b for every block, so blocks of a few rows of a wide
    #: product made it 6x slower (Gemma 7B prefill's [256, 3072] x [3072, 24576]: 0.9 -> 5.7 s)
    F64_CHUNK = 1 << 17
    F64_MIN_ROWS = 256

    def matmul_f64(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """``a @ b`` mod ``PQ`` for field values held as float64 (exact: float64 BLAS on
        integers below ``PQ``, reduced every ``MAX_EXACT_TERMS`` terms, as the numpy backend).
        ``a`` may also be the uint16 fingerprints themselves (converted a block of rows at a time).

        The product is taken a block of output rows at a time (``F64_CHUNK`` elements) into a
        reused float64 buffer and reduced from there into the uint16 result: a whole float64
        product (512 MB for a [64, 16384, 64] result) is never allocated, nor is ``a``'s float64
        copy; at full shapes those fresh pages (their faults, the kernel zeroing them) cost
        several times the product itself."""
        from ..verify import field

        K = a.shape[-1]
        # read at call time: tests lower it to reach the chunked path
        chunk = min(field.MAX_EXACT_TERMS, F64_TERMS)
        if not HAVE_NUMBA:
            a, b = a.astype(np.float64, copy=False), b.astype(np.float64, copy=False)
            acc = None
            for k0 in range(0, K, chunk):
                k1 = min(K, k0 + chunk)
                part = np.matmul(a[..., k0:k1], b[..., k0:k1, :]).astype(np.int64) % PQ
                acc = part if acc is None else (acc + part) % PQ
            return acc.astype(FP_DTYPE, copy=False)
        b = b.astype(np.float64, copy=False)
        batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        m, n = a.shape[-2], b.shape[-1]
        out = np.empty(batch + (m, n), FP_DTYPE)
        a3, b3 = _batched3(a, batch), _batched3(b, batch)
        if a3 is None or b3 is None:   # a batch that would need a copy to flatten: one product
            _mm_reduce(a, b, out, chunk)
            return out
        o3 = out.reshape((-1, m, n))
        nb = o3.shape[0]
        rows = max(self.F64_MIN_ROWS, self.F64_CHUNK // max(1, n))
        if rows >= m:     # whole products, several batch entries at a time
            step = max(1, rows // max(1, m))
            for z0 in range(0, nb, step):
                z1 = min(nb, z0 + step)
                _mm_reduce(a3[z0:z1], b3[z0:z1], o3[z0:z1], chunk)
        else:             # blocks of rows of one batch entry at a time
            for z in range(nb):
                for r0 in range(0, m, rows):
                    r1 = min(m, r0 + rows)
                    _mm_reduce(a3[z, r0:r1], b3[z], o3[z, r0:r1], chunk)
        return out


def _mm_reduce(a: np.ndarray, b: np.ndarray, out: np.ndarray, chunk: int) -> None:
    """``out[...] = a @ b mod PQ`` (``b`` float64; ``a`` float64 or uint16), ``chunk`` terms per
    float64 product: one block of :meth:`SearchFieldOps.matmul_f64`."""
    K = a.shape[-1]
    for k0 in range(0, K, chunk):
        k1 = min(K, k0 + chunk)
        ak = a[..., k0:k1] if k1 - k0 < K else a
        bk = b[..., k0:k1, :] if k1 - k0 < K else b
        part = np.matmul(ak, bk, dtype=np.float64)
        if k0 == 0:
            _mod_f64(part, out=out)
        else:
            _mod_f64_add(part, out, out=out)


#: sums of short rows read as wide words need the elements in little-endian lanes
_LITTLE = sys.byteorder == "little"
#: ... and are worth it from this many rows (below, the plain loops cost microseconds)
SHORT_ROWS_MIN = 1 << 12


def _sum_short_rows(x: np.ndarray, outer: int, r: int, inner: int) -> np.ndarray | None:
    """The sum over the middle axis of contiguous ``x`` seen as ``[outer, r, inner]``, for rows of
    2, 4 or 8 elements (``inner == 1``) or pairs of columns (``inner == 2``), read as wide words
    (``_lanes*``, ``_sum_pairs``); None where that does not apply (then the plain loops run)."""
    if not _LITTLE or x.dtype != FP_DTYPE or outer < SHORT_ROWS_MIN or not x.flags.c_contiguous:
        return None
    flat = x.reshape(-1)
    addr = flat.ctypes.data
    if inner == 1 and r == 2 and addr % 4 == 0:
        return _lanes2(flat.view(np.uint32))
    if inner == 1 and r in (4, 8) and addr % 8 == 0:
        v = flat.view(np.uint64)
        return _lanes4(v) if r == 4 else _lanes8(v.reshape(outer, 2))
    if inner == 2 and r <= SUM32_TERMS and addr % 4 == 0:
        return _sum_pairs(flat.view(np.uint32).reshape(outer, r))
    return None


#: the row ``scale`` multiplies against (the ufunc's inner loop runs along it)
SCALE_ROW = 4096


@lru_cache(maxsize=64)
def _const_row(c: int, n: int) -> np.ndarray:
    r = np.full(n, c, FP_DTYPE)
    r.setflags(write=False)
    return r


def _memory_order(x: np.ndarray) -> list[int] | None:
    """The axis order in which ``x`` is C-contiguous (its axes sorted by stride), or None
    (a strided or broadcast view)."""
    if x.flags.c_contiguous:
        return list(range(x.ndim))
    perm = sorted(range(x.ndim), key=lambda d: -x.strides[d])
    return perm if x.transpose(perm).flags.c_contiguous else None


def _batched3(x: np.ndarray, batch: tuple[int, ...]) -> np.ndarray | None:
    """``x`` broadcast to ``batch + x.shape[-2:]`` as a ``[B, rows, cols]`` view, or None when
    that would need a copy (a large operand shared by the batch: the BLAS path folds it)."""
    v = np.broadcast_to(x, batch + x.shape[-2:]).view()
    try:
        v.shape = (-1,) + x.shape[-2:]   # raises instead of copying
    except AttributeError:
        return None
    return v


#: The search's one instance on the CPU.
SEARCH_OPS = SearchFieldOps()
