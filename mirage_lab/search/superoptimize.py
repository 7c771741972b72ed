"""``superoptimize``: run the search to the end and return the best candidate.

    >>> best = mi.superoptimize(g)              # doctest: +SKIP
    >>> best.search_result.stats.candidates     # doctest: +SKIP
    3
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from ..errors import MirageLabError
from ..ir.kernel_graph import KernelGraph
from .cost import StaticCost, static_cost
from .events import CandidateFound, Finished, SearchError, SearchStats
from .runner import search


class NoCandidateError(MirageLabError, RuntimeError):
    """The search ended without finding a μGraph equivalent to the program."""


@dataclass
class SearchResult:
    """Everything a finished search produced: candidates (in the order found), costs, stats."""

    program: KernelGraph
    candidates: list[KernelGraph]
    costs: list[StaticCost]
    stats: SearchStats
    cancelled: bool = False
    errors: list[str] = field(default_factory=list)
    measurements: dict[str, Any] = field(default_factory=dict)

    def ranked(self) -> list[KernelGraph]:
        """Candidates by static cost: fewer kernels, then fewer bytes moved."""
        order = sorted(range(len(self.candidates)), key=lambda i: (self.costs[i], i))
        return [self.candidates[i] for i in order]

    @property
    def best(self) -> KernelGraph:
        if not self.candidates:
            raise NoCandidateError(
                "the search found no equivalent μGraph; widen it (config=..., max_block_ops=..., griddims=...) "
                f"— it visited {self.stats.states} states"
            )
        return self.ranked()[0]


def run_search(graph: KernelGraph, config: str | None = None, *, on_event: Callable[[Any], None] | None = None,
               **kw: Any) -> SearchResult:
    """Run :func:`search` to the end, collecting its events into a :class:`SearchResult`."""
    cands: list[KernelGraph] = []
    errors: list[str] = []
    final: Finished | None = None
    for ev in search(graph, config, **kw):
        if on_event is not None:
            on_event(ev)
        if isinstance(ev, CandidateFound):
            cands.append(ev.graph)
        elif isinstance(ev, SearchError):
            errors.append(ev.message)
        elif isinstance(ev, Finished):
            final = ev
    assert final is not None
    return SearchResult(graph, cands, [static_cost(c) for c in cands], final.stats, final.cancelled, errors)


def measure_candidates(res: SearchResult, *, max_measured: int = 8, inputs: Any = None, repeats: int = 200,
                       baselines: bool = True, mma: bool = True) -> Any:
    """Compile, check and time the best ``max_measured`` candidates (by static cost) on the GPU.

    Fills ``res.measurements`` with each candidate's timings, the torch baselines (eager,
    CUDA graph, torch.compile) and the memory floor, measured the same way in this process,
    and returns the runtime's ``Selection`` (``.best`` is the fastest correct candidate).
    """
    import torch

    from ..codegen import DEFAULT_OPTIONS
    from ..runtime.profile import floor_us, profile_baselines, select_fastest

    program = res.program
    if inputs is None:
        inputs = [torch.randn(t.dims, dtype=t.dtype.torch, device="cuda") for t in program.inputs]
    ranked = res.ranked()[:max_measured]
    options = [DEFAULT_OPTIONS] + ([DEFAULT_OPTIONS.__class__(mma=True)] if mma else [])
    sel = select_fastest(ranked, inputs, repeats=repeats, options=options)
    index = {id(g): res.candidates.index(g) for g in ranked}
    res.measurements = {
        "floor_us": floor_us(program),
        "candidates": [{"candidate": index[id(c.graph)], "options": c.options.tag(), "rel_err": c.rel_err,
                        "error": c.error, **{k: t.as_dict() for k, t in c.timings.items()}}
                       for c in sel.candidates],
        "baselines": {k: t.as_dict() for k, t in profile_baselines(program, inputs, repeats=repeats).items()}
        if baselines else {},
    }
    return sel


def superoptimize(graph: KernelGraph, config: str | None = None, *, measure: bool | None = None,
                  max_measured: int = 8, **kw: Any) -> KernelGraph:
    """Search and return the best μGraph.

    With a CUDA GPU (``measure=None`` means "if one is present"), the best ``max_measured``
    candidates by static cost are compiled, checked against the reference and timed, and the
    fastest wins; otherwise the static cost decides (fewer kernels, then fewer bytes). The
    returned graph carries the whole :class:`SearchResult` as ``.search_result`` (its
    ``measurements`` hold the timings and baselines) and, when measured, ``.latency_us``.

        >>> best = superoptimize(g, workers=2)             # doctest: +SKIP
    """
    res = run_search(graph, config, **kw)
    best = res.best
    if measure is None:
        try:
            import torch

            measure = torch.cuda.is_available()
        except Exception:  # pragma: no cover - torch is a dependency
            measure = False
    if measure:
        sel = measure_candidates(res, max_measured=max_measured)
        if sel.best is not None:
            best = sel.best.graph
            best.latency_us = sel.best.median_us  # type: ignore[attr-defined]
            best.codegen_options = sel.best.options  # type: ignore[attr-defined]
    best.search_result = res  # type: ignore[attr-defined]
    return best
