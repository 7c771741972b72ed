"""The fingerprint ops on a GPU: Numba-CUDA kernels mirroring :class:`.numpy_backend.FieldOps`.

Only the primitives are re-implemented (table lookup, add/sub/mul/pow with broadcasting,
batched matmul, sum over an axis, strided copies for gather/scatter/concat/broadcast);
rms_norm, accumulators, division and gathers are the base class's compositions of them, and every
unary op is the same lookup table as on the CPU, so both backends agree bit for bit.

Arithmetic: values are below PQ < 2**15, so a product fits in 30 bits; sums are kept in
int64 and reduced by Barrett reduction (a multiply and a shift, valid below 2**37), never
by a 64-bit ``%`` in a loop. Arrays live on the device between ops (uint16, contiguous).

All numba imports go through :mod:`mirage_lab.gpu.numba_compat`. Every kernel is compiled with
``cache=True`` (numba's on-disk cache, one entry per argument signature), so a search's worker
processes load them instead of each compiling them again at start (issue 20).

    >>> from mirage_lab.verify import get_ops
    >>> ops = get_ops("cuda")                     # doctest: +SKIP  (needs a GPU or the simulator)
    >>> ops.to_numpy(ops.matmul(ops.asarray([[1, 2]]), ops.asarray([[3], [4]])))   # doctest: +SKIP
    array([[11]], dtype=uint16)
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from ..gpu.numba_compat import cuda
from .field import FP_DTYPE, PQ, TABLE_CACHE_SIZE, FieldError, as_fingerprint
from .numpy_backend import FieldOps
from .tile_plans import contiguous_strides

_BAR_SHIFT = 40
_BAR_M = (1 << _BAR_SHIFT) // PQ
_RED_AT = 1 << 36  # reduce an int64 accumulator before it can pass 2**37
_TPB = 256

_OPCODE = {"add": 0, "sub": 1, "mul": 2, "pow": 3}


@cuda.jit(device=True)
def _red(x):
    # Barrett reduction of 0 <= x < 2**37 modulo PQ: the quotient estimate is off by at most 1.
    q = (x * _BAR_M) >> _BAR_SHIFT
    r = x - q * PQ
    if r >= PQ:
        r -= PQ
    return r


@cuda.jit(cache=True)
def _lut_kernel(x, table, out, n):
    i = cuda.grid(1)
    if i < n:
        out[i] = table[x[i]]


@cuda.jit(cache=True)
def _arith_kernel(a, b, out, shape, sa, sb, op, n):
    i = cuda.grid(1)
    if i >= n:
        return
    rem = i
    ia = 0
    ib = 0
    for d in range(len(shape) - 1, -1, -1):
        s = shape[d]
        idx = rem % s
        rem //= s
        ia += idx * sa[d]
        ib += idx * sb[d]
    x = np.int64(a[ia])
    y = np.int64(b[ib])
    if op == 0:
        r = x + y
        if r >= PQ:
            r -= PQ
    elif op == 1:
        r = x - y
        if r < 0:
            r += PQ
    elif op == 2:
        r = _red(x * y)
    else:
        r = np.int64(1)
        base = x
        e = y
        for _ in range(16):
            if e & 1:
                r = _red(r * base)
            base = _red(base * base)
            e >>= 1
    out[i] = r


@cuda.jit(cache=True)
def _matmul_kernel(a, b, out, bshape, sa, sb, m, n, K, total):
    # One thread per output element; the k loop only multiplies, adds and compares.
    i = cuda.grid(1)
    if i >= total:
        return
    col = i % n
    rest = i // n
    row = rest % m
    rem = rest // m
    oa = 0
    ob = 0
    for d in range(len(bshape) - 1, -1, -1):
        s = bshape[d]
        idx = rem % s
        rem //= s
        oa += idx * sa[d]
        ob += idx * sb[d]
    oa += row * K
    ob += col
    acc = np.int64(0)
    for kk in range(K):
        acc += np.int64(a[oa + kk]) * np.int64(b[ob + kk * n])
        if acc >= _RED_AT:
            acc = _red(acc)
    out[i] = _red(acc)


@cuda.jit(cache=True)
def _reduce_kernel(x, out, n, inner, total):
    i = cuda.grid(1)
    if i >= total:
        return
    o = i // inner
    j = i - o * inner
    base = o * n * inner + j
    acc = np.int64(0)
    for t in range(n):
        acc += np.int64(x[base + t * inner])
        if acc >= _RED_AT:
            acc = _red(acc)
    out[i] = _red(acc)


@cuda.jit(cache=True)
def _copy_kernel(src, dst, shape, sstr, dstr, soff, doff, n):
    i = cuda.grid(1)
    if i >= n:
        return
    rem = i
    si = soff
    di = doff
    for d in range(len(shape) - 1, -1, -1):
        s = shape[d]
        idx = rem % s
        rem //= s
        si += idx * sstr[d]
        di += idx * dstr[d]
    dst[di] = src[si]


def _is_device(x: Any) -> bool:
    # The simulator's fake device arrays have no __cuda_array_interface__ helper in numba.cuda.
    return not isinstance(x, np.ndarray) and hasattr(x, "copy_to_host")


def _collapse(shape: Sequence[int], *strides: Sequence[int]) -> tuple[tuple[int, ...], ...]:
    """Drop size-1 dims and merge neighbours that are contiguous in every operand (fewer index divisions)."""
    dims = [(s, [st[d] for st in strides]) for d, s in enumerate(shape) if s != 1]
    if not dims:
        return ((1,),) + tuple((0,) for _ in strides)
    out = [dims[0]]
    for s, st in dims[1:]:
        ps, pst = out[-1]
        if all(pst[j] == st[j] * s for j in range(len(strides))):
            out[-1] = (ps * s, st)
        else:
            out.append((s, st))
    return (tuple(s for s, _ in out),) + tuple(tuple(st[j] for _, st in out) for j in range(len(strides)))


def _bstrides(shape: Sequence[int], out_shape: Sequence[int]) -> list[int]:
    """Element strides of a contiguous ``shape`` read broadcast to ``out_shape`` (0 on broadcast dims)."""
    shape = [1] * (len(out_shape) - len(shape)) + list(shape)
    st = contiguous_strides(shape)
    return [0 if s == 1 and o != 1 else st[d] for d, (s, o) in enumerate(zip(shape, out_shape))]


def _blocks(n: int) -> int:
    return max(1, math.ceil(n / _TPB))


class CudaFieldOps(FieldOps):
    """:class:`FieldOps` on device arrays (numba ``DeviceNDArray``, uint16, contiguous)."""

    name = "cuda"
    _inst: "CudaFieldOps | None" = None

    def __init__(self) -> None:
        self._tables: dict[int, tuple[np.ndarray, Any]] = {}

    @classmethod
    def instance(cls) -> "CudaFieldOps":
        if cls._inst is None:
            ops = cls()
            ops.self_check()
            cls._inst = ops
        return cls._inst

    def self_check(self) -> None:
        """Raise :class:`FieldError` unless add, mul and matmul on the device agree with numpy modulo PQ.

        The kernels are cached on disk keyed by this file, not by ``field.PQ`` that they compile in: a
        kernel cached before P or Q changed would fingerprint modulo the old PQ, silently. Three tiny
        launches per process catch it.
        """
        from . import field

        pq = field.PQ
        a = np.array([[pq - 1, 12345, 2, 0]], dtype=np.int64)
        b = np.array([[pq - 1], [23456], [3], [5]], dtype=np.int64)
        da, db = self.asarray(a.astype(FP_DTYPE)), self.asarray(b.T.astype(FP_DTYPE))
        got = [self.to_numpy(self._arith("add", da, db)), self.to_numpy(self._arith("mul", da, db)),
               self.to_numpy(self.matmul(da, self.asarray(b.astype(FP_DTYPE))))]
        want = [(a + b.T) % pq, (a * b.T) % pq, (a @ b) % pq]
        if not all(np.array_equal(g.astype(np.int64), w) for g, w in zip(got, want)):
            raise FieldError(f"the CUDA fingerprint kernels do not compute modulo PQ={pq}: numba's disk cache holds "
                             "kernels compiled for another P or Q. Delete the cuda_backend*.nbi/.nbc files under "
                             "mirage_lab/verify/__pycache__ (or under NUMBA_CACHE_DIR) and run again.")

    # ---- plumbing
    def asarray(self, x: Any) -> Any:
        if _is_device(x):
            if np.dtype(x.dtype) != FP_DTYPE:
                raise FieldError(f"device fingerprints must be uint16, got {x.dtype}")
            return x
        return cuda.to_device(np.ascontiguousarray(as_fingerprint(x)))

    def to_numpy(self, x: Any) -> np.ndarray:
        return x.copy_to_host() if _is_device(x) else np.asarray(x)

    def _empty(self, shape: Sequence[int]) -> Any:
        return cuda.device_array(tuple(int(s) for s in shape), dtype=FP_DTYPE)

    def _flat(self, x: Any) -> Any:
        return x.reshape(int(np.prod(x.shape)))

    def reshape(self, x: Any, shape: Sequence[int]) -> Any:
        return x.reshape(tuple(int(s) for s in shape))

    def _device_table(self, table: np.ndarray) -> Any:
        got = self._tables.get(id(table))
        if got is None or got[0] is not table:
            got = (table, cuda.to_device(table))
            self._tables[id(table)] = got
            # bounded like the host tables (field.TABLE_CACHE_SIZE): oldest device copies go first
            while len(self._tables) > 2 * TABLE_CACHE_SIZE:
                del self._tables[next(iter(self._tables))]
        return got[1]

    def _copy(self, src: Any, dst: Any, shape: Sequence[int], sstr: Sequence[int], dstr: Sequence[int],
              soff: int = 0, doff: int = 0) -> None:
        shape, sstr, dstr = _collapse(shape, sstr, dstr)
        n = int(np.prod(shape))
        _copy_kernel[_blocks(n), _TPB](self._flat(src), self._flat(dst), shape, sstr, dstr, soff, doff, n)

    def copy_view(self, x: Any, shape: Sequence[int], strides: Sequence[int]) -> Any:
        """A new contiguous device array of ``shape`` holding the strided view of ``x``'s elements
        (``strides`` in elements over ``x`` read flat; see :meth:`.numpy_backend.FieldOps.copy_view`)."""
        x = self.asarray(x)
        shape = [int(s) for s in shape]
        out = self._empty(shape)
        if out.size:
            self._copy(x, out, shape, [int(s) for s in strides], contiguous_strides(shape))
        return out

    def broadcast_to(self, x: Any, shape: Sequence[int]) -> Any:
        x = self.asarray(x)
        out = self._empty(shape)
        self._copy(x, out, list(shape), _bstrides(x.shape, shape), contiguous_strides(shape))
        return out

    # ---- primitives
    def lut(self, x: Any, table: np.ndarray) -> Any:
        x = self.asarray(x)
        out = self._empty(x.shape)
        n = int(np.prod(x.shape))
        _lut_kernel[_blocks(n), _TPB](self._flat(x), self._device_table(table), self._flat(out), n)
        return out

    def _binary_launch(self, op: str, a: Any, b: Any) -> Any:
        a, b = self.asarray(a), self.asarray(b)
        try:
            shape = np.broadcast_shapes(tuple(a.shape), tuple(b.shape))
        except ValueError as e:
            raise FieldError(f"{op}: shapes {tuple(a.shape)} and {tuple(b.shape)} do not broadcast") from e
        out = self._empty(shape)
        n = int(np.prod(shape))
        cs, sa, sb = _collapse(shape, _bstrides(a.shape, shape), _bstrides(b.shape, shape))
        _arith_kernel[_blocks(n), _TPB](self._flat(a), self._flat(b), self._flat(out), cs, sa, sb, _OPCODE[op], n)
        return out

    def _arith(self, op: str, a: Any, b: Any) -> Any:
        return self._binary_launch(op, a, b)

    def _pow(self, a: Any, b: Any) -> Any:
        return self._binary_launch("pow", a, b)

    def matmul(self, a: Any, b: Any) -> Any:
        a, b = self.asarray(a), self.asarray(b)
        sa_, sb_ = tuple(a.shape), tuple(b.shape)
        if len(sa_) < 2 or len(sb_) < 2 or sa_[-1] != sb_[-2]:
            raise FieldError(f"matmul: shapes {sa_} and {sb_} do not chain")
        m, K = sa_[-2:]
        n = sb_[-1]
        try:
            bshape = np.broadcast_shapes(sa_[:-2], sb_[:-2])
        except ValueError as e:
            raise FieldError(f"matmul: batch shapes {sa_[:-2]} and {sb_[:-2]} do not broadcast") from e
        out = self._empty(tuple(bshape) + (m, n))
        total = int(np.prod(bshape)) * m * n
        stra = [s * m * K for s in _bstrides(sa_[:-2], bshape)] if bshape else []
        strb = [s * K * n for s in _bstrides(sb_[:-2], bshape)] if bshape else []
        cs, ca, cb = _collapse(list(bshape), stra, strb) if bshape else ((1,), (0,), (0,))
        _matmul_kernel[_blocks(total), _TPB](self._flat(a), self._flat(b), self._flat(out), cs, ca, cb, m, n, K, total)
        return out

    def reduce_sum(self, x: Any, axis: int) -> Any:
        x = self.asarray(x)
        shp = tuple(x.shape)
        ax = axis % len(shp)
        outer = int(np.prod(shp[:ax]))
        inner = int(np.prod(shp[ax + 1:]))
        out_shape = shp[:ax] + (1,) + shp[ax + 1:]
        out = self._empty(out_shape)
        total = outer * inner
        _reduce_kernel[_blocks(total), _TPB](self._flat(x), self._flat(out), shp[ax], inner, total)
        return out

    def _strided_scatter(self, src: Any, out_dims: list[int], shape: list[int], strides: list[int]) -> Any:
        src = self.asarray(src)
        k = src.shape[0]
        out = self._empty([k] + list(out_dims))
        full = [k] + list(shape)
        if src.shape[1] > 1:
            sstr = contiguous_strides(full)
        else:
            tile_str = contiguous_strides(shape[3:])
            sstr = [int(np.prod(src.shape[1:]))] + [0, 0, 0] + tile_str
        self._copy(src, out, full, sstr, [int(np.prod(out_dims))] + list(strides))
        return out

    def concat(self, a: Any, b: Any, axis: int) -> Any:
        a, b = self.asarray(a), self.asarray(b)
        ax = axis % len(a.shape)
        sa, sb = list(a.shape), list(b.shape)
        common = [max(x, y) for x, y in zip(sa, sb)]
        out_shape = common.copy()
        out_shape[ax] = sa[ax] + sb[ax]
        out = self._empty(out_shape)
        ost = contiguous_strides(out_shape)
        for src, s, off in ((a, sa, 0), (b, sb, sa[ax] * ost[ax])):
            view = common.copy()
            view[ax] = s[ax]
            self._copy(src, out, view, _bstrides(s, view), ost, 0, off)
        return out
