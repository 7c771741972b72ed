"""The one table of mirage_lab's element-wise and tensor ops, which every stage reads.

Each stage keeps one dict keyed by these names for what an op *means* there: its torch
function (``interp.reference.UNARY`` / ``BINARY``), its finite-field table
(``verify.field.unary_table``), its abstract-expression constructor (``expr.terms.CONSTRUCTORS``),
its generated code (``codegen.elementwise.UNARY`` / ``BINARY``, ``codegen.host``). The lists
the stages used to spell out (the IR's op types, the search's op order, the prefilter's atomic
functions, the verifier's unary ops) are derived from this table, so a new element-wise op is
one entry here plus one entry per stage; ``tests/test_ops.py`` fails while a stage lacks it.

The table's order is the search's canonical order (it ranks ops when states are deduplicated):
new ops go at the end of their group, so that searches of programs without them stay identical.

    >>> [s.name for s in OPS if s.kind == "unary" and s.searched]
    ['exp', 'square', 'sqrt', 'silu', 'gelu', 'relu', 'clamp']
    >>> unary_ops(attrs=False)
    ('exp', 'square', 'sqrt', 'silu', 'gelu', 'relu', 'sigmoid')
    >>> spec("sigmoid").levels, spec("sigmoid").searched
    (('kernel', 'block'), False)
"""
from __future__ import annotations

from dataclasses import dataclass

KERNEL, BLOCK = "kernel", "block"


@dataclass(frozen=True)
class OpSpec:
    """One op: its name, inputs, kind, the graph levels it exists at, its attributes.

    ``rigid``: a function no equivalence axiom looks inside (MIRAGE_SPEC §3), so the abstract
    expressions and the search's prefilter treat it as atomic. ``searched``: the search tries
    it everywhere by default; an op that is not (a newer element-wise op) is tried only in
    searches of programs that use it.
    """

    name: str
    arity: int
    kind: str                       # unary | binary | matmul | reduction | norm
    levels: tuple[str, ...] = (KERNEL, BLOCK)
    attrs: tuple[str, ...] = ()
    rigid: bool = False
    searched: bool = True


OPS: tuple[OpSpec, ...] = (
    OpSpec("matmul", 2, "matmul"),
    OpSpec("exp", 1, "unary", rigid=True),
    OpSpec("square", 1, "unary", rigid=True),
    OpSpec("sqrt", 1, "unary", rigid=True),
    OpSpec("silu", 1, "unary", rigid=True),
    OpSpec("gelu", 1, "unary", rigid=True),
    OpSpec("relu", 1, "unary", rigid=True),
    OpSpec("clamp", 1, "unary", attrs=("lo", "hi"), rigid=True),
    OpSpec("add", 2, "binary"),
    OpSpec("mul", 2, "binary"),
    OpSpec("div", 2, "binary"),
    OpSpec("pow", 2, "binary", rigid=True),
    OpSpec("sub", 2, "binary", levels=(BLOCK,), searched=False),
    OpSpec("mul_scalar", 1, "unary", levels=(BLOCK,), attrs=("scalar",), searched=False),
    OpSpec("sigmoid", 1, "unary", rigid=True, searched=False),
    OpSpec("rms_norm", 1, "norm"),
    OpSpec("reduction", 1, "reduction", levels=(KERNEL,), attrs=("dim",), searched=False),
)
_BY_NAME = {s.name: s for s in OPS}


def spec(name: str) -> OpSpec:
    """The table entry of op ``name`` (KeyError naming the known ops otherwise)."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(f"unknown op {name!r}; known: {', '.join(_BY_NAME)}") from None


def names(*, kind: str | None = None, level: str | None = None, searched: bool | None = None,
          attrs: bool | None = None, rigid: bool | None = None) -> tuple[str, ...]:
    """Op names in table order, filtered by kind, level, default search, having attributes, rigidity.

    >>> names(kind="binary", level="kernel")
    ('add', 'mul', 'div', 'pow')
    """
    return tuple(s.name for s in OPS
                 if (kind is None or s.kind == kind) and (level is None or level in s.levels)
                 and (searched is None or s.searched == searched) and (attrs is None or bool(s.attrs) == attrs)
                 and (rigid is None or s.rigid == rigid))


def unary_ops(*, level: str | None = None, attrs: bool | None = None, searched: bool | None = None) -> tuple[str, ...]:
    """Unary element-wise ops (``attrs=False``: those that take no attribute, such as ``exp``)."""
    return names(kind="unary", level=level, attrs=attrs, searched=searched)


def binary_ops(*, level: str | None = None, searched: bool | None = None) -> tuple[str, ...]:
    """Binary element-wise ops."""
    return names(kind="binary", level=level, searched=searched)


def elementwise_ops(*, level: str | None = None) -> tuple[str, ...]:
    """Every unary and binary op (at ``level``)."""
    return tuple(n for n in names(level=level) if _BY_NAME[n].kind in ("unary", "binary"))


__all__ = ["OpSpec", "OPS", "spec", "names", "unary_ops", "binary_ops", "elementwise_ops", "KERNEL", "BLOCK"]
