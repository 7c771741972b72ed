"""Abstract expressions: the terms Mirage prunes the search with (MIRAGE_SPEC §3).

A term is an immutable, interned tree: two equal terms are the same object, so equality
is ``is``, hashing is cheap, and terms can key dicts and caches. ``str()`` prints the
s-expression style the spec uses::

    >>> from mirage_lab.expr.terms import var, mul, red
    >>> e = red(4096, mul(var(0), var(1)))
    >>> str(e)
    'sum(4096, mul(x0, x1))'
    >>> e is red(64, red(64, mul(var(0), var(1))))      # nested sums merge: 64·64 = 4096
    True

Term constructors (``op``: arguments): ``var`` (input index), ``add``, ``mul``, ``div``,
``pow``, ``neg`` (block ``sub`` is ``add(a, neg(b))``), ``exp``, ``square``, ``sqrt``,
``silu``, ``gelu``, ``relu``, ``clamp`` (bounds, e), ``rms`` (n, e), ``sum`` (n, e) — the
spec's ``Red(n, e)``, ``concat`` (a, b; the dims it joins). ``Red(1, e)`` is ``e``.
"""
from __future__ import annotations

import weakref
from functools import lru_cache
from typing import Any, Iterator

from ..errors import MirageLabError
from ..ops import names, unary_ops


class ExprError(MirageLabError, ValueError):
    """An abstract expression could not be built (unknown op, bad arity, bad attribute)."""


UNARY_TERMS = unary_ops(attrs=False) + ("neg",)   # the ops table's (mirage_lab.ops), and negation
BINARY_TERMS = ("add", "mul", "div", "pow")
ALL_TERMS = ("var", "sum", "rms", "clamp", "concat") + UNARY_TERMS + BINARY_TERMS


class Expr:
    """One interned abstract-expression node: ``op``, child terms ``args``, attribute ``n``.

    ``n`` is the input index for ``var``, the reduction size for ``sum``/``rms``, the bounds
    ``(lo, hi)`` for ``clamp``, ``(axis, size_a, size_b)`` for ``concat``, else ``None``.
    Build terms with the module's constructor functions, not with ``Expr(...)``.
    """

    __slots__ = ("op", "args", "n", "_hash", "_str", "_size", "__weakref__")

    def __init__(self, op: str, args: tuple["Expr", ...], n: Any):
        self.op = op
        self.args = args
        self.n = n
        self._hash = hash((op, tuple(id(a) for a in args), n))
        self._str: str | None = None
        self._size = 1 + sum(a._size for a in args)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return self is other

    def __reduce__(self):  # pickling (process pools) re-interns on load
        return (_make, (self.op, self.args, self.n))

    @property
    def size(self) -> int:
        """Number of nodes in the tree."""
        return self._size

    def __str__(self) -> str:
        if self._str is None:
            if self.op == "var":
                s = f"x{self.n}"
            elif self.op in ("sum", "rms"):
                s = f"{self.op}({self.n}, {self.args[0]})"
            elif self.op == "clamp":
                s = f"clamp({self.n[0]}, {self.n[1]}, {self.args[0]})"
            elif self.op == "concat":
                s = f"concat({self.args[0]}, {self.args[1]}, dim={self.n[0]})"
            else:
                s = f"{self.op}({', '.join(str(a) for a in self.args)})"
            self._str = s
        return self._str

    def __repr__(self) -> str:
        return f"Expr({self})"

    def walk(self) -> Iterator["Expr"]:
        """Every node of the tree, parents before children (shared nodes repeat)."""
        yield self
        for a in self.args:
            yield from a.walk()

    def subterms(self) -> set["Expr"]:
        """The set of distinct nodes of the tree."""
        out: set[Expr] = set()
        stack = [self]
        while stack:
            e = stack.pop()
            if e not in out:
                out.add(e)
                stack.extend(e.args)
        return out


# Weak: a long search does not keep every term it ever built alive.
_INTERN: "weakref.WeakValueDictionary[tuple, Expr]" = weakref.WeakValueDictionary()


def _make(op: str, args: tuple[Expr, ...], n: Any = None) -> Expr:
    key = (op, args, n)
    e = _INTERN.get(key)
    if e is None:
        e = Expr(op, args, n)
        _INTERN[key] = e
    return e


def _term(x: Any, where: str) -> Expr:
    if not isinstance(x, Expr):
        raise ExprError(f"{where}: expected an abstract expression (Expr), got {type(x).__name__} {x!r}")
    return x


def _size(n: Any, where: str) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ExprError(f"{where}: a reduction size must be a positive int, got {n!r}")
    return n


def var(i: int) -> Expr:
    """Program input ``i`` (in ``new_input`` order)."""
    if isinstance(i, bool) or not isinstance(i, int) or i < 0:
        raise ExprError(f"var: input index must be a non-negative int, got {i!r}")
    return _make("var", (), i)


def red(n: int, e: Expr) -> Expr:
    """``Red(n, e)``: a sum of ``n`` terms of ``e``. ``red(1, e) = e``; nested sums merge."""
    n = _size(n, "sum")
    e = _term(e, "sum")
    if n == 1:
        return e
    if e.op == "sum":
        return _make("sum", e.args, n * e.n)
    return _make("sum", (e,), n)


def rms(n: int, e: Expr) -> Expr:
    """``RMS(n, e)``: the root mean square of ``n`` values of ``e``."""
    return _make("rms", (_term(e, "rms"),), _size(n, "rms"))


def clamp(lo: float, hi: float, e: Expr) -> Expr:
    return _make("clamp", (_term(e, "clamp"),), (float(lo), float(hi)))


def concat(a: Expr, b: Expr, axis: int, size_a: int, size_b: int) -> Expr:
    """Two tiles joined along tile dim ``axis`` (sizes ``size_a`` + ``size_b``)."""
    return _make("concat", (_term(a, "concat"), _term(b, "concat")), (int(axis), int(size_a), int(size_b)))


def _unary(op: str):
    def f(e: Expr) -> Expr:
        return _make(op, (_term(e, op),))
    f.__name__ = op
    f.__doc__ = f"``{op}(e)``."
    return f


def _binary(op: str):
    def f(a: Expr, b: Expr) -> Expr:
        return _make(op, (_term(a, op), _term(b, op)))
    f.__name__ = op
    f.__doc__ = f"``{op}(a, b)``."
    return f


exp = _unary("exp")
square = _unary("square")
sqrt = _unary("sqrt")
silu = _unary("silu")
gelu = _unary("gelu")
relu = _unary("relu")
sigmoid = _unary("sigmoid")
neg = _unary("neg")
add = _binary("add")
mul = _binary("mul")
div = _binary("div")
pow_ = _binary("pow")

CONSTRUCTORS = {"exp": exp, "square": square, "sqrt": sqrt, "silu": silu, "gelu": gelu, "relu": relu,
                "sigmoid": sigmoid, "neg": neg, "add": add, "mul": mul, "div": div, "pow": pow_}


@lru_cache(maxsize=1 << 16)
def symbols(e: Expr) -> frozenset[str]:
    """The function symbols a term uses (``var`` and ``sum`` excluded)."""
    own = frozenset() if e.op in ("var", "sum") else frozenset((e.op,))
    return own.union(*(symbols(a) for a in e.args))


@lru_cache(maxsize=1 << 16)
def variables(e: Expr) -> frozenset[int]:
    """The input indices a term mentions."""
    if e.op == "var":
        return frozenset((e.n,))
    return frozenset().union(*(variables(a) for a in e.args))


#: Symbols no equivalence axiom looks inside (MIRAGE_SPEC §3): only add, mul, div and sum are
#: rewritten, so each of these keeps the inputs its arguments mention under every rewrite.
RIGID = names(rigid=True) + ("neg", "rms")


@lru_cache(maxsize=1 << 16)
def signatures(e: Expr) -> frozenset[tuple]:
    """Rewrite-invariant fingerprints of a term's structure, for a sound negative test.

    One entry per rigid node: ``(op, attribute, inputs of each argument)``, and one per
    division: ``("div", inputs of the denominator)``. Every equivalence axiom of the spec
    keeps this set unchanged and every subexpression axiom only grows it (concat aside,
    whose own node is not recorded), so ``cand ⊑ target`` implies
    ``signatures(cand) <= signatures(target)``.
    """
    own: tuple = ()
    if e.op in RIGID:
        attr = e.n if e.op == "clamp" else (_degree(e.n) if e.op == "rms" else None)
        own = ((e.op, attr, tuple(variables(a) for a in e.args)),)
    elif e.op == "div":
        own = (("div", variables(e.args[1])),)
    return frozenset(own).union(*(signatures(a) for a in e.args))


def _degree(n: int) -> int:
    return 0 if n <= 1 else (n - 1).bit_length()
