"""The verifier's second check: both μGraphs run in float64 on random inputs.

The finite field models some ops loosely (MIRAGE_SPEC §4; docs/verifier.md lists them):
``exp`` sees its argument only mod q = 113, so ``exp(1.113·y)`` fingerprints like ``exp(y)``;
silu, gelu, sigmoid, relu and clamp are stand-ins with no notion of sign or size; ``pow``
reads its exponent's raw residue; a ``mul_scalar`` constant is one of 25651 field values,
so different constants can share one. Where two graphs that use such ops fingerprint
equal, :func:`mirage_lab.verify.equivalent` runs them here too, through the reference
interpreter (:func:`mirage_lab.interp.reference.run_reference`), and accepts only if
their outputs agree to ``rtol`` on every test.

Three input draws per seed: uniform in [-1, 1) (mixed signs, so relu/clamp/exp see both
sides), mixed-sign values scaled by 2**-8 (small values: a difference confined near zero, such as
``clamp(25652·y, -0.5, 0.5)`` against ``clamp(y, -0.5, 0.5)``, shows there; a unit-scale
draw misses that band with chance ~1/700 at 128 values), and uniform in [0.5, 1.5) (positive, so
sqrt and pow of non-integer exponents stay real).

    >>> import mirage_lab as mi
    >>> g1 = mi.new_kernel_graph(); x = g1.new_input((4, 8)); g1.mark_output(g1.exp(x))
    >>> g2 = mi.new_kernel_graph(); x = g2.new_input((4, 8)); g2.mark_output(g2.silu(x))
    >>> sorted(loose_ops(g1)), float_equivalent(g1, g2, seed=0).equal
    (['exp'], False)
"""
from __future__ import annotations

import contextlib
import itertools
from collections import OrderedDict
from dataclasses import dataclass
from typing import Iterator, Sequence

from ..ir.kernel_graph import KernelGraph
from .field import is_exact_scalar

#: Ops whose field image is not a faithful image of the real function (see the module doc).
LOOSE_OPS = frozenset({"exp", "silu", "gelu", "sigmoid", "relu", "clamp", "pow", "mul_scalar"})
#: Relative tolerance of the float64 comparison: far above float64 rounding of any μGraph the
#: search builds (matmul sums of 4096 terms err ~1e-13), far below a changed constant's effect.
RTOL = 1e-9
_REF_CACHE_SIZE = 8


@dataclass
class FloatCheck:
    """``equal``: True / False, or None when no output had a finite value to compare."""

    equal: bool | None
    permutation: tuple[int, ...] | None = None
    reason: str = ""


def _op_types(graph: KernelGraph) -> set[str]:
    types = {op.op_type for op in graph.ops}
    for op in graph.customized_ops:
        types |= {b.op_type for b in op.block_graph.ops}
    return types


def loose_ops(graph: KernelGraph) -> frozenset[str]:
    """The op types of ``graph`` (both levels) that the field models loosely."""
    return frozenset(_op_types(graph) & LOOSE_OPS)


def inexact_scalars(graph: KernelGraph) -> tuple[float, ...]:
    """The ``mul_scalar`` constants of ``graph`` that the field cannot model as a ring
    homomorphism (:func:`.field.is_exact_scalar`: irrational-looking floats such as 2**-0.5).

        >>> import mirage_lab as mi
        >>> g = mi.new_kernel_graph(); x = g.new_input((4, 8))
        >>> bg = mi.new_threadblock_graph((1, 1, 1), (128, 1, 1), 1, 64)
        >>> t = bg.new_input(x, (-1, -1, -1), -1); a = bg.forloop_accum(bg.mul_scalar(t, 2 ** -0.5), None)
        >>> bg.new_output(a, (-1, -1, -1)); (y,) = g.customized([x], bg); g.mark_output(y)
        >>> inexact_scalars(g)
        (0.7071067811865476,)
    """
    out = []
    for op in graph.customized_ops:
        for b in op.block_graph.ops:
            if b.op_type == "mul_scalar" and not is_exact_scalar(b.attrs["scalar"]):
                out.append(float(b.attrs["scalar"]))
    return tuple(out)


def _draws(graph: KernelGraph, seed: int) -> Iterator[list]:
    """The three input draws, one at a time, refilled into the same arrays (a draw of 4096x4096 weights is
    134 MB each): take each draw's outputs before the next (:func:`_run` copies any that alias an input).

    numpy's SFC64 sampler fills each float64 array a chunk at a time, scaled while in cache (torch's CPU
    sampler took 3x as long), handed to the reference as torch tensors sharing the memory. Refilling, not
    allocating anew, touches fresh memory once rather than three times: at full size the first touch cost
    more than the drawing (Mistral-7B GQA decode b64, 1.07 GB a draw: the three took 4.6-5.9 s, now 1.6-3.2 s
    the first time in a process and 0.9 s after; benchmarks/probes/draws_ab.py).
    """
    import numpy as np
    import torch

    from .fingerprint import draw_chunks, field_rng

    rng = field_rng(int(seed) & 0x7FFF_FFFF_FFFF_FFFF)
    arrays = [np.empty(tuple(t.dims), dtype=np.float64) for t in graph.inputs]
    xs = [torch.from_numpy(a) for a in arrays]
    for lo, hi in ((-1.0, 1.0), (-(2.0 ** -8), 2.0 ** -8), (0.5, 1.5)):
        for a in arrays:
            for part in draw_chunks(a):   # scaled while in cache
                rng.random(out=part)
                part *= hi - lo
                part += lo
        yield xs


def _run(graph: KernelGraph, xs: list) -> list:
    """``graph``'s float64 outputs on ``xs``, none sharing memory with an input (:func:`_draws` refills them)."""
    from ..interp.reference import run_reference

    ptrs = {x.untyped_storage().data_ptr() for x in xs}
    return [o.clone() if o.untyped_storage().data_ptr() in ptrs else o for o in run_reference(graph, xs)]


@contextlib.contextmanager
def _one_thread() -> Iterator[None]:
    """torch on one thread while the check runs. The search confirms hits in forked pool
    workers; a forked child whose parent had started torch's OpenMP team deadlocks in its
    first multi-threaded matmul (seen: tests/search hung in gomp_team_barrier_wait_end).
    One thread takes no team; it is also the fastest for these small graphs."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(n)


_REF_CACHE: "OrderedDict[tuple[str, int], list[list]]" = OrderedDict()


def _outputs(graph: KernelGraph, seed: int, cache: bool) -> list[list]:
    """Per test, the graph's float64 outputs (the first graph's are cached: the search's target)."""
    key = (graph.content_hash(), int(seed)) if cache else None
    if key is not None and key in _REF_CACHE:
        _REF_CACHE.move_to_end(key)
        return _REF_CACHE[key]
    outs = [_run(graph, xs) for xs in _draws(graph, seed)]
    if key is not None:
        _remember(key, outs)
    return outs


def _remember(key: tuple[str, int], outs: list[list]) -> None:
    _REF_CACHE[key] = outs
    while len(_REF_CACHE) > _REF_CACHE_SIZE:
        _REF_CACHE.popitem(last=False)


def _both_outputs(g1: KernelGraph, g2: KernelGraph, seed: int) -> tuple[list[list], list[list]]:
    """Both graphs' float64 outputs on the same draws. Where ``g1``'s are not cached yet, each draw is made once
    and run through both (at full shapes drawing costs as much as running: Mistral-7B GQA decode at batch 64,
    a first confirmation took 15.2 s of CPU while the second graph drew the same inputs again, 12.7 s since)."""
    key = (g1.content_hash(), int(seed))
    if key in _REF_CACHE or [t.dims for t in g1.inputs] != [t.dims for t in g2.inputs]:
        return _outputs(g1, seed, cache=True), _outputs(g2, seed, cache=False)
    o1, o2 = [], []
    for xs in _draws(g1, seed):
        o1.append(_run(g1, xs))
        o2.append(_run(g2, xs))
    _remember(key, o1)
    return o1, o2


def _close(a, b, rtol: float) -> tuple[bool, bool]:
    """(equal, had a finite value): same NaN/inf pattern, finite values equal to ``rtol``."""
    import torch

    if a.shape != b.shape:
        return False, True
    fa, fb = torch.isfinite(a), torch.isfinite(b)
    if not torch.equal(fa, fb):
        return False, True
    nf = ~fa
    if not torch.equal(torch.isnan(a[nf]), torch.isnan(b[nf])) or not torch.equal(
            torch.nan_to_num(a[nf], nan=0.0), torch.nan_to_num(b[nf], nan=0.0)):
        return False, True
    a, b = a[fa], b[fa]
    if a.numel() == 0:
        return True, False
    scale = float(torch.maximum(a.abs().max(), b.abs().max()))
    return bool(((a - b).abs() <= rtol * (a.abs() + b.abs() + scale)).all()), True


def float_equivalent(g1: KernelGraph, g2: KernelGraph, seed: int, *,
                     permutations: Sequence[tuple[int, ...]] | None = None, rtol: float = RTOL) -> FloatCheck:
    """Do ``g1`` and ``g2`` agree in float64 on two random inputs (``seed``), under one of
    ``permutations`` of the outputs (default: every one)?

    ``equal`` is None (inconclusive) when the graphs agree but some output had no finite
    value in any test (e.g. it overflowed both times).
    """
    n = len(g1.outputs)
    if len(g2.outputs) != n:
        return FloatCheck(False, reason=f"output count {n} vs {len(g2.outputs)}")
    with _one_thread():
        return _float_equivalent(g1, g2, seed, permutations, rtol, n)


def _float_equivalent(g1: KernelGraph, g2: KernelGraph, seed: int, permutations: Sequence[tuple[int, ...]] | None,
                      rtol: float, n: int) -> FloatCheck:
    """:func:`float_equivalent` on one torch thread: the outputs and their comparisons (at a full shape those
    are large tensors, which torch splits over a thread per core in every search worker)."""
    o1, o2 = _both_outputs(g1, g2, seed)
    eq: dict[tuple[int, int], tuple[bool, bool]] = {}

    def pair(i: int, j: int) -> tuple[bool, bool]:
        if (i, j) not in eq:
            res = [_close(a[i], b[j], rtol) for a, b in zip(o1, o2)]
            eq[i, j] = (all(r[0] for r in res), any(r[1] for r in res))
        return eq[i, j]

    perms = permutations if permutations is not None else itertools.permutations(range(n))
    for perm in perms:
        if all(pair(i, perm[i])[0] for i in range(n)):
            if not all(pair(i, perm[i])[1] for i in range(n)):
                return FloatCheck(None, tuple(perm), "an output is non-finite in every float64 test")
            return FloatCheck(True, tuple(perm))
    bad = next((i for i in range(n) if not pair(i, i)[0]), 0) if n else 0
    return FloatCheck(False, reason=f"float64 outputs differ on random inputs (e.g. output {bad}; rtol {rtol:g})")
