"""``run_search``: run the search to the end and collect its candidates into a :class:`SearchResult`.

(``superoptimize``, which also tunes and compiles, is :mod:`mirage_lab.pipeline`'s.)

    >>> res = run_search(g, workers=2)          # doctest: +SKIP
    >>> res.stats.candidates                    # doctest: +SKIP
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
    """Everything a finished search produced: candidates (in the order found), costs, stats.

    ``measurements``: ``LatencyRow``s (``mirage_lab.runtime.latency``) where the candidates were
    timed, ``candidate`` being the index in :attr:`candidates`; what ``latency_figure`` draws.
    """

    program: KernelGraph
    candidates: list[KernelGraph]
    costs: list[StaticCost]
    stats: SearchStats
    cancelled: bool = False
    errors: list[str] = field(default_factory=list)
    # mirage_lab.runtime.LatencyRow records, when something timed the candidates (the pipeline,
    # the explorer); the search itself times nothing, and this layer cannot name the type
    measurements: list[Any] = field(default_factory=list)
    stop_reason: str | None = None   # why a time-bounded search stopped before its ceiling (superoptimize)

    def ranked(self) -> list[KernelGraph]:
        """Candidates by static cost: fewer kernels, then fewer bytes moved."""
        order = sorted(range(len(self.candidates)), key=lambda i: (self.costs[i], i))
        return [self.candidates[i] for i in order]

    @property
    def best(self) -> KernelGraph:
        if not self.candidates:
            msg = (f"the search found no equivalent μGraph; widen it (config=..., max_block_ops=..., griddims=...) "
                   f"— it visited {self.stats.states} states")
            lost = [e for e in self.errors if e.startswith("a search worker failed")]
            if lost:
                # a worker the system killed (out of memory, most often) takes its chunk of subtrees and, the pool
                # being broken, every chunk still queued: the space was not searched, whatever the message above says
                msg += (f", and {len(lost)} chunks of its subtrees were lost to failed search workers "
                        f"({lost[0][len('a search worker failed: '):][:160]})")
                if any("BrokenProcessPool" in e or "terminated abruptly" in e for e in lost):
                    msg += ("; a worker process killed from outside is most often out of memory: "
                            "try fewer workers (workers=2) or a smaller program")
            raise NoCandidateError(msg)
        return self.ranked()[0]


def run_search(graph: KernelGraph, config: str | None = None, *, on_event: Callable[[Any], None] | None = None,
               **kw: Any) -> SearchResult:
    """Run :func:`search` to the end, collecting its events into a :class:`SearchResult`.

    Bad settings raise a ``SearchConfigError`` before the search starts."""
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
