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

Constants: ``scale(c, e)`` is ``c·e`` (``mul_scalar``, a mean's ``1/n``). The oracle ignores
constants, as Mirage does, except where a function that does not commute with scaling
reads them: constructors move a ``scale`` outward through sums, products, quotients,
equal-scaled additions and the homogeneous functions (square, sqrt, rms, relu for c > 0),
so it stays only at the root or directly under exp, silu, gelu, sigmoid, clamp, pow, where
it tells ``exp(c·y)`` from ``exp(y)``::

    >>> from mirage_lab.expr.terms import scale, exp
    >>> str(exp(red(8, scale(0.5, var(0))))), str(red(8, scale(0.5, var(0))))
    ('exp(scale(0.5, sum(8, x0)))', 'scale(0.5, sum(8, x0))')
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
ALL_TERMS = ("var", "sum", "rms", "clamp", "concat", "scale") + UNARY_TERMS + BINARY_TERMS


class Expr:
    """One interned abstract-expression node: ``op``, child terms ``args``, attribute ``n``.

    ``n`` is the input index for ``var``, the reduction size for ``sum``/``rms``, the bounds
    ``(lo, hi)`` for ``clamp``, ``(axis, size_a, size_b)`` for ``concat``, the constant for
    ``scale``, else ``None``.
    Build terms with the module's constructor functions, not with ``Expr(...)``.
    """

    __slots__ = ("op", "args", "n", "value", "_hash", "_str", "_size", "__weakref__")

    def __init__(self, op: str, args: tuple["Expr", ...], n: Any, value: Any = None):
        self.op = op
        self.args = args
        self.n = n
        self.value = value   # scale: the constant at full precision (n is it to 12 digits, the key)
        self._hash = hash((op, tuple(id(a) for a in args), n))
        self._str: str | None = None
        self._size = 1 + sum(a._size for a in args)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return self is other

    def __reduce__(self):  # pickling (process pools) re-interns on load
        return (_make, (self.op, self.args, self.n, self.value))

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
            elif self.op == "scale":
                s = f"scale({self.n:.12g}, {self.args[0]})"
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


def _make(op: str, args: tuple[Expr, ...], n: Any = None, value: Any = None) -> Expr:
    key = (op, args, n)
    e = _INTERN.get(key)
    if e is None:
        e = Expr(op, args, n, value)
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
    c, e = split_scale(e)
    if c != 1.0:
        return scale(c, red(n, e))
    if e.op == "sum":
        return _make("sum", e.args, n * e.n)
    return _make("sum", (e,), n)


def rms(n: int, e: Expr) -> Expr:
    """``RMS(n, e)``: the root mean square of ``n`` values of ``e`` (``rms(n, c·e) = |c|·rms(n, e)``)."""
    n = _size(n, "rms")
    c, e = split_scale(_term(e, "rms"))
    return scale(abs(c), _make("rms", (e,), n))


def clamp(lo: float, hi: float, e: Expr) -> Expr:
    return _make("clamp", (_term(e, "clamp"),), (float(lo), float(hi)))


def concat(a: Expr, b: Expr, axis: int, size_a: int, size_b: int) -> Expr:
    """Two tiles joined along tile dim ``axis`` (sizes ``size_a`` + ``size_b``)."""
    (ca, a2), (cb, b2) = split_scale(_term(a, "concat")), split_scale(_term(b, "concat"))
    attr = (int(axis), int(size_a), int(size_b))
    if _key(ca) == _key(cb) and ca != 1.0:
        return scale(ca, _make("concat", (a2, b2), attr))
    return _make("concat", (a, b), attr)


def _constant(c: Any) -> float:
    try:
        c = float(c)
    except (TypeError, ValueError, OverflowError) as e:
        raise ExprError(f"scale: the constant must be a number, got {c!r}") from e
    if c != c or c in (float("inf"), float("-inf")):
        raise ExprError(f"scale: the constant must be finite, got {c!r}")
    return c + 0.0


def _key(c: float) -> float:
    # 12 significant digits: 0.1·0.2 and 0.02 are one constant, however they were computed.
    return float(f"{c:.12g}") + 0.0


def scale(c: float, e: Expr) -> Expr:
    """``c·e`` for a real constant ``c``; ``scale(1, e) = e`` and nested scales multiply.

        >>> str(scale(2, scale(0.25, var(0))))
        'scale(0.5, x0)'
    """
    c = _constant(c)
    e = _term(e, "scale")
    if e.op == "scale":
        c, e = c * e.value, e.args[0]
    if _key(c) == 1.0:
        return e
    return _make("scale", (e,), _key(c), c)


def split_scale(e: Expr) -> tuple[float, Expr]:
    """``(c, e')`` with ``e = scale(c, e')`` (``c = 1`` when ``e`` has no constant at its root)."""
    return (e.value, e.args[0]) if e.op == "scale" else (1.0, e)


def _unary(op: str):
    def f(e: Expr) -> Expr:
        e = _term(e, op)
        c, inner = split_scale(e)
        if c != 1.0:
            if op in ("neg",) or (op == "relu" and c > 0):
                return scale(c, _make(op, (inner,)))
            if op == "square":
                return scale(c * c, _make(op, (inner,)))
            if op == "sqrt" and c > 0:
                return scale(c ** 0.5, _make(op, (inner,)))
        return _make(op, (e,))   # exp, silu, gelu, sigmoid, ...: the constant stays inside
    f.__name__ = op
    f.__doc__ = f"``{op}(e)``."
    return f


def _binary(op: str):
    def f(a: Expr, b: Expr) -> Expr:
        a, b = _term(a, op), _term(b, op)
        (ca, a2), (cb, b2) = split_scale(a), split_scale(b)
        if ca != 1.0 or cb != 1.0:
            if op == "mul":
                return scale(ca * cb, _make(op, (a2, b2)))
            if op == "div" and cb != 0.0:
                return scale(ca / cb, _make(op, (a2, b2)))
            if op == "add" and _key(ca) == _key(cb):
                return scale(ca, _make(op, (a2, b2)))
        return _make(op, (a, b))   # pow, unequal sums: the constants stay inside
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
    """The function symbols a term uses (``var``, ``sum`` and ``scale`` excluded)."""
    own = frozenset() if e.op in ("var", "sum", "scale") else frozenset((e.op,))
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

    One entry per rigid node: ``(op, attribute, inputs of each argument)`` (the attribute
    includes the constant a ``scale`` argument carries: ``exp(c·y)`` is not ``exp(y)``), and one per
    division: ``("div", inputs of the denominator)``. Every equivalence axiom of the spec
    keeps this set unchanged and every subexpression axiom only grows it (concat aside,
    whose own node is not recorded), so ``cand ⊑ target`` implies
    ``signatures(cand) <= signatures(target)``.
    """
    own: tuple = ()
    if e.op in RIGID:
        attr = e.n if e.op == "clamp" else (_degree(e.n) if e.op == "rms" else None)
        own = ((e.op, (attr, arg_constants(e)), tuple(variables(a) for a in e.args)),)
    elif e.op == "div":
        own = (("div", variables(e.args[1])),)
    return frozenset(own).union(*(signatures(a) for a in e.args))


def arg_constants(e: Expr) -> tuple[float, ...]:
    """The constant each argument of ``e`` carries at its root (1.0 for none)."""
    return tuple(a.n if a.op == "scale" else 1.0 for a in e.args)


def _degree(n: int) -> int:
    return 0 if n <= 1 else (n - 1).bit_length()
