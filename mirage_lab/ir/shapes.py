"""Shape rules shared by kernel- and block-level ops (MIRAGE_SPEC §1.1)."""
from __future__ import annotations

from typing import Sequence

from ..errors import GraphBuildError

MAX_DIMS = 4


def fmt(dims: Sequence[int]) -> str:
    return "[" + ",".join(str(d) for d in dims) + "]"


def check_dims(dims: Sequence[int], where: str) -> tuple[int, ...]:
    """A tensor shape checked by :func:`.checks.dims` (ints only, 1 to 4 dims, sane sizes)."""
    from .checks import dims as _dims

    return _dims(dims, where)


def broadcast(op: str, a: Sequence[int], b: Sequence[int]) -> tuple[int, ...]:
    """Mirage's elementwise rule: same rank, each dim equal or one of them 1."""
    if len(a) != len(b):
        raise GraphBuildError(
            f"{op}: operands must have the same rank, got {fmt(a)} and {fmt(b)}; "
            f"reshape the smaller one with size-1 dims (e.g. {fmt((1,) * (len(a) - len(b)) + tuple(b)) if len(a) > len(b) else fmt((1,) * (len(b) - len(a)) + tuple(a))})"
        )
    out = []
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y and x != 1 and y != 1:
            raise GraphBuildError(
                f"{op}: dim {i} of {fmt(a)} and {fmt(b)} differ ({x} vs {y}) and neither is 1, "
                "so they cannot broadcast"
            )
        out.append(max(x, y))
    return tuple(out)


def matmul(op: str, a: Sequence[int], b: Sequence[int], *, batch_must_be_one: bool = False) -> tuple[int, ...]:
    """``[..,m,k] x [..,k,n] -> [..,m,n]`` with equal rank and equal batch dims."""
    if len(a) < 2 or len(b) < 2 or len(a) != len(b):
        raise GraphBuildError(
            f"{op}: operands need the same rank >= 2, got {fmt(a)} and {fmt(b)}"
        )
    if tuple(a[:-2]) != tuple(b[:-2]):
        raise GraphBuildError(f"{op}: batch dims differ: {fmt(a)} x {fmt(b)}")
    if batch_must_be_one and any(d != 1 for d in a[:-2]):
        raise GraphBuildError(
            f"{op}: a block-level matmul needs every leading dim of its tiles to be 1, got {fmt(a)} x {fmt(b)}; "
            "map the batch dim to a grid axis so each block sees one batch"
        )
    if a[-1] != b[-2]:
        if a[-1] == b[-1]:
            hint = f"; the second operand looks transposed: did you mean {fmt(tuple(b[:-2]) + (b[-1], b[-2]))}?"
        else:
            hint = f"; the second operand must have {a[-1]} rows, e.g. {fmt(tuple(b[:-2]) + (a[-1], b[-1]))}"
        raise GraphBuildError(
            f"{op}: inner dimensions differ: {fmt(a)} x {fmt(b)} needs {a[-1]} == {b[-2]}{hint}"
        )
    return tuple(a[:-1]) + (b[-1],)


def norm_dim(op: str, dim: int, rank: int, dims: Sequence[int]) -> int:
    if not isinstance(dim, int) or isinstance(dim, bool):
        raise GraphBuildError(f"{op}: dim must be an int, got {dim!r}")
    d = dim + rank if dim < 0 else dim
    if not 0 <= d < rank:
        raise GraphBuildError(f"{op}: dim {dim} is out of range for a tensor of shape {fmt(dims)}")
    return d
