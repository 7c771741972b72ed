"""Argument checks shared by the builders: ints that are ints, numbers that are finite, sane sizes.

Every check raises :class:`~mirage_lab.errors.GraphBuildError` naming the call, the argument
and what to pass instead; none coerces silently (``True``, ``0.5`` and ``16.0`` are refused
where an int is due, ``nan`` and ``10**400`` where a number is). The bounds keep sizes within
what a GPU can address (``int32`` indices, CUDA's grid and block limits), so an absurd size
fails when it is typed, not deep inside codegen or the verifier.

    >>> as_int(4, "new_input", "dims[0]", lo=1, hi=MAX_DIM)
    4
    >>> as_int(True, "new_input", "dims[0]", lo=1, hi=MAX_DIM)
    Traceback (most recent call last):
    mirage_lab.errors.GraphBuildError: new_input: dims[0] must be an int, got True (a bool); pass a positive int such as 16
"""
from __future__ import annotations

import math
import operator
from itertools import islice
from typing import Any

from ..errors import GraphBuildError

MAX_DIM = 2**31 - 1            # one dim: an int32 index
MAX_NUMEL = 2**40              # one tensor: far more than any GPU holds
MAX_GRID = (2**31 - 1, 65535, 65535)   # CUDA's grid limits (x, y, z)
MAX_BLOCK = (1024, 1024, 64)   # CUDA's block limits (x, y, z); 1024 threads in all
MAX_BLOCK_THREADS = 1024
MAX_FORLOOP = 2**20            # iterations of a block graph's for-loop
MAX_SEQ = 64                   # longest dims / strides / map sequence read (a tensor has at most 4 dims)


def _is_bool(value: Any) -> bool:
    """True, False, and numpy or torch booleans (which ``operator.index`` would take as 1 and 0)."""
    dtype = getattr(value, "dtype", None)
    return isinstance(value, bool) or dtype is not None and (getattr(dtype, "kind", "") == "b" or str(dtype) == "torch.bool")


def _kind(value: Any) -> str:
    if value is None:
        return "nothing"
    return "a bool" if isinstance(value, bool) else f"a {type(value).__name__}"


def as_int(value: Any, where: str, what: str, *, lo: int, hi: int, example: str = "") -> int:
    """``value`` as an int in ``[lo, hi]``: ints and numpy ints only (no bool, no float)."""
    hint = example or ("a positive int such as 16" if lo >= 1 else f"an int from {lo} to {hi}")
    if _is_bool(value):
        raise GraphBuildError(f"{where}: {what} must be an int, got {value!r} ({_kind(value)}); pass {hint}")
    try:
        v = operator.index(value)
    except TypeError:
        if isinstance(value, float) and math.isfinite(value) and value == int(value):
            fix = f"pass int({value!r})"
        else:
            fix = f"pass {hint}"
        raise GraphBuildError(f"{where}: {what} must be an int, got {value!r} ({_kind(value)}); {fix}") from None
    if not lo <= v <= hi:
        shown = repr(v) if abs(v) < 10**30 else f"an int of {len(str(abs(v)))} digits"
        raise GraphBuildError(f"{where}: {what} must be between {lo} and {hi}, got {shown}; pass {hint}")
    return v


def int_seq(value: Any, where: str, what: str, *, lo: int, hi: int, example: str) -> tuple[int, ...]:
    """A sequence of ints (a list, tuple, ``torch.Size``...), each checked by :func:`as_int`."""
    if isinstance(value, (str, bytes, dict)) or not hasattr(value, "__iter__"):
        raise GraphBuildError(f"{where}: {what} must be a sequence of ints such as {example}, got {value!r}")
    try:
        items = list(islice(iter(value), MAX_SEQ + 1))
    except TypeError:
        raise GraphBuildError(f"{where}: {what} must be a sequence of ints such as {example}, got {value!r}") from None
    if len(items) > MAX_SEQ:
        raise GraphBuildError(f"{where}: {what} has more than {MAX_SEQ} entries; pass a short sequence such as {example}")
    return tuple(as_int(v, where, f"{what}[{i}]", lo=lo, hi=hi, example=f"an int in each entry, as in {example}")
                 for i, v in enumerate(items))


def finite_number(value: Any, where: str, what: str) -> float:
    """``value`` as a finite float: ints and floats (numpy's too) only, no bool, nan, inf or overflow."""
    if _is_bool(value) or isinstance(value, (str, bytes)) or hasattr(value, "dtype") and \
            getattr(value.dtype, "kind", "") not in ("i", "u", "f") and not hasattr(value, "numel"):
        raise GraphBuildError(f"{where}: {what} must be a finite number, got {value!r} ({_kind(value)}); pass a float such as 0.5")
    if hasattr(value, "numel") and value.numel() != 1:
        raise GraphBuildError(f"{where}: {what} must be a number, got a tensor of shape {tuple(value.shape)}; pass a float")
    try:
        f = float(value)
    except OverflowError:
        raise GraphBuildError(f"{where}: {what} is too large for a float (an int of {len(str(abs(int(value))))} "
                              "digits); pass a finite float within ±1.8e308") from None
    except (TypeError, ValueError):
        raise GraphBuildError(f"{where}: {what} must be a finite number, got {value!r} ({_kind(value)}); "
                              "pass a float such as 0.5") from None
    if not math.isfinite(f):
        raise GraphBuildError(f"{where}: {what} must be finite, got {f!r}; pass a finite float (for a one-sided "
                              "clamp use a bound beyond the data's range, e.g. ±1e30)")
    return f


def dims(value: Any, where: str) -> tuple[int, ...]:
    """A tensor shape: 1 to 4 ints in ``[1, MAX_DIM]`` with at most ``MAX_NUMEL`` elements."""
    from .shapes import MAX_DIMS, fmt

    out = int_seq(value, where, "dims", lo=-2**63, hi=2**63, example="(16, 4096)")   # the limits come below
    if not 1 <= len(out) <= MAX_DIMS:
        raise GraphBuildError(f"{where}: tensors have 1 to {MAX_DIMS} dims, got {len(out)} ({value!r})")
    if any(d <= 0 for d in out):
        raise GraphBuildError(f"{where}: every dim must be a positive int, got {out}")
    if any(d > MAX_DIM for d in out):
        raise GraphBuildError(f"{where}: dims {out} exceed {MAX_DIM}, the largest dim a GPU kernel indexes; "
                              "pass smaller dims")
    if math.prod(out) > MAX_NUMEL:
        raise GraphBuildError(f"{where}: dims {fmt(out)} make {math.prod(out)} elements, more than the {MAX_NUMEL} "
                              "a tensor may have; pass smaller dims")
    return out
