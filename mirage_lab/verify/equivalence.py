"""Probabilistic equivalence of two μGraphs: equal fingerprints on shared random inputs.

Two graphs are called equivalent when their outputs match under some permutation (equal
shapes and equal fingerprints on every one of ``tests`` random inputs over Z_p × Z_q).
Equivalent graphs always match (no false negatives, for the ops the spec models exactly);
a non-equivalent pair matches only by a Schwartz–Zippel-style accident, whose chance
shrinks exponentially with ``tests``.

    >>> import mirage_lab as mi
    >>> from mirage_lab import examples
    >>> r = mi.verify.equivalent(examples.rms_norm_linear_program(4, 64, 32),
    ...                          examples.rms_norm_linear_fused(4, 64, 32, grid=4, forloop_range=4), seed=0)
    >>> bool(r), r.permutation
    (True, (0,))
"""
from __future__ import annotations

import itertools
import os
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from ..errors import MirageLabError
from ..ir.kernel_graph import KernelGraph
from ..ir.shapes import fmt
from .backends import get_ops
from .fingerprint import fingerprint_graph, random_inputs
from .float_check import float_equivalent, inexact_scalars, loose_ops

FLOAT_CHECKS = ("auto", "never", "always")

#: Above this many outputs, permutations are matched greedily instead of exhaustively.
_MAX_EXHAUSTIVE = 7


class VerifyError(MirageLabError, ValueError):
    """Two graphs cannot be compared (different inputs), or the verifier got bad arguments."""


@dataclass
class EquivalenceResult:
    """The verdict of :func:`equivalent`; true in a boolean context iff the graphs match.

    ``permutation[i] = j``: output ``i`` of the first graph equals output ``j`` of the second.
    ``reason`` says why not; ``mismatch`` gives the closest failing output pair and the first
    differing index ``(test, *element)`` when fingerprints differ.
    """

    equivalent: bool
    permutation: tuple[int, ...] | None = None
    reason: str = ""
    mismatch: dict[str, Any] | None = None
    tests: int = 0
    seed: int | None = None
    backend: str = "numpy"
    matched: list[tuple[int, int]] = field(default_factory=list)
    #: The float64 second check (:mod:`.float_check`): "" (not run), "confirmed", "rejected",
    #: "decided" (the field cannot model an inexact scalar; the float test decided), "inconclusive".
    second_check: str = ""

    def __bool__(self) -> bool:
        return self.equivalent

    def __repr__(self) -> str:
        if self.equivalent:
            return f"EquivalenceResult(equivalent, permutation={self.permutation}, tests={self.tests}, seed={self.seed})"
        return f"EquivalenceResult(NOT equivalent: {self.reason})"


def match_outputs(fps_a: Sequence[np.ndarray], fps_b: Sequence[np.ndarray]) -> tuple[int, ...] | None:
    """A permutation ``perm`` with ``fps_a[i] == fps_b[perm[i]]`` for all i, or None.

    This is what the search calls against the target's fingerprints.

        >>> a = [np.zeros((1, 2), np.uint16), np.ones((1, 2), np.uint16)]
        >>> match_outputs(a, a[::-1])
        (1, 0)
    """
    n = len(fps_a)
    if n != len(fps_b):
        return None
    eq = [[fa.shape == fb.shape and bool(np.array_equal(fa, fb)) for fb in fps_b] for fa in fps_a]
    if n <= _MAX_EXHAUSTIVE:
        for perm in itertools.permutations(range(n)):
            if all(eq[i][perm[i]] for i in range(n)):
                return tuple(perm)
        return None
    used: set[int] = set()
    perm = []
    for i in range(n):
        j = next((j for j in range(n) if j not in used and eq[i][j]), None)
        if j is None:
            return None
        used.add(j)
        perm.append(j)
    return tuple(perm)


def decide(g1: KernelGraph, g2: KernelGraph, f1: Sequence[np.ndarray], f2: Sequence[np.ndarray], seed: int,
           float_check: str = "auto") -> tuple[tuple[int, ...] | None, str, str] | None:
    """The verdict on two graphs' fingerprints (``f1``, ``f2``, on the same inputs), with the float64
    second check where the field cannot be trusted alone: ``(permutation, second_check, reason)``, a
    ``None`` permutation for "not equivalent"; ``None`` when the fingerprints differ and nothing overrides
    them (the caller explains). The one rule for :func:`equivalent` and the search's confirmation.
    """
    perm = match_outputs(f1, f2)
    if perm is not None:
        if float_check == "always" or (float_check == "auto" and (loose_ops(g1) or loose_ops(g2))):
            fc = float_equivalent(g1, g2, seed, permutations=_field_permutations(f1, f2))
            if fc.equal is False:
                return None, "rejected", f"fingerprints match, but the float64 second check rejects: {fc.reason}"
            return fc.permutation or perm, "confirmed" if fc.equal else "inconclusive", ""
        return perm, "", ""
    if float_check != "never" and (inexact_scalars(g1) or inexact_scalars(g2)):
        fc = float_equivalent(g1, g2, seed)
        if fc.equal:
            return fc.permutation, "decided", ""
    return None


def _field_permutations(fps_a: Sequence[np.ndarray], fps_b: Sequence[np.ndarray]) -> list[tuple[int, ...]]:
    """Every output permutation under which the fingerprints match (for the float64 check)."""
    n = len(fps_a)
    eq = [[fa.shape == fb.shape and bool(np.array_equal(fa, fb)) for fb in fps_b] for fa in fps_a]
    if n > _MAX_EXHAUSTIVE:
        perm = match_outputs(fps_a, fps_b)
        return [perm] if perm is not None else []
    return [p for p in itertools.permutations(range(n)) if all(eq[i][p[i]] for i in range(n))]


def _first_diff(a: np.ndarray, b: np.ndarray) -> tuple[int, ...]:
    idx = np.argwhere(a != b)
    return tuple(int(v) for v in idx[0]) if len(idx) else ()


def equivalent(g1: KernelGraph, g2: KernelGraph, tests: int = 2, seed: int | None = None,
               backend: str = "auto", float_check: str = "auto") -> EquivalenceResult:
    """Are ``g1`` and ``g2`` the same function (up to a permutation of outputs)?

    Both graphs must declare the same inputs (count, order, shapes); otherwise a
    :class:`VerifyError` says how they differ. ``seed=None`` draws a fresh seed (recorded
    in the result, so a verdict can be replayed).

    ``float_check="auto"``: where the fingerprints match and either graph uses an op the field
    models loosely (:data:`.float_check.LOOSE_OPS`: exp, silu, gelu, sigmoid, relu, clamp,
    pow, mul_scalar), the graphs also run in float64 on random inputs and must agree; where
    the fingerprints differ and a ``mul_scalar`` constant is inexact in the field (an
    irrational such as ``2**-0.5``), the float64 run decides. ``"always"`` runs it after
    every match, ``"never"`` trusts the field alone. ``result.second_check`` says what ran.

        >>> from mirage_lab import examples
        >>> r = equivalent(examples.gated_mlp_program(4, 64, 32),
        ...                examples.rms_norm_linear_program(4, 64, 32))   # doctest: +SKIP
        Traceback (most recent call last):
        VerifyError: ...
    """
    for name, g in (("g1", g1), ("g2", g2)):
        if not isinstance(g, KernelGraph):
            raise VerifyError(f"equivalent: {name} must be a KernelGraph, got {type(g).__name__}")
        if not g.outputs:
            raise VerifyError(f"equivalent: {name} has no outputs; call mark_output first")
    if not isinstance(tests, int) or isinstance(tests, bool) or tests < 1:
        raise VerifyError(f"equivalent: tests must be a positive int, got {tests!r}")
    if float_check not in FLOAT_CHECKS:
        raise VerifyError(f"equivalent: float_check must be one of {FLOAT_CHECKS}, got {float_check!r}")
    d1 = [t.dims for t in g1.inputs]
    d2 = [t.dims for t in g2.inputs]
    if d1 != d2:
        if len(d1) != len(d2):
            raise VerifyError(f"equivalent: the graphs take different numbers of inputs ({len(d1)} vs {len(d2)}): "
                              f"{[fmt(d) for d in d1]} vs {[fmt(d) for d in d2]}")
        i = next(i for i in range(len(d1)) if d1[i] != d2[i])
        raise VerifyError(f"equivalent: input {i} has shape {fmt(d1[i])} in g1 but {fmt(d2[i])} in g2; "
                          "equivalence is only defined for graphs over the same inputs")
    if seed is None:
        seed = int.from_bytes(os.urandom(4), "little")
    ops = get_ops(backend)
    base = dict(tests=tests, seed=seed, backend=ops.name)
    o1 = [t.dims for t in g1.outputs]
    o2 = [t.dims for t in g2.outputs]
    if len(o1) != len(o2):
        return EquivalenceResult(False, reason=f"output count mismatch: {len(o1)} vs {len(o2)}", **base)
    if sorted(o1) != sorted(o2):
        return EquivalenceResult(False, reason=f"output shape mismatch: {[fmt(d) for d in o1]} vs {[fmt(d) for d in o2]}",
                                 **base)
    xs = random_inputs(g1, tests, seed)
    f1 = fingerprint_graph(g1, xs, ops=ops)
    f2 = fingerprint_graph(g2, xs, ops=ops)
    decided = decide(g1, g2, f1, f2, seed, float_check)
    if decided is not None:
        perm, second, reason = decided
        if perm is None:
            return EquivalenceResult(False, reason=reason, second_check=second, **base)
        return EquivalenceResult(True, permutation=perm, matched=list(enumerate(perm)), second_check=second, **base)
    # Explain: the output pairs that do match, and the first differing element of a same-shape pair.
    matched = []
    used: set[int] = set()
    for i, a in enumerate(f1):
        for j, b in enumerate(f2):
            if j not in used and a.shape == b.shape and np.array_equal(a, b):
                matched.append((i, j))
                used.add(j)
                break
    free1 = [i for i in range(len(f1)) if i not in {m[0] for m in matched}]
    mismatch = None
    for i in free1:
        j = next((j for j in range(len(f2)) if j not in used and f2[j].shape == f1[i].shape), None)
        if j is not None:
            mismatch = {"output": i, "other_output": j, "index": _first_diff(f1[i], f2[j]),
                        "differing": int((f1[i] != f2[j]).sum()), "total": int(f1[i].size)}
            break
    reason = "fingerprint mismatch"
    if mismatch:
        reason += (f": output {mismatch['output']} vs output {mismatch['other_output']} differ at "
                   f"(test, *index) {mismatch['index']} ({mismatch['differing']} of {mismatch['total']} values)")
    return EquivalenceResult(False, reason=reason, mismatch=mismatch, matched=matched, **base)
