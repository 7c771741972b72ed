"""Finite-field arithmetic for fingerprints: values in Z_pq ≅ Z_p × Z_q (MIRAGE_SPEC §4).

A fingerprint tensor is a ``uint16`` array of values in ``[0, PQ)``. By the Chinese
remainder theorem Z_pq is the ring Z_p × Z_q, so add, sub and mul mod ``PQ`` are exactly
the per-residue ops; only the non-polynomial ops (exp, division, sqrt, ...) look at the
residues. Every unary op is a function Z_pq → Z_pq and is applied as a 25651-entry lookup
table, so the numpy and CUDA backends share one definition and agree bit for bit.

Shapes: every function works on arrays with arbitrary leading batch axes. Kernel-level
tensors are ``[k, *dims]`` (``k`` = number of random tests); block-level tiles are
``[k, B, R, *tile]`` inside the for-loop and ``[k, B, *tile]`` after it (B = blocks, R =
iterations). A size-1 ``B`` or ``R`` axis means "the same for every block / iteration"
(replicated loaders stay that compact; numpy broadcasting does the rest). Address a
tensor's own dims with negative axes (``axis=-1`` is the last dim) so the same call works
at either level.

    >>> import numpy as np
    >>> from mirage_lab.verify import field
    >>> a = np.array([[1, 2]], dtype=np.uint16); b = np.array([[3], [4]], dtype=np.uint16)
    >>> int(field.matmul(a, b)[0, 0])                                  # 1*3 + 2*4
    11
    >>> int(field.binary("div", field.binary("mul", a, b[0:1, :1]), b[0:1, :1])[0, 1])
    2

Choice of field: p = 227, q = 113 (the paper's pair), so ``q | p − 1`` (226 = 2·113) and
``PQ = 25651`` fits uint16. See ``docs/verifier.md`` for every op's definition and why.
"""
from __future__ import annotations

import struct
import zlib
from fractions import Fraction
from functools import lru_cache
from typing import Any, Sequence

import numpy as np

from ..errors import MirageLabError

P = 227
Q = 113
PQ = P * Q  # 25651 < 2**16
#: g has multiplicative order q in Z_p, so g**(a + b) = g**a * g**b with exponents in Z_q.
EXP_BASE = 3
#: sqrt(x) := x**57 in Z_pq. 57 = (p+1)/4 is a true square root of every quadratic residue
#: mod p (p ≡ 3 mod 4); mod q (q ≡ 1 mod 4, no closed form) 57 = (q+1)/2 gives the
#: permutation x -> x·(x|q). Either way the map is deterministic and multiplicative.
SQRT_EXP = 57
#: CRT idempotents: E_P ≡ 1 (mod p), ≡ 0 (mod q); E_Q the other way round.
E_P = Q * pow(Q, -1, P)
E_Q = P * pow(P, -1, Q)
FP_DTYPE = np.uint16
#: Dot products of n terms < PQ are exact in float64 while n * (PQ-1)**2 < 2**53.
MAX_EXACT_TERMS = (2 ** 53) // ((PQ - 1) ** 2)

assert (P - 1) % Q == 0 and PQ < 2 ** 16
assert pow(EXP_BASE, Q, P) == 1 and EXP_BASE % P != 1
assert (P + 1) // 4 == SQRT_EXP == (Q + 1) // 2

UNARY_OPS = ("exp", "silu", "gelu", "relu", "sqrt", "square", "clamp", "mul_scalar", "inv")
BINARY_OPS = ("add", "sub", "mul", "div", "pow")
ACCUM_KINDS = (None, "sum", "mean", "rms", "sum_todimx")


class FieldError(MirageLabError, ValueError):
    """A fingerprint op was given an op type, shape or attribute it cannot handle."""


# --------------------------------------------------------------------------- scalars and tables
def crt(rp: Any, rq: Any) -> Any:
    """The element of Z_pq with residues ``rp`` mod p and ``rq`` mod q (ints or int arrays)."""
    return (rp * E_P + rq * E_Q) % PQ


def _inv_mod(x: int, m: int) -> int:
    # x**(m-2): the inverse of every unit, and 0 -> 0. Mirage maps 0 to 1 instead, which
    # breaks 1/(bc) = (1/b)(1/c) whenever b or c has a zero residue (e.g. a denominator
    # doubled by a repeated accumulation); x**(m-2) is multiplicative on all of Z_m.
    return pow(x % m, m - 2, m)


def field_inverse(x: int) -> int:
    """The per-residue inverse of the int ``x`` in Z_pq (a zero residue stays 0).

    >>> (field_inverse(4096) * 4096) % PQ
    1
    """
    return crt(_inv_mod(x, P), _inv_mod(x, Q))


def field_scalar(s: float) -> int:
    """The field element standing for a real constant ``s`` (used by ``mul_scalar``).

    ``s`` is read as the nearest fraction ``n/d`` with ``d <= 2**20`` and mapped to
    ``n · d⁻¹``, so e.g. ``1/4096`` (the mean's scale) is exactly ``inverse(4096)``.

    >>> field_scalar(0.25) == field_inverse(4)
    True
    """
    f = Fraction(float(s)).limit_denominator(1 << 20)
    return (f.numerator % PQ) * field_inverse(f.denominator) % PQ


def _float_key(v: float) -> int:
    return zlib.crc32(struct.pack("<d", float(v)))


_X = np.arange(PQ, dtype=np.int64)


def _table(values: np.ndarray) -> np.ndarray:
    t = np.ascontiguousarray(values % PQ, dtype=FP_DTYPE)
    t.setflags(write=False)
    return t


@lru_cache(maxsize=None)
def _exp_table() -> np.ndarray:
    # exp(x) = (g**(x mod q) mod p, 1 mod q). q-part 1 (not Mirage's 0) keeps exp(0) = 1 and
    # keeps the q-residue of the other factor in exp(a)*b; it is the only homomorphism
    # (Z_q, +) -> (Z_q*, ×) since gcd(q, q-1) = 1, so exp(a+b) = exp(a)exp(b) still holds.
    gp = np.array([pow(EXP_BASE, int(e), P) for e in range(Q)], dtype=np.int64)
    return _table(crt(gp[_X % Q], 1))


@lru_cache(maxsize=None)
def _inv_table() -> np.ndarray:
    ip = np.array([_inv_mod(i, P) for i in range(P)], dtype=np.int64)
    iq = np.array([_inv_mod(i, Q) for i in range(Q)], dtype=np.int64)
    return _table(crt(ip[_X % P], iq[_X % Q]))


def _pow_vec(base: np.ndarray, e: int) -> np.ndarray:
    out = np.ones_like(base)
    b = base % PQ
    while e:
        if e & 1:
            out = out * b % PQ
        b = b * b % PQ
        e >>= 1
    return out


@lru_cache(maxsize=None)
def unary_table(op_type: str, attrs_key: tuple = ()) -> np.ndarray:
    """The lookup table (length ``PQ``, uint16, read-only) of a unary op.

    ``attrs_key`` is ``(lo, hi)`` for clamp, ``(scalar,)`` for mul_scalar, ``()`` otherwise.

    >>> int(unary_table("square")[7])
    49
    """
    x = _X
    if op_type == "exp":
        return _exp_table()
    if op_type == "inv":
        return _inv_table()
    if op_type == "square":
        return _table(x * x)
    if op_type == "sqrt":
        return _table(_pow_vec(x, SQRT_EXP))
    if op_type in ("silu", "gelu"):
        # p-part: x·e^x (silu) and x·e^{2x} (gelu), as Mirage. q-part: a fixed pseudo-random
        # permutation of Z_q per op. Mirage's q-part 0 (ours would be x, since e^x has q-part 1)
        # makes exp(silu(x)) constant (or equal to exp(x)): exp reads only the q-residue.
        e = _exp_table()[x].astype(np.int64) % P
        if op_type == "gelu":
            e = e * e % P
        perm = np.random.default_rng(zlib.crc32(op_type.encode())).permutation(Q).astype(np.int64)
        return _table(crt(x % P * e % P, perm[x % Q]))
    if op_type == "relu":  # max(r, m/2) per residue (Mirage's)
        return _table(crt(np.maximum(x % P, P // 2), np.maximum(x % Q, Q // 2)))
    if op_type == "clamp":
        # Mirage ignores the bounds (clamp(r, m/3, 2m/3)), so clamp(x,0,1) and clamp(x,-1,1)
        # would collide. Here each bound shifts its residue window, keyed by the float's bits;
        # the map stays idempotent (clamp∘clamp = clamp) like the real one.
        lo, hi = attrs_key
        cols = []
        for m, xr in ((P, x % P), (Q, x % Q)):
            lo_m = m // 6 + _float_key(lo) % (m // 4)
            hi_m = m // 2 + _float_key(hi) % (m // 4)
            cols.append(np.clip(xr, lo_m, hi_m))
        return _table(crt(cols[0], cols[1]))
    if op_type == "mul_scalar":
        (s,) = attrs_key
        return _table(x * field_scalar(s))
    raise FieldError(f"no finite-field definition for unary op {op_type!r}; known: {UNARY_OPS}")


@lru_cache(maxsize=None)
def scale_table(c: int) -> np.ndarray:
    """Table of ``x -> c·x`` for an int ``c`` (repeat counts, ``inverse(n)`` for means)."""
    return _table(_X * (int(c) % PQ))


@lru_cache(maxsize=None)
def rms_table(n: int) -> np.ndarray:
    """Table of ``s -> sqrt(s · n⁻¹)``: the RMS of ``n`` values whose squares sum to ``s``.

    Kernel ``rms_norm`` and the block ``rms`` accumulator both finish through this one
    table, so ``rms_norm(X) @ W`` and the fused graph (accumulate, divide after the matmul)
    fingerprint equal.
    """
    return _table(_pow_vec(_X * field_inverse(n) % PQ, SQRT_EXP))


@lru_cache(maxsize=None)
def inv_rms_table(n: int) -> np.ndarray:
    """Table of ``s -> 1 / sqrt(s · n⁻¹)`` (``rms_table`` then the inverse)."""
    return _table(_inv_table()[rms_table(n)].astype(np.int64))


def attrs_key(op_type: str, attrs: dict | None) -> tuple:
    """The hashable table key of a unary op's attributes."""
    attrs = attrs or {}
    try:
        if op_type == "clamp":
            return (float(attrs["lo"]), float(attrs["hi"]))
        if op_type == "mul_scalar":
            return (float(attrs["scalar"]),)
    except (KeyError, TypeError, ValueError) as e:
        raise FieldError(f"{op_type}: missing or bad attribute ({e!r}); got attrs {attrs!r}") from e
    return ()


# --------------------------------------------------------------------------- tile index maps
def _axis_of(imap: Sequence[int], grid: Sequence[int], k: int) -> int | None:
    for a in range(3):
        if grid[a] > 1 and imap[a] == k:
            return a
    return None


def gather_plan(dims: Sequence[int], grid: Sequence[int], imap: Sequence[int], fmap: int, frange: int):
    """The strided view that gathers every block's tile of a ``dims``-shaped tensor.

    Returns ``(shape, strides, out_shape)``: ``shape``/``strides`` (in elements, without the
    leading test axis) describe the view ``[gx, gy, gz, R, *tile]`` of the contiguous
    source; ``out_shape = [B, R, *tile]`` with ``B = 1`` when no grid axis splits the tensor
    (every block sees the same tiles), ``R = 1`` when it is not looped. The tile index
    along a dim that is grid-mapped (axis a) and looped is ``b_a·frange + i`` (spec §1.3).
    """
    dims = [int(d) for d in dims]
    n = len(dims)
    sstride = [1] * n
    for k in range(n - 2, -1, -1):
        sstride[k] = sstride[k + 1] * dims[k + 1]
    tile = list(dims)
    gstride = [0, 0, 0]
    mapped = False
    for k in range(n):
        a = _axis_of(imap, grid, k)
        if a is not None:
            tile[k] //= grid[a]
            mapped = True
    looped = 0 <= fmap < n
    if looped:
        tile[fmap] //= frange
    for k in range(n):
        a = _axis_of(imap, grid, k)
        if a is not None:
            gstride[a] = tile[k] * (frange if looped and fmap == k else 1) * sstride[k]
    r = frange if looped else 1
    rstride = tile[fmap] * sstride[fmap] if looped else 0
    g = list(grid) if mapped else [1, 1, 1]
    shape = g + [r] + tile
    strides = [gstride[a] if g[a] > 1 else 0 for a in range(3)] + [rstride] + sstride
    out_shape = [g[0] * g[1] * g[2], r] + tile
    return shape, strides, out_shape


def scatter_plan(tile: Sequence[int], grid: Sequence[int], omap: Sequence[int], out_dims: Sequence[int]):
    """The strided view of an output tensor that block tiles are written through.

    Returns ``(shape, strides)`` (elements, no test axis) of the view ``[gx, gy, gz, *tile]``
    of the contiguous ``out_dims`` tensor: block ``b`` writes at ``b_a·tile[k]`` of dim
    ``k`` when ``omap[a] = k``.
    """
    n = len(out_dims)
    dstride = [1] * n
    for k in range(n - 2, -1, -1):
        dstride[k] = dstride[k + 1] * int(out_dims[k + 1])
    gstr = [0, 0, 0]
    for a in range(3):
        if grid[a] > 1:
            k = omap[a]
            if not 0 <= k < n:
                raise FieldError(f"scatter_tiles: grid axis {a} (size {grid[a]}) is not mapped by output_map {tuple(omap)}")
            gstr[a] = int(tile[k]) * dstride[k]
    return list(grid) + list(tile), gstr + dstride


# --------------------------------------------------------------------------- the numpy backend
def _fp(x: Any) -> np.ndarray:
    a = np.asarray(x)
    if a.dtype != FP_DTYPE:
        if not np.issubdtype(a.dtype, np.integer):
            raise FieldError(f"fingerprints are integer arrays of values in [0, {PQ}); got dtype {a.dtype}")
        a = (a.astype(np.int64) % PQ).astype(FP_DTYPE)
    return a


class FieldOps:
    """Fingerprint ops on numpy arrays (the CPU backend; :class:`CudaFieldOps` mirrors it).

    Composite ops (rms_norm, accumulators, div) are built here from a few primitives
    (``lut``, ``_arith``, ``_pow``, ``matmul``, ``reduce_sum``, the strided copies), so a
    backend only re-implements those primitives.

        >>> ops = FieldOps()
        >>> x = ops.asarray([[3, 4]])
        >>> ops.unary("square", x).tolist()
        [[9, 16]]
    """

    name = "numpy"

    # ---- array plumbing
    def asarray(self, x: Any) -> np.ndarray:
        """Bring ``x`` (any integer array-like) into this backend as a uint16 fingerprint array."""
        return _fp(x)

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
        for k0 in range(0, K, MAX_EXACT_TERMS):
            k1 = min(K, k0 + MAX_EXACT_TERMS)
            part = np.matmul(a[..., k0:k1].astype(np.float64), b[..., k0:k1, :].astype(np.float64))
            # int64 % by a constant is several times faster than float fmod
            part = part.astype(np.int64) % PQ
            acc = part if acc is None else (acc + part) % PQ
        return acc.astype(FP_DTYPE)

    def reduce_sum(self, x: Any, axis: int) -> np.ndarray:
        """Sum over ``axis`` (kept, with size 1) mod PQ."""
        return (np.asarray(x).sum(axis=axis, keepdims=True, dtype=np.int64) % PQ).astype(FP_DTYPE)

    def _strided_gather(self, x: Any, shape: list[int], strides: list[int], out_shape: list[int]) -> np.ndarray:
        x = np.ascontiguousarray(x)
        k = x.shape[0]
        item = x.itemsize
        v = np.lib.stride_tricks.as_strided(x, shape=[k] + shape, strides=[x.strides[0]] + [s * item for s in strides],
                                            writeable=False)
        return np.ascontiguousarray(v.reshape([k] + out_shape))

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
            return self._arith("mul", a, self.lut(b, _inv_table()))
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


# --------------------------------------------------------------------------- module-level default (numpy)
_NUMPY = FieldOps()


def get_ops(backend: str = "numpy") -> FieldOps:
    """The ops object of a backend: ``"numpy"``, ``"cuda"`` (Numba-CUDA, or its simulator),
    or ``"auto"`` (cuda when a real GPU is present, else numpy).

    >>> get_ops("numpy").name
    'numpy'
    """
    if backend == "numpy":
        return _NUMPY
    if backend in ("cuda", "auto"):
        from ..gpu.numba_compat import SIMULATOR, gpu_available

        if backend == "auto" and not gpu_available():
            return _NUMPY
        if backend == "cuda" and not (gpu_available() or SIMULATOR):
            raise FieldError(
                "backend='cuda' needs a CUDA GPU (or NUMBA_ENABLE_CUDASIM=1 for the simulator); "
                "use backend='numpy' or 'auto' on this machine"
            )
        from .cuda_ops import CudaFieldOps

        return CudaFieldOps.instance()
    raise FieldError(f"unknown backend {backend!r}; use 'numpy', 'cuda' or 'auto'")


def unary(op_type: str, x: Any, attrs: dict | None = None) -> np.ndarray:
    """Numpy ``FieldOps.unary``."""
    return _NUMPY.unary(op_type, _fp(x), attrs)


def binary(op_type: str, a: Any, b: Any) -> np.ndarray:
    """Numpy ``FieldOps.binary`` (broadcasting)."""
    return _NUMPY.binary(op_type, _fp(a), _fp(b))


def matmul(a: Any, b: Any) -> np.ndarray:
    """Numpy ``FieldOps.matmul`` (batched over leading axes)."""
    return _NUMPY.matmul(_fp(a), _fp(b))


def reduce_sum(x: Any, axis: int) -> np.ndarray:
    """Numpy ``FieldOps.reduce_sum`` (keepdims)."""
    return _NUMPY.reduce_sum(_fp(x), axis)


def rms_norm(x: Any) -> np.ndarray:
    """Numpy ``FieldOps.rms_norm`` over the last axis."""
    return _NUMPY.rms_norm(_fp(x))


def accum(kind: str | None, x: Any, axis: int = 2, frange: int | None = None, w: int | None = None,
          dimx: int = 64) -> np.ndarray:
    """Numpy ``FieldOps.accum``."""
    return _NUMPY.accum(kind, _fp(x), axis, frange, w, dimx)


def concat(a: Any, b: Any, axis: int) -> np.ndarray:
    """Numpy ``FieldOps.concat``."""
    return _NUMPY.concat(_fp(a), _fp(b), axis)


def gather_tiles(x: Any, grid: Sequence[int], imap: Sequence[int], fmap: int, frange: int) -> np.ndarray:
    """Numpy ``FieldOps.gather_tiles``."""
    return _NUMPY.gather_tiles(_fp(x), grid, imap, fmap, frange)


def scatter_tiles(tiles: Any, grid: Sequence[int], omap: Sequence[int], out_dims: Sequence[int]) -> np.ndarray:
    """Numpy ``FieldOps.scatter_tiles``."""
    return _NUMPY.scatter_tiles(_fp(tiles), grid, omap, out_dims)
