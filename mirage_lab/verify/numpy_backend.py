"""The numpy fingerprint backend: :class:`FieldOps` and its module-level functions.

Every op of :mod:`.field`'s arithmetic on numpy arrays: the CPU backend, and the base
class whose compositions the CUDA backend (:mod:`.cuda_backend`) reuses. The module
functions (``unary``, ``binary``, ``matmul``, ...) are this backend's ops on any integer
array-like (reduced to fingerprints first); they are also reachable as ``field.unary`` etc.

    >>> matmul([[1, 2]], [[3], [4]]).tolist()
    [[11]]
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from . import field
from .field import (ACCUM_KINDS, BINARY_OPS, FP_DTYPE, PQ, UNARY_OPS, FieldError, as_fingerprint, attrs_key,
                    field_inverse, inv_rms_table, rms_table, scale_table, unary_table)
from .tile_plans import gather_plan, scatter_plan


class FieldOps:
    """Fingerprint ops on numpy arrays (the CPU backend; :class:`.cuda_backend.CudaFieldOps` mirrors it).

    Composite ops (rms_norm, accumulators, div, gather) are built here from a few primitives
    (``lut``, ``_arith``, ``_pow``, ``matmul``, ``reduce_sum``, ``copy_view``, the strided
    scatter, ``concat``), so a backend only re-implements those primitives.

        >>> ops = FieldOps()
        >>> x = ops.asarray([[3, 4]])
        >>> ops.unary("square", x).tolist()
        [[9, 16]]
    """

    name = "numpy"

    # ---- array plumbing
    def asarray(self, x: Any) -> np.ndarray:
        """Bring ``x`` (any integer array-like) into this backend as a uint16 fingerprint array."""
        return as_fingerprint(x)

    def to_numpy(self, x: Any) -> np.ndarray:
        """A host numpy copy (numpy backend: the array itself)."""
        return np.asarray(x)

    def shape(self, x: Any) -> tuple[int, ...]:
        return tuple(x.shape)

    def reshape(self, x: Any, shape: Sequence[int]) -> Any:
        return np.reshape(x, tuple(shape))

    def broadcast_to(self, x: Any, shape: Sequence[int]) -> Any:
        """A materialised copy of ``x`` broadcast to ``shape``."""
        return np.ascontiguousarray(np.broadcast_to(x, tuple(shape)))

    # ---- primitives
    def lut(self, x: Any, table: np.ndarray) -> np.ndarray:
        """Apply a length-``PQ`` table elementwise."""
        return table[x]

    def _arith(self, op: str, a: Any, b: Any) -> np.ndarray:
        a32 = np.asarray(a).astype(np.int32)
        b32 = np.asarray(b)
        if op == "add":
            r = a32 + b32
            r -= PQ * (r >= PQ)
        elif op == "sub":
            r = a32 - b32
            r += PQ * (r < 0)
        elif op == "mul":
            r = a32 * b32  # < 2**30: fits int32
            r %= PQ
        else:  # pragma: no cover - callers validate
            raise FieldError(f"unknown arithmetic op {op!r}")
        return r.astype(FP_DTYPE)

    def _pow(self, a: Any, b: Any) -> np.ndarray:
        # Square-and-multiply with b's raw value (< 2**15) as the exponent (Mirage's pow).
        base, e = np.broadcast_arrays(np.asarray(a).astype(np.int64), np.asarray(b).astype(np.int64))
        out = np.ones(base.shape, dtype=np.int64)
        base = base.copy()
        e = e.copy()
        for _ in range(16):
            odd = (e & 1).astype(bool)
            out[odd] = out[odd] * base[odd] % PQ
            base = base * base % PQ
            e >>= 1
        return out.astype(FP_DTYPE)

    def matmul(self, a: Any, b: Any) -> np.ndarray:
        """``[..., m, K] @ [..., K, n]`` mod PQ, leading axes broadcast.

        Exact: float64 BLAS on integers below PQ, reduced every ``MAX_EXACT_TERMS`` terms.
        """
        a, b = np.asarray(a), np.asarray(b)
        if a.ndim < 2 or b.ndim < 2 or a.shape[-1] != b.shape[-2]:
            raise FieldError(f"matmul: shapes {a.shape} and {b.shape} do not chain")
        try:
            np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        except ValueError as e:
            raise FieldError(f"matmul: batch shapes {a.shape[:-2]} and {b.shape[:-2]} do not broadcast") from e
        return self._matmul_exact(a, b)

    def _matmul_exact(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        K = a.shape[-1]
        acc = None
        chunk = field.MAX_EXACT_TERMS   # read at call time: tests lower it to reach the chunked path
        for k0 in range(0, K, chunk):
            k1 = min(K, k0 + chunk)
            part = np.matmul(a[..., k0:k1].astype(np.float64), b[..., k0:k1, :].astype(np.float64))
            # int64 % by a constant is several times faster than float fmod
            part = part.astype(np.int64) % PQ
            acc = part if acc is None else (acc + part) % PQ
        return acc.astype(FP_DTYPE)

    def reduce_sum(self, x: Any, axis: int) -> np.ndarray:
        """Sum over ``axis`` (kept, with size 1) mod PQ."""
        return (np.asarray(x).sum(axis=axis, keepdims=True, dtype=np.int64) % PQ).astype(FP_DTYPE)

    def copy_view(self, x: Any, shape: Sequence[int], strides: Sequence[int]) -> np.ndarray:
        """A new contiguous array of ``shape`` holding the strided view of ``x``'s elements.

        ``strides`` are in elements, over ``x`` read flat in C order (size-0 strides
        broadcast): ``out[i] = x.flat[Σ_d i_d·strides[d]]``. Any view that reshape,
        transpose and broadcast can make of ``x`` is such a view; gathers use it.

            >>> FieldOps().copy_view(np.arange(6, dtype=np.uint16), [3, 2], [1, 3]).tolist()
            [[0, 3], [1, 4], [2, 5]]
        """
        x = np.ascontiguousarray(x)
        item = x.itemsize
        v = np.lib.stride_tricks.as_strided(x, shape=tuple(int(s) for s in shape),
                                            strides=[int(s) * item for s in strides], writeable=False)
        return np.ascontiguousarray(v)

    def _strided_gather(self, x: Any, shape: list[int], strides: list[int], out_shape: list[int]) -> Any:
        # one test's tensor after another: the test axis strides by a whole tensor
        x = self.asarray(x)
        dims = self.shape(x)
        k = dims[0]
        n = int(np.prod(dims[1:]))
        return self.reshape(self.copy_view(x, [k] + list(shape), [n] + list(strides)), [k] + list(out_shape))

    def _strided_scatter(self, src: Any, out_dims: list[int], shape: list[int], strides: list[int]) -> np.ndarray:
        src = np.asarray(src)
        k = src.shape[0]
        out = np.empty([k] + list(out_dims), dtype=FP_DTYPE)
        item = out.itemsize
        view = np.lib.stride_tricks.as_strided(out, shape=[k] + shape, strides=[out.strides[0]] + [s * item for s in strides])
        b = src.shape[1]
        view[...] = src.reshape([k] + (shape[:3] if b > 1 else [1, 1, 1]) + shape[3:])
        return out

    def concat(self, a: Any, b: Any, axis: int) -> np.ndarray:
        """Concatenate along ``axis`` (other axes broadcast first)."""
        a, b = np.asarray(a), np.asarray(b)
        ax = axis % a.ndim
        sa, sb = list(a.shape), list(b.shape)
        common = [max(x, y) for x, y in zip(sa, sb)]
        sa2 = common.copy(); sa2[ax] = sa[ax]
        sb2 = common.copy(); sb2[ax] = sb[ax]
        return np.concatenate([np.broadcast_to(a, sa2), np.broadcast_to(b, sb2)], axis=ax)

    # ---- op-level API (backend-neutral compositions)
    def unary(self, op_type: str, x: Any, attrs: dict | None = None) -> Any:
        """A unary op (exp, silu, gelu, relu, sqrt, square, clamp, mul_scalar, inv).

        >>> FieldOps().unary("mul_scalar", np.array([8], np.uint16), {"scalar": 0.25}).tolist()
        [2]
        """
        if op_type not in UNARY_OPS:
            raise FieldError(f"unknown unary op {op_type!r}; known: {UNARY_OPS}")
        return self.lut(x, unary_table(op_type, attrs_key(op_type, attrs)))

    def binary(self, op_type: str, a: Any, b: Any) -> Any:
        """A binary op (add, sub, mul, div, pow) with numpy broadcasting.

        Division is ``a · b⁻¹`` through the inverse table (``b**(m-2)`` per residue, so 0 ↦ 0).
        """
        if op_type in ("add", "sub", "mul"):
            return self._arith(op_type, a, b)
        if op_type == "div":
            return self._arith("mul", a, self.lut(b, unary_table("inv")))
        if op_type == "pow":
            return self._pow(a, b)
        raise FieldError(f"unknown binary op {op_type!r}; known: {BINARY_OPS}")

    def scale(self, x: Any, c: int) -> Any:
        """``c·x`` for an int ``c``."""
        c %= PQ
        return x if c == 1 else self.lut(x, scale_table(c))

    def rms_norm(self, x: Any) -> Any:
        """``x / sqrt(mean(x²))`` over the last axis."""
        n = self.shape(x)[-1]
        s = self.reduce_sum(self.lut(x, unary_table("square")), -1)
        return self._arith("mul", x, self.lut(s, inv_rms_table(n)))

    def accum(self, kind: str | None, x: Any, axis: int = 2, frange: int | None = None, w: int | None = None,
              dimx: int = 64) -> Any:
        """A for-loop accumulator: reduce the iteration ``axis`` (default 2 of ``[k, B, R, *tile]``).

        ``frange`` is the loop's range: an ``x`` whose iteration axis has size 1 is the same
        in every iteration and counts ``frange`` times. ``w`` is the tile's last dim (defaults
        to ``x``'s). Kinds: ``None`` (acc += x), ``"sum"`` / ``"mean"`` / ``"rms"`` (over the last
        dim too; mean divides by frange·w, rms is sqrt(Σx²/(frange·w))), ``"sum_todimx"``
        (last dim folds to ``dimx``: ``out[..,j] = Σ_k x[.., j + dimx·k]``). The result drops
        ``axis``.

            >>> ops = FieldOps()
            >>> x = ops.asarray(np.arange(8).reshape(1, 1, 2, 4))   # k=1, B=1, R=2, tile [4]
            >>> ops.accum("sum", x).tolist()
            [[[28]]]
        """
        if kind not in ACCUM_KINDS:
            raise FieldError(f"unknown accumulator {kind!r}; use one of {ACCUM_KINDS}")
        shp = self.shape(x)
        ax = axis % len(shp)
        if ax == len(shp) - 1:
            raise FieldError(f"accum: the iteration axis {axis} cannot be the tile's last axis (shape {shp})")
        r = shp[ax]
        frange = r if frange is None else int(frange)
        if r not in (1, frange):
            raise FieldError(f"accum: iteration axis has size {r}, but forloop_range is {frange}")
        w = shp[-1] if w is None else int(w)
        if kind == "rms":
            x = self.lut(x, unary_table("square"))
        if kind == "sum_todimx":
            if shp[-1] % dimx:
                raise FieldError(f"accum sum_todimx: last dim {shp[-1]} is not a multiple of reduction_dimx={dimx}")
            x = self.reshape(x, list(shp[:-1]) + [shp[-1] // dimx, dimx])
            x = self.reduce_sum(x, -2)
            x = self.reshape(x, list(shp[:-1]) + [dimx])
        elif kind is not None:
            x = self.reduce_sum(x, -1)
        x = self.reduce_sum(x, ax)
        out_shape = [s for i, s in enumerate(self.shape(x)) if i != ax]
        x = self.reshape(x, out_shape)
        if r == 1 and frange > 1:
            x = self.scale(x, frange)
        if kind == "mean":
            x = self.scale(x, field_inverse(frange * w))
        elif kind == "rms":
            x = self.lut(x, rms_table(frange * w))
        return x

    def gather_tiles(self, x: Any, grid: Sequence[int], imap: Sequence[int], fmap: int, frange: int) -> Any:
        """All blocks' tiles of ``x`` (``[k, *dims]``) for all iterations: ``[k, B, R, *tile]``.

        The numpy analog of ``mirage_lab.interp.reference.gather_tiles``, with a leading
        test axis; ``B`` is 1 when no grid axis splits ``x`` and ``R`` is 1 when it is not
        looped (the same tile for every block / iteration).
        """
        shape, strides, out_shape = gather_plan(self.shape(x)[1:], grid, imap, fmap, frange)
        return self._strided_gather(x, shape, strides, out_shape)

    def scatter_tiles(self, tiles: Any, grid: Sequence[int], omap: Sequence[int], out_dims: Sequence[int]) -> Any:
        """Inverse of the output map: ``[k, B, *tile]`` (or ``[k, 1, *tile]``) -> ``[k, *out_dims]``."""
        shp = self.shape(tiles)
        nb = grid[0] * grid[1] * grid[2]
        if shp[1] not in (1, nb):
            raise FieldError(f"scatter_tiles: {shp[1]} block tiles for a grid of {nb} blocks")
        shape, strides = scatter_plan(shp[2:], grid, omap, out_dims)
        return self._strided_scatter(tiles, list(out_dims), shape, strides)


#: The numpy backend's one instance (``get_ops("numpy")``).
NUMPY_OPS = FieldOps()


def unary(op_type: str, x: Any, attrs: dict | None = None) -> np.ndarray:
    """Numpy ``FieldOps.unary``."""
    return NUMPY_OPS.unary(op_type, as_fingerprint(x), attrs)


def binary(op_type: str, a: Any, b: Any) -> np.ndarray:
    """Numpy ``FieldOps.binary`` (broadcasting)."""
    return NUMPY_OPS.binary(op_type, as_fingerprint(a), as_fingerprint(b))


def matmul(a: Any, b: Any) -> np.ndarray:
    """Numpy ``FieldOps.matmul`` (batched over leading axes)."""
    return NUMPY_OPS.matmul(as_fingerprint(a), as_fingerprint(b))


def reduce_sum(x: Any, axis: int) -> np.ndarray:
    """Numpy ``FieldOps.reduce_sum`` (keepdims)."""
    return NUMPY_OPS.reduce_sum(as_fingerprint(x), axis)


def rms_norm(x: Any) -> np.ndarray:
    """Numpy ``FieldOps.rms_norm`` over the last axis."""
    return NUMPY_OPS.rms_norm(as_fingerprint(x))


def accum(kind: str | None, x: Any, axis: int = 2, frange: int | None = None, w: int | None = None,
          dimx: int = 64) -> np.ndarray:
    """Numpy ``FieldOps.accum``."""
    return NUMPY_OPS.accum(kind, as_fingerprint(x), axis, frange, w, dimx)


def concat(a: Any, b: Any, axis: int) -> np.ndarray:
    """Numpy ``FieldOps.concat``."""
    return NUMPY_OPS.concat(as_fingerprint(a), as_fingerprint(b), axis)


def gather_tiles(x: Any, grid: Sequence[int], imap: Sequence[int], fmap: int, frange: int) -> np.ndarray:
    """Numpy ``FieldOps.gather_tiles``."""
    return NUMPY_OPS.gather_tiles(as_fingerprint(x), grid, imap, fmap, frange)


def scatter_tiles(tiles: Any, grid: Sequence[int], omap: Sequence[int], out_dims: Sequence[int]) -> np.ndarray:
    """Numpy ``FieldOps.scatter_tiles``."""
    return NUMPY_OPS.scatter_tiles(as_fingerprint(tiles), grid, omap, out_dims)
