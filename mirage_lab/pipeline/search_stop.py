"""When a time-bounded search has its answer: the cost model's best candidate has stopped improving.

``superoptimize(search_seconds=S)`` used to search for all of ``S``. On the H100 host the
candidate that went on to win was usually found early: the README's RMSNorm+Linear search
found its winner (the best estimate, 16.3 µs) 8.9 s into a 23 s search that ran to the end;
LLaMA-3 residual+RMSNorm+QKV its best estimate at 14.5 s of 30, LoRA at 18.5 s of 30
(2026-11-28, ``benchmarks/RESULTS.md``). So ``S`` is a ceiling: the search also stops once no
candidate has improved the best estimate by more than ``SIGNIFICANT`` for a quiet spell of
``max(MIN_QUIET_S, QUIET_RATIO × the time that best took to appear)`` — the longer the
search needed to find it, the longer it waits for better. Times count from the first state
visited (workers start in seconds on a fresh host, more on a loaded one).

    >>> p = Plateau()
    >>> p.progress(1.0, states=10)
    >>> p.candidate(4.0, 30.0); p.candidate(6.0, 20.0); p.candidate(9.0, 19.9)   # 19.9: < 5 % better
    >>> p.should_stop(10.0), p.should_stop(11.5)        # quiet since 6.0: needs max(5, 0.5 * 5) s
    (False, True)
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

MIN_QUIET_S = 5.0      # never stop sooner than this after the last improvement
QUIET_RATIO = 0.5      # ... nor sooner than this fraction of the time the best took to appear
# An improvement smaller than this does not restart the quiet spell: the estimates rank lowerings with
# Spearman's rho ~0.85 (RESULTS.md), so a step of a few percent is noise; on the stored H100 timelines
# every step that led to a search's final best was >= 5.6 %.
SIGNIFICANT = 0.05


@dataclass
class Plateau:
    """The quiet-spell rule, fed the search's times (seconds, any origin) and candidates' estimates (µs)."""

    min_quiet_s: float = MIN_QUIET_S
    quiet_ratio: float = QUIET_RATIO
    significant: float = SIGNIFICANT
    first_state_t: float | None = None
    best_us: float = math.inf
    improved_t: float | None = None
    history: list[tuple[float, float]] = field(default_factory=list)   # (t, new best) at each significant improvement
    stopped: str | None = None   # why the search was stopped early (set by the caller that stopped it)

    def progress(self, t: float, states: int) -> None:
        if self.first_state_t is None and states > 0:
            self.first_state_t = t

    def candidate(self, t: float, estimate_us: float) -> None:
        if self.first_state_t is None:
            self.first_state_t = t
        if math.isfinite(estimate_us) and estimate_us < self.best_us * (1 - self.significant):
            self.improved_t = t
            self.history.append((t, estimate_us))
        if math.isfinite(estimate_us):
            self.best_us = min(self.best_us, estimate_us)

    def quiet_needed(self) -> float:
        if self.improved_t is None or self.first_state_t is None:
            return math.inf
        return max(self.min_quiet_s, self.quiet_ratio * (self.improved_t - self.first_state_t))

    def should_stop(self, t: float) -> bool:
        """A candidate is in and the best estimate has been quiet long enough."""
        return self.improved_t is not None and t - self.improved_t >= self.quiet_needed()

    def reason(self, t: float) -> str:
        return (f"the best candidate's estimate ({self.best_us:.1f} µs) has not improved by {self.significant:.0%} "
                f"for {t - self.improved_t:.1f} s (needed max({self.min_quiet_s:g} s, {self.quiet_ratio:g} × "
                f"{self.improved_t - self.first_state_t:.1f} s))")


__all__ = ["Plateau", "MIN_QUIET_S", "QUIET_RATIO", "SIGNIFICANT"]
