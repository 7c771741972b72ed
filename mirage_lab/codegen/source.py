"""A tiny indentation-aware source builder and integer-expression helpers.

Generated kernels are plain Python text (tinygrad-style string building). Index
expressions are built from constants so that numba's compiler folds them; the helpers
below drop ``+ 0`` and ``* 1`` so the text stays readable.

    >>> s = Src(); s("x = 1")
    >>> with s.block("if x:"):
    ...     s("y = 2")
    >>> print(s.text(), end="")
    x = 1
    if x:
        y = 2
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator, Sequence


class Src:
    """Lines of Python source with a current indentation level."""

    def __init__(self, indent: int = 0) -> None:
        self.lines: list[str] = []
        self.indent = indent

    def __call__(self, line: str = "") -> None:
        self.lines.append(("    " * self.indent + line) if line else "")

    def comment(self, text: str) -> None:
        self(f"# {text}")

    @contextmanager
    def block(self, header: str) -> Iterator[None]:
        self(header)
        self.indent += 1
        n = len(self.lines)
        yield
        if len(self.lines) == n:
            self("pass")
        self.indent -= 1

    def extend(self, other: "Src") -> None:
        self.lines.extend(other.lines)

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def prod(xs: Sequence[int]) -> int:
    p = 1
    for x in xs:
        p *= x
    return p


def row_strides(dims: Sequence[int]) -> list[int]:
    """Row-major strides (in elements) of a tensor of shape ``dims``."""
    out = [1] * len(dims)
    for k in range(len(dims) - 2, -1, -1):
        out[k] = out[k + 1] * dims[k + 1]
    return out


def mul(expr: str, c: int) -> str:
    if c == 0 or expr == "0":
        return "0"
    if c == 1:
        return expr
    if expr.isidentifier() or expr.isdigit():
        return f"{expr} * {c}"
    return f"({expr}) * {c}"


def add(*terms: str) -> str:
    ts = [t for t in terms if t not in ("0", "")]
    if not ts:
        return "0"
    # fold integer constants
    consts = [int(t) for t in ts if t.lstrip("-").isdigit()]
    rest = [t for t in ts if not t.lstrip("-").isdigit()]
    c = sum(consts)
    if c:
        rest.append(str(c))
    return " + ".join(rest) if rest else "0"


def unravel(e: str, dims: Sequence[int]) -> list[str]:
    """Expressions for the multi-index of flat row-major index ``e`` in ``dims``."""
    n = len(dims)
    out = ["0"] * n
    first = next((k for k in range(n) if dims[k] > 1), None)
    for k in range(n):
        if dims[k] == 1:
            continue
        below = prod(dims[k + 1:])
        x = e if below == 1 else f"({e}) // {below}" if not e.isidentifier() else f"{e} // {below}"
        if k != first:
            x = f"({x}) % {dims[k]}" if not x.isidentifier() else f"{x} % {dims[k]}"
        out[k] = x
    return out


def dot(idx: Sequence[str], strides: Sequence[int]) -> str:
    return add(*(mul(i, s) for i, s in zip(idx, strides)))
