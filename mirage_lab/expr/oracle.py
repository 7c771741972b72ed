"""The z3 subexpression oracle: is a candidate's expression part of some target's?

Encoding (MIRAGE_SPEC §3, Mirage's z3 version): an uninterpreted sort ``P``; ``add mul div
pow concat: P²→P``; ``exp square sqrt silu gelu relu neg: P→P``; ``clamp(Real, Real, P)``;
``rms(Int, P)``, ``red(Int, P)`` with the reduction degree stored as ``ceil(log2 n)``; a
predicate ``subpattern(P, P)``. The axioms are the spec's equivalence axioms
(commutativity, associativity, distributivity, the reduction rules) and subexpression
axioms (reflexive, transitive, every operand is a subpattern, a smaller reduction of the
same term is a subpattern of a larger one), plus: a concat of two subpatterns is one.

A query asserts ``¬subpattern(cand, t)`` for every target ``t``; the candidate passes iff
z3 answers **unsat**. One solver is built per target set (axioms and targets asserted
once); each query runs between ``push``/``pop``, under a resource limit.

Before z3, exact shortcuts (consequences of the axioms, so they never contradict z3): a
candidate that is a literal subterm of a target passes; a candidate fails if it mentions an
input or a function symbol (other than sum and concat) that no target mentions, or if one
of its rewrite-invariant signatures (:func:`.terms.signatures`: e.g. "exp of a term over
inputs {0, 2}", "a division by a term over {1}") occurs in no target.

    >>> from mirage_lab.expr.terms import var, mul, red, exp
    >>> t = red(4096, mul(var(0), var(1)))
    >>> o = SubexprOracle([t])
    >>> o.check(red(128, mul(var(1), var(0)))), o.check(exp(var(0)))
    (True, False)
"""
from __future__ import annotations

import itertools
import threading
import time
from typing import Any, Iterable, Sequence

from . import terms as T
from .terms import Expr, ExprError, signatures, symbols, variables

#: z3 resource limit per query. Every positive query of the spec examples and of the
#: hand-built μGraphs needs under 13k (measured); a query that runs out is answered "no".
#: Mirage uses 80000 with a fresh solver per query.
DEFAULT_RLIMIT = 50_000
DEFAULT_TIMEOUT_MS = 2_000
#: Answers and z3 encodings kept per oracle; past this the older half goes (a long search
#: meets millions of expressions, and each answer is cheap to recompute).
CACHE_LIMIT = 1 << 18


def _trim(d: dict) -> None:
    if len(d) > CACHE_LIMIT:
        for k in list(itertools.islice(d, len(d) // 2)):
            del d[k]


def degree(n: int) -> int:
    """The reduction degree of a sum over ``n`` terms: ``ceil(log2 n)`` (Mirage's encoding).

    >>> degree(4096), degree(1), degree(3)
    (12, 0, 2)
    """
    return 0 if n <= 1 else (int(n) - 1).bit_length()  # exact, no float log


class _Z3Model:
    """The z3 declarations and axioms (one instance per oracle; z3 contexts are not thread-safe)."""

    def __init__(self) -> None:
        import z3

        self.z3 = z3
        self.ctx = z3.Context()
        c = self.ctx
        P = self.P = z3.DeclareSort("P", c)
        I = z3.IntSort(c)
        R = z3.RealSort(c)
        B = z3.BoolSort(c)
        F = z3.Function
        self.fn = {
            "add": F("add", P, P, P), "mul": F("mul", P, P, P), "div": F("div", P, P, P),
            "pow": F("pow", P, P, P), "concat": F("concat", P, P, P),
            "clamp": F("clamp", R, R, P, P), "rms": F("rms", I, P, P), "sum": F("red", I, P, P),
        }
        for name in T.UNARY_TERMS:  # exp, square, ..., neg: uninterpreted unary functions
            self.fn[name] = F(name, P, P)
        self.sp = F("subpattern", P, P, B)
        self.vars: dict[int, Any] = {}
        self.axioms = self._axioms()

    def _axioms(self) -> list[Any]:
        z3 = self.z3
        c = self.ctx
        P = self.P
        f = self.fn
        sp = self.sp
        x, y, z = z3.Consts("x y z", P)
        i, i1, i2 = z3.Ints("i i1 i2", c)
        add, mul, div, red = f["add"], f["mul"], f["div"], f["sum"]
        A = z3.ForAll
        ax = [
            # subexpression: reflexive, transitive
            A([x], sp(x, x)),
            A([x, y, z], z3.Implies(z3.And(sp(x, y), sp(y, z)), sp(x, z)),
              patterns=[z3.MultiPattern(sp(x, y), sp(y, z))]),
            # equivalences
            A([x, y], add(x, y) == add(y, x)),
            A([x, y], mul(x, y) == mul(y, x)),
            A([x, y, z], add(x, add(y, z)) == add(add(x, y), z)),
            A([x, y, z], mul(x, mul(y, z)) == mul(mul(x, y), z)),
            A([x, y, z], add(mul(x, z), mul(y, z)) == mul(add(x, y), z)),
            A([x, y, z], add(div(x, z), div(y, z)) == div(add(x, y), z)),
            A([x, y, z], mul(x, div(y, z)) == div(mul(x, y), z)),
            A([x], red(0, x) == x),
            A([x, i1, i2], z3.Implies(z3.And(i1 >= 0, i2 >= 0), red(i1, red(i2, x)) == red(i1 + i2, x)),
              patterns=[red(i1, red(i2, x))]),
            A([x, y, i, i1, i2], z3.Implies(z3.And(i >= 0, i1 >= 0, i2 >= 0),
                                            red(i, add(red(i1, x), red(i2, y))) == add(red(i + i1, x), red(i + i2, y))),
              patterns=[red(i, add(red(i1, x), red(i2, y)))]),
            A([x, y, i], red(i, mul(x, y)) == mul(red(i, x), y)),
            A([x, y, i], red(i, div(x, y)) == div(red(i, x), y)),
            # reductions of the same term nest: a partial sum is part of the full one
            A([x, i1, i2], z3.Implies(i1 <= i2, sp(red(i1, x), red(i2, x))),
              patterns=[z3.MultiPattern(red(i1, x), red(i2, x))]),
            # concat of two useful pieces is useful (over-approximation: pruning stays safe)
            A([x, y, z], z3.Implies(z3.And(sp(x, z), sp(y, z)), sp(f["concat"](x, y), z)),
              patterns=[z3.MultiPattern(f["concat"](x, y), sp(x, z))]),
        ]
        for name in ("add", "mul", "div", "pow"):
            g = f[name]
            ax.append(A([x, y], z3.And(sp(x, g(x, y)), sp(y, g(x, y))), patterns=[g(x, y)]))
        for name in T.UNARY_TERMS:
            g = f[name]
            ax.append(A([x], sp(x, g(x)), patterns=[g(x)]))
        lo, hi = z3.Reals("lo hi", c)
        ax.append(A([lo, hi, x], sp(x, f["clamp"](lo, hi, x)), patterns=[f["clamp"](lo, hi, x)]))
        ax.append(A([i, x], sp(x, f["rms"](i, x)), patterns=[f["rms"](i, x)]))
        ax.append(A([i, x], sp(x, red(i, x)), patterns=[red(i, x)]))
        return ax

    def var(self, i: int) -> Any:
        v = self.vars.get(i)
        if v is None:
            v = self.vars[i] = self.z3.Const(f"v{i}", self.P)
        return v

    def _encode_arg(self, op: str, a: Expr, memo: dict[Expr, Any]) -> Any:
        # exp(c·y) is not exp(y): under a rigid function a constant is an opaque factor const_c·y.
        if a.op == "scale" and op in T.RIGID:
            c = self.z3.Const(f"const_{a.n!r}", self.P)
            return self.fn["mul"](c, self.encode(a.args[0], memo))
        return self.encode(a, memo)

    def encode(self, e: Expr, memo: dict[Expr, Any]) -> Any:
        got = memo.get(e)
        if got is not None:
            return got
        z3 = self.z3
        op = e.op
        if op == "var":
            r = self.var(e.n)
        elif op in ("sum", "rms"):
            r = self.fn[op](z3.IntVal(degree(e.n), self.ctx), self.encode(e.args[0], memo))
        elif op == "clamp":
            lo, hi = e.n
            r = self.fn["clamp"](z3.RealVal(repr(lo), self.ctx), z3.RealVal(repr(hi), self.ctx),
                                 self._encode_arg(op, e.args[0], memo))
        elif op == "scale":   # constants are ignored (Mirage), except where a rigid function reads them
            r = self.encode(e.args[0], memo)
        elif op in self.fn:
            r = self.fn[op](*[self._encode_arg(op, a, memo) for a in e.args])
        else:
            raise ExprError(f"z3 encoding: unknown term {op!r}")
        memo[e] = r
        return r

    def distinct_vars(self, idx: Iterable[int]) -> list[Any]:
        vs = [self.var(i) for i in sorted(set(idx))]
        out = []
        if len(vs) > 1:
            out.append(self.z3.Distinct(*vs))
            for a in vs:
                for b in vs:
                    if a is not b:
                        out.append(self.z3.Not(self.sp(a, b)))
        return out


class SubexprOracle:
    """Answers "is this expression a subexpression of some target output's?" for one search.

    Build it once per search with the target program's output expressions; ``check`` is
    memoized on the expression. Counters: ``hits`` (answered from the cache), ``misses``
    (computed), ``z3_calls``, ``z3_unknown`` (timeouts: counted as "no", as Mirage does),
    ``z3_time``.

        >>> from mirage_lab.expr.terms import var, mul, red
        >>> o = SubexprOracle([red(64, mul(var(0), var(1)))])
        >>> o.check(var(0)), o.hits, o.misses
        (True, 0, 1)
        >>> o.check(var(0)), o.hits
        (True, 1)
    """

    def __init__(self, target_exprs: Sequence[Expr], rlimit: int = DEFAULT_RLIMIT,
                 timeout_ms: int = DEFAULT_TIMEOUT_MS) -> None:
        targets = tuple(target_exprs)
        if not targets or not all(isinstance(t, Expr) for t in targets):
            raise ExprError(f"SubexprOracle: needs a non-empty list of target expressions, got {target_exprs!r}")
        self.targets = targets
        self.rlimit = int(rlimit)
        self.timeout_ms = int(timeout_ms)
        self._subterms = set().union(*(t.subterms() for t in targets))
        self._symbols = frozenset().union(*(symbols(t) for t in targets))
        self._vars = frozenset().union(*(variables(t) for t in targets))
        self._signatures = frozenset().union(*(signatures(t) for t in targets))
        self._cache: dict[Expr, bool] = {}
        self._lock = threading.Lock()
        self._model: _Z3Model | None = None
        self._solver: Any = None
        self._memo: dict[Expr, Any] = {}
        self._zt: list[Any] = []
        self.hits = 0
        self.misses = 0
        self.z3_calls = 0
        self.z3_unknown = 0
        self.z3_time = 0.0
        self.shortcut_no = 0
        self.shared: Any = None      # a .shared_answers.SharedAnswers: z3 answers other processes paid for
        self.shared_hits = 0

    def _ensure_solver(self) -> None:
        if self._solver is not None:
            return
        m = _Z3Model()
        s = m.z3.Solver(ctx=m.ctx)
        s.set("rlimit", self.rlimit)
        s.set("timeout", self.timeout_ms)
        s.add(*m.axioms)
        self._zt = [m.encode(t, self._memo) for t in self.targets]
        s.add(*m.distinct_vars(self._vars))
        self._model, self._solver = m, s

    def _decide(self, e: Expr) -> bool:
        if e in self._subterms:
            return True
        # concat is exempt: the concat axiom makes concat(a, b) a subpattern without the target using it.
        if not variables(e) <= self._vars or not (symbols(e) - {"concat"}) <= self._symbols:
            return False
        if not signatures(e) <= self._signatures:
            self.shortcut_no += 1
            return False
        if self.shared is not None:
            got = self.shared.get(e)
            if got is not None:
                self.shared_hits += 1
                return got
        self._ensure_solver()
        m, s = self._model, self._solver
        assert m is not None
        s.push()
        try:
            c = m.encode(e, self._memo)
            for t in self._zt:
                s.add(m.z3.Not(m.sp(c, t)))
            t0 = time.perf_counter()
            r = s.check()
            self.z3_time += time.perf_counter() - t0
            self.z3_calls += 1
        finally:
            s.pop()
        if r == m.z3.unknown:
            self.z3_unknown += 1
        if self.shared is not None:
            self.shared.put(e, r == m.z3.unsat)
        return r == m.z3.unsat

    def check(self, expr: Expr) -> bool:
        """True iff ``expr`` is (provably) a subexpression of some target."""
        if not isinstance(expr, Expr):
            raise ExprError(f"SubexprOracle.check: expected an Expr, got {type(expr).__name__}")
        with self._lock:
            got = self._cache.get(expr)
            if got is not None:
                self.hits += 1
                return got
            self.misses += 1
            ans = self._decide(expr)
            _trim(self._cache)
            _trim(self._memo)
            self._cache[expr] = ans
            return ans

    __call__ = check

    def stats(self) -> dict[str, Any]:
        """Counters as a dict (for search progress events)."""
        return {"hits": self.hits, "misses": self.misses, "z3_calls": self.z3_calls,
                "z3_unknown": self.z3_unknown, "z3_time": self.z3_time, "shortcut_no": self.shortcut_no,
                "shared_hits": self.shared_hits, "cached": len(self._cache)}

    def __getstate__(self) -> dict[str, Any]:  # process pools: ship targets and cache, rebuild z3 lazily
        d = {k: v for k, v in self.__dict__.items() if k not in ("_model", "_solver", "_memo", "_zt", "_lock", "shared")}
        return d

    def __setstate__(self, d: dict[str, Any]) -> None:
        self.__dict__.update(d)
        self._model = None
        self._solver = None
        self._memo = {}
        self._zt = []
        self._lock = threading.Lock()
        self.shared = None


_ORACLES: dict[tuple[Expr, ...], SubexprOracle] = {}


def is_subexpression(cand: Expr, target: Expr | Sequence[Expr]) -> bool:
    """Is ``cand`` a subexpression of ``target`` (or of one of several targets)?

    Uses one cached :class:`SubexprOracle` per target tuple.

        >>> from mirage_lab.expr.terms import var, mul, red, exp
        >>> is_subexpression(red(32, mul(var(0), var(1))), red(4096, mul(var(0), var(1))))
        True
    """
    key = (target,) if isinstance(target, Expr) else tuple(target)
    o = _ORACLES.get(key)
    if o is None:
        if len(_ORACLES) > 64:
            _ORACLES.clear()
        o = _ORACLES[key] = SubexprOracle(key)
    return o.check(cand)
