"""Typed events that a search streams to its caller (a loop, a widget, a log).

    >>> for ev in g.search():                     # doctest: +SKIP
    ...     if isinstance(ev, CandidateFound):
    ...         print(ev.index, ev.graph.content_hash())
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class SearchStats:
    """Counters of one search; they only grow while it runs."""

    states: int = 0              # partial μGraphs visited (kernel- and block-level)
    pruned_expr: int = 0         # new tensors refused by the abstract-expression oracle
    pruned_dedup: int = 0        # states dropped as duplicates (same fingerprints and shapes)
    pruned_other: int = 0        # refused by shape, smem or limit checks
    fingerprint_tests: int = 0   # kernel-level states checked against the target's fingerprints
    reused: int = 0              # kernel states whose continuations were replayed from memory
    candidates: int = 0
    subtrees_done: int = 0
    subtrees_total: int = 0
    elapsed: float = 0.0
    confirming: int = 0          # hits a stopped search, with no candidate yet, waits to see confirmed

    def add(self, other: "SearchStats") -> None:
        for k in ("states", "pruned_expr", "pruned_dedup", "pruned_other", "fingerprint_tests", "reused",
                  "subtrees_done"):
            setattr(self, k, getattr(self, k) + getattr(other, k))

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class Progress:
    stats: SearchStats


@dataclass
class CandidateFound:
    index: int                   # 0, 1, 2 ... in the order found
    graph: Any                   # mirage_lab.KernelGraph
    stats: SearchStats
    info: dict[str, Any] = field(default_factory=dict)   # static cost etc.


@dataclass
class Finished:
    stats: SearchStats
    candidates: list[Any]        # KernelGraphs, in the order found
    cancelled: bool = False
    resumed_subtrees: int = 0
    fingerprint_backends: list[str] = field(default_factory=list)   # where workers computed fingerprints
    worker_errors: int = 0       # chunks of subtrees lost to a crashed worker (each also sent a SearchError)

    @property
    def complete(self) -> bool:
        """The whole space was searched: not cancelled, no subtree lost."""
        return not self.cancelled and not self.worker_errors and self.stats.subtrees_done >= self.stats.subtrees_total


@dataclass
class SearchError:
    message: str
    stats: SearchStats
