"""A cheap necessary condition for the subexpression oracle, checked before z3.

Most expressions the search proposes are not subexpressions of the target, and z3 needs
its full time-out (~0.2 s) to give up on each of them. An invariant of the axioms
rejects many at once: the *degree* of every input variable.

``deg_v(e)``: 1 for ``v`` itself; ``add`` takes the max of its operands; ``mul``, ``div`` and
``pow`` add them; sums, rms and unary functions keep their operand's. Every equivalence
axiom preserves it (e.g. ``x·z + y·z = (x+y)·z``: ``max(dx+dz, dy+dz) = max(dx, dy)+dz``;
``(x/y)/z = x/(y·z)``; ``Σ(x·y) = (Σx)·y``), and every subexpression axiom can only
lower it (an operand's degree is at most its parent's). So if some variable's degree in
a candidate exceeds its degree in every target, the candidate cannot be a
subexpression of any of them, and z3 need not be asked.

A second invariant covers the function symbols no axiom rewrites (exp, sqrt, square,
silu, gelu, relu, clamp, pow, rms): an application ``f(X)`` can only equal an application
of ``f`` to an equal argument, constant included (``exp(c·y)`` needs an ``exp(c·y)``). So every such application inside a candidate needs one in
the target whose argument has the same degrees (and, for ``rms``, the same reduction
degree ``ceil(log2 n)``, the encoding the z3 model uses). This is what rejects ``exp`` of
the wrong operand at once.
"""
from __future__ import annotations

import math
from functools import lru_cache
from typing import Sequence

from ..expr import Expr
from ..expr.terms import arg_constants
from ..ops import names


@lru_cache(maxsize=1 << 16)
def degrees(e: Expr) -> tuple[tuple[int, int], ...]:
    """``((var, degree), ...)`` sorted by var: the degree of each input variable in ``e``."""
    if e.op == "var":
        return ((e.n, 1),)
    kids = [dict(degrees(a)) for a in e.args]
    out: dict[int, int] = {}
    if e.op in ("mul", "div", "pow"):
        for k in kids:
            for v, d in k.items():
                out[v] = out.get(v, 0) + d
    else:
        for k in kids:
            for v, d in k.items():
                out[v] = max(out.get(v, 0), d)
    return tuple(sorted(out.items()))


ATOMIC = frozenset(names(rigid=True)) | {"rms"}  # the ops table's rigid functions (mirage_lab.ops)


@lru_cache(maxsize=1 << 16)
def atomic_signatures(e: Expr) -> frozenset:
    """Signatures ``(f, attribute, argument degrees, argument constants)`` of every
    un-rewritable application in ``e``: ``exp(c·y)`` and ``exp(y)`` differ in the constant."""
    out = set()
    for s in e.subterms():
        if s.op in ATOMIC:
            n = math.ceil(math.log2(s.n)) if s.op == "rms" else s.n
            out.add((s.op, n, tuple(degrees(a) for a in s.args), arg_constants(s)))
    return frozenset(out)


@lru_cache(maxsize=1 << 16)
def num_den(e: Expr) -> tuple[tuple[int, int, int], ...]:
    """``((var, numerator degree, denominator degree), ...)``: degrees split by side of divisions.

    Preserved by every equivalence axiom (``(x/y)/z = x/(y·z)``, ``x·(y/z) = (x·y)/z``,
    ``x/z + y/z = (x+y)/z``, ``Σ(x/y) = (Σx)/y``); an operand's two degrees are each at most
    the larger of its parent's (a divisor's numerator was its parent's denominator).
    """
    if e.op == "var":
        return ((e.n, 1, 0),)
    kids = [{v: (a, b) for v, a, b in num_den(k)} for k in e.args]
    out: dict[int, tuple[int, int]] = {}

    def put(v: int, a: int, b: int, combine) -> None:
        o = out.get(v, (0, 0))
        out[v] = (combine(o[0], a), combine(o[1], b))

    if e.op in ("mul", "pow"):
        for k in kids:
            for v, (a, b) in k.items():
                put(v, a, b, lambda x, y: x + y)
    elif e.op == "div":
        for v, (a, b) in kids[0].items():
            put(v, a, b, lambda x, y: x + y)
        for v, (a, b) in kids[1].items():
            put(v, b, a, lambda x, y: x + y)
    else:
        for k in kids:
            for v, (a, b) in k.items():
                put(v, a, b, max)
    return tuple(sorted((v, a, b) for v, (a, b) in out.items()))


@lru_cache(maxsize=1 << 16)
def sum_depth(e: Expr) -> int:
    """The largest total ``log2`` reduction size on a path from the root to a leaf."""
    here = math.ceil(math.log2(e.n)) if e.op == "sum" else 0
    return here + max((sum_depth(a) for a in e.args), default=0)


@lru_cache(maxsize=1 << 16)
def sum_total(e: Expr) -> int:
    """The total ``log2`` reduction size of every sum node in the tree (with repeats)."""
    here = math.ceil(math.log2(e.n)) if e.op == "sum" else 0
    return here + sum(sum_total(a) for a in e.args)


def may_be_subexpression(cand: Expr, targets: Sequence[Expr]) -> bool:
    """False only when ``cand`` is not a subexpression of any target by the invariants above.

    The sum bound (a path's reductions cannot exceed all the target's reductions together)
    is a cut-off rather than a theorem of the axioms; it keeps sums larger than anything
    the program reduces out of the search.
    """
    dc = degrees(cand)
    sc = atomic_signatures(cand)
    nc = num_den(cand)
    depth = sum_depth(cand)
    for t in targets:
        dt = dict(degrees(t))
        if not all(d <= dt.get(v, -1) for v, d in dc) or not sc <= atomic_signatures(t):
            continue
        mt = {v: max(a, b) for v, a, b in num_den(t)}
        if not all(a <= mt.get(v, -1) and b <= mt.get(v, -1) for v, a, b in nc):
            continue
        if depth > sum_total(t):
            continue
        return True
    return False
