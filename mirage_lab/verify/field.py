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

This module is the arithmetic only (constants, lookup tables, :func:`as_fingerprint`). The
rest of the verifier's op layer lives beside it: :mod:`.tile_plans` (the strided views
behind gather/scatter), :mod:`.numpy_backend` (``FieldOps`` and the numpy module
functions ``unary``, ``matmul``, ...), :mod:`.cuda_backend` and :mod:`.backends`
(``get_ops``). Those names, written before the split as ``field.X``, still resolve here.
"""
from __future__ import annotations

import hashlib
import struct
import zlib
from fractions import Fraction
from functools import lru_cache
from typing import Any

import numpy as np

from ..errors import MirageLabError
from ..lazy import lazy_attributes
from ..ops import binary_ops, unary_ops

P = 227
Q = 113
PQ = P * Q  # 25651 < 2**16
# PQ is compiled into the CUDA fingerprint kernels (verify/cuda_backend.py), which numba caches on disk keyed
# by their own file: after changing P or Q, touch that file too (CudaFieldOps.self_check refuses stale kernels)
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

UNARY_OPS = unary_ops() + ("inv",)   # the ops table's (mirage_lab.ops), and the field inverse
BINARY_OPS = binary_ops()
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


#: Bounded caches: a long session meets many distinct scalars (each table is 51 KB).
TABLE_CACHE_SIZE = 128
#: A float counts as the small fraction n/d (d <= this) when it is that fraction's float.
NICE_DENOMINATOR = 1 << 20


@lru_cache(maxsize=4096)
def scalar_fraction(s: float) -> tuple[Fraction, bool]:
    """The exact rational a float constant stands for, and whether it is a *nice* one.

    A float that is the correctly rounded value of a fraction ``n/d`` with ``d <= 2**20``
    (``0.1``, ``1/3``, ``1/4096``) stands for that fraction (nice); any other float (an
    irrational such as ``2**-0.5``) stands for its own exact binary value, ``m / 2**k``. So the
    map is one-to-one on floats, and a product of nice fractions is mapped exactly.

        >>> scalar_fraction(0.1), scalar_fraction(2 ** -0.5)[1]
        ((Fraction(1, 10), True), False)
    """
    s = float(s)
    if not np.isfinite(s):
        raise FieldError(f"the scalar {s!r} has no finite-field image; use a finite number")
    f = Fraction(s).limit_denominator(NICE_DENOMINATOR)
    if float(f) == s:
        return f, True
    return Fraction(s), False


def field_scalar(s: float) -> int:
    """The field element standing for a real constant ``s`` (used by ``mul_scalar``).

    ``s`` is read as the exact rational of :func:`scalar_fraction` ``n/d`` and mapped to
    ``n · d⁻¹`` (``d`` is a power of two or a nice denominator; a ``d`` divisible by p or q
    has no inverse and maps through ``_inv_mod``'s 0). Different floats can still share an
    image (Z_pq has 25651 elements); the verifier's float64 check (:mod:`.float_check`) tells
    them apart.

    >>> field_scalar(0.25) == field_inverse(4)
    True
    """
    f, _ = scalar_fraction(s)
    return (f.numerator % PQ) * field_inverse(f.denominator) % PQ


def is_exact_scalar(s: float) -> bool:
    """Whether the field models ``mul_scalar(s)`` as a ring homomorphism of real identities
    (a nice fraction; see :func:`scalar_fraction`). An inexact one (``2**-0.5``) makes
    ``mul_scalar(s)`` twice differ from ``mul_scalar(0.5)`` in the field though not in the reals.

        >>> is_exact_scalar(0.125), is_exact_scalar(2 ** -0.5)
        (True, False)
    """
    return scalar_fraction(s)[1]


def _bound_key(lo: float, hi: float) -> int:
    # -0.0 and 0.0 are the same bound; the key is every bit of both floats (no collisions to speak of).
    digest = hashlib.sha256(struct.pack("<dd", float(lo) + 0.0, float(hi) + 0.0)).digest()
    return int.from_bytes(digest[:16], "little")


_X = np.arange(PQ, dtype=np.int64)


def _table(values: np.ndarray) -> np.ndarray:
    t = np.ascontiguousarray(values % PQ, dtype=FP_DTYPE)
    t.setflags(write=False)
    return t


@lru_cache(maxsize=1)
def _exp_table() -> np.ndarray:
    # exp(x) = (g**(x mod q) mod p, 1 mod q). q-part 1 (not Mirage's 0) keeps exp(0) = 1 and
    # keeps the q-residue of the other factor in exp(a)*b; it is the only homomorphism
    # (Z_q, +) -> (Z_q*, ×) since gcd(q, q-1) = 1, so exp(a+b) = exp(a)exp(b) still holds.
    gp = np.array([pow(EXP_BASE, int(e), P) for e in range(Q)], dtype=np.int64)
    return _table(crt(gp[_X % Q], 1))


@lru_cache(maxsize=1)
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


@lru_cache(maxsize=2)
def _q_permutation(name: str) -> np.ndarray:
    return np.random.default_rng(zlib.crc32(name.encode())).permutation(Q).astype(np.int64)


@lru_cache(maxsize=TABLE_CACHE_SIZE)
def unary_table(op_type: str, attrs_key: tuple = ()) -> np.ndarray:
    """The lookup table (length ``PQ``, uint16, read-only) of a unary op.

    ``attrs_key`` is ``(lo, hi)`` for clamp, ``(scalar,)`` for mul_scalar, ``()`` otherwise.
    At most ``TABLE_CACHE_SIZE`` tables stay cached (least recently used go first).

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
    if op_type in ("silu", "gelu", "sigmoid"):
        # p-part: e^x (sigmoid), x·e^x (silu), x·e^{2x} (gelu), as Mirage (sigmoid's e^x/(1+e^x)
        # needs an inverse of 1 + e^x, which is 0 for some x). q-part: a fixed pseudo-random
        # permutation π of Z_q for sigmoid and gelu, and x·π_sigmoid(x) for silu, so that
        # silu(x) = x·sigmoid(x) holds exactly in both residues, as in the reals. Mirage's q-part
        # 0 (ours would be x, since e^x has q-part 1) makes exp(silu(x)) constant or equal to
        # exp(x): exp reads only the q-residue. π also tells sigmoid(x) from exp(x).
        e = _exp_table()[x].astype(np.int64) % P
        if op_type == "gelu":
            e = e * e % P
        perm = _q_permutation("gelu" if op_type == "gelu" else "sigmoid")
        p_part = e if op_type == "sigmoid" else x % P * e % P
        q_part = x % Q * perm[x % Q] % Q if op_type == "silu" else perm[x % Q]
        return _table(crt(p_part, q_part))
    if op_type == "relu":  # max(r, m/2) per residue (Mirage's)
        return _table(crt(np.maximum(x % P, P // 2), np.maximum(x % Q, Q // 2)))
    if op_type == "clamp":
        # Mirage ignores the bounds (clamp(r, m/3, 2m/3)), so clamp(x,0,1) and clamp(x,-1,1)
        # collide; a window shifted by a hash of the bounds (our first fix) still collided once
        # in 56. Now: an idempotent map keyed by all 128 bits of the bounds: a random fixed-point
        # set S (1/16 of Z_pq) and every other value sent to a random point of S. So
        # clamp∘clamp = clamp, as in the reals, and two different bound pairs agree on a random
        # value with chance about 1/256 + 1/1600 per element (1/16² for both fixed, else 1/|S|).
        lo, hi = attrs_key
        rng = np.random.default_rng(_bound_key(lo, hi))
        fixed = rng.permutation(PQ)[: PQ // 16]
        t = fixed[rng.integers(0, len(fixed), size=PQ)]
        t[fixed] = fixed
        return _table(t)
    if op_type == "mul_scalar":
        (s,) = attrs_key
        return _table(x * field_scalar(s))
    raise FieldError(f"no finite-field definition for unary op {op_type!r}; known: {UNARY_OPS}")


@lru_cache(maxsize=TABLE_CACHE_SIZE)
def scale_table(c: int) -> np.ndarray:
    """Table of ``x -> c·x`` for an int ``c`` (repeat counts, ``inverse(n)`` for means)."""
    return _table(_X * (int(c) % PQ))


@lru_cache(maxsize=TABLE_CACHE_SIZE)
def rms_table(n: int) -> np.ndarray:
    """Table of ``s -> sqrt(s · n⁻¹)``: the RMS of ``n`` values whose squares sum to ``s``.

    Kernel ``rms_norm`` and the block ``rms`` accumulator both finish through this one
    table, so ``rms_norm(X) @ W`` and the fused graph (accumulate, divide after the matmul)
    fingerprint equal.
    """
    return _table(_pow_vec(_X * field_inverse(n) % PQ, SQRT_EXP))


@lru_cache(maxsize=TABLE_CACHE_SIZE)
def inv_rms_table(n: int) -> np.ndarray:
    """Table of ``s -> 1 / sqrt(s · n⁻¹)`` (``rms_table`` then the inverse)."""
    return _table(_inv_table()[rms_table(n)].astype(np.int64))


def attrs_key(op_type: str, attrs: dict | None) -> tuple:
    """The hashable table key of a unary op's attributes."""
    attrs = attrs or {}
    try:
        if op_type == "clamp":
            key = (float(attrs["lo"]), float(attrs["hi"]))
        elif op_type == "mul_scalar":
            key = (float(attrs["scalar"]),)
        else:
            return ()
    except (KeyError, TypeError, ValueError, OverflowError) as e:
        raise FieldError(f"{op_type}: missing or bad attribute ({e!r}); got attrs {attrs!r}") from e
    if not all(np.isfinite(key)):
        raise FieldError(f"{op_type}: attributes must be finite numbers; got attrs {attrs!r}")
    return key


def as_fingerprint(x: Any) -> np.ndarray:
    """``x`` (any integer array-like) as a uint16 fingerprint array: reduced mod ``PQ``
    unless it is uint16 already (then returned as is). Float arrays are refused.

    >>> as_fingerprint([-1, PQ + 2]).tolist()
    [25650, 2]
    """
    a = np.asarray(x)
    if a.dtype != FP_DTYPE:
        if not np.issubdtype(a.dtype, np.integer):
            raise FieldError(f"fingerprints are integer arrays of values in [0, {PQ}); got dtype {a.dtype}")
        a = (a.astype(np.int64) % PQ).astype(FP_DTYPE)
    return a


# --------------------------------------------------------------------------- names that moved out
# Written ``field.X`` before verify was split into modules; resolved on first use (an eager
# import here would be circular: those modules build on this one) and then kept here.
_MOVED = {
    **{n: "numpy_backend" for n in ("FieldOps", "unary", "binary", "matmul", "reduce_sum", "rms_norm", "accum",
                                    "concat", "gather_tiles", "scatter_tiles")},
    **{n: "tile_plans" for n in ("gather_plan", "scatter_plan")},
    "get_ops": "backends",
}

__getattr__, __dir__ = lazy_attributes(globals(), {n: (f"{__package__}.{home}", n) for n, home in _MOVED.items()})
