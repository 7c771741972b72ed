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

The spell is also counted in work: the states visited since the last improvement must reach
``max(MIN_QUIET_STATES, QUIET_STATES_RATIO × the states visited before it)``. Seconds alone made
the rule eight times as hasty on two cores as on the 16-core host: on the 2-core box Gemma 2B's
GeGLU search stopped at 14 s (about 3,000 states) with a best estimate of 127 µs, where the
same search went on to 56 µs at 4,900 states and 48 µs by 16,000 (torch: 54; RESULTS.md,
2026-12-07 (b)). On the host 10,000 states take about a second, so there the seconds decide.

    >>> p = Plateau()
    >>> p.progress(1.0, states=10)
    >>> p.candidate(4.0, 30.0); p.candidate(6.0, 20.0); p.candidate(9.0, 19.9)   # 19.9: < 5 % better
    >>> p.should_stop(11.5)                             # quiet since 6.0 for max(5, 0.5 * 5) s, but little work
    False
    >>> p.progress(11.0, states=10_200); p.should_stop(10.0), p.should_stop(11.5)
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
MIN_QUIET_STATES = 10_000   # ... nor before this many states were visited since (about 1 s of the 16-core host)
QUIET_STATES_RATIO = 1.0    # ... nor before as many states again as the best took to appear


@dataclass
class Plateau:
    """The quiet-spell rule, fed the search's times (seconds, any origin) and candidates' estimates (µs)."""

    min_quiet_s: float = MIN_QUIET_S
    quiet_ratio: float = QUIET_RATIO
    significant: float = SIGNIFICANT
    min_quiet_states: int = MIN_QUIET_STATES
    quiet_states_ratio: float = QUIET_STATES_RATIO
    first_state_t: float | None = None
    best_us: float = math.inf
    improved_t: float | None = None
    states: int = 0               # visited so far (the last progress report)
    improved_states: int = 0      # visited when the best last improved
    history: list[tuple[float, float]] = field(default_factory=list)   # (t, new best) at each significant improvement
    stopped: str | None = None   # why the search was stopped early (set by the caller that stopped it)

    def progress(self, t: float, states: int) -> None:
        if self.first_state_t is None and states > 0:
            self.first_state_t = t
        self.states = max(self.states, states)

    def candidate(self, t: float, estimate_us: float) -> None:
        if self.first_state_t is None:
            self.first_state_t = t
        if math.isfinite(estimate_us) and estimate_us < self.best_us * (1 - self.significant):
            self.improved_t, self.improved_states = t, self.states
            self.history.append((t, estimate_us))
        if math.isfinite(estimate_us):
            self.best_us = min(self.best_us, estimate_us)

    def quiet_needed(self) -> float:
        if self.improved_t is None or self.first_state_t is None:
            return math.inf
        return max(self.min_quiet_s, self.quiet_ratio * (self.improved_t - self.first_state_t))

    def quiet_states_needed(self) -> float:
        return max(self.min_quiet_states, self.quiet_states_ratio * self.improved_states)

    def should_stop(self, t: float) -> bool:
        """A candidate is in and the best estimate has been quiet long enough, in seconds and in states."""
        return self.improved_t is not None and t - self.improved_t >= self.quiet_needed() and \
            self.states - self.improved_states >= self.quiet_states_needed()

    def reason(self, t: float) -> str:
        return (f"the best candidate's estimate ({self.best_us:.1f} µs) has not improved by {self.significant:.0%} "
                f"for {t - self.improved_t:.1f} s and {self.states - self.improved_states:,} states (needed "
                f"max({self.min_quiet_s:g} s, {self.quiet_ratio:g} × {self.improved_t - self.first_state_t:.1f} s) and "
                f"max({self.min_quiet_states:,}, {self.quiet_states_ratio:g} × {self.improved_states:,}) states)")


__all__ = ["Plateau", "MIN_QUIET_S", "QUIET_RATIO", "SIGNIFICANT", "MIN_QUIET_STATES", "QUIET_STATES_RATIO"]
