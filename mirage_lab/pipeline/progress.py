"""Progress bars for ``superoptimize``, drawn from the events the search and the tuner already send.

``tqdm.auto`` picks the face: a widget in Jupyter, a text bar (on stderr) in a terminal.
The search bar counts subtrees done out of the total, with the states visited and the
candidates found; the tuning bar counts variants timed out of those planned, with the best
so far and, at the end, the best against torch.

    >>> bars = ProgressBars()
    >>> bars.close()
"""
from __future__ import annotations

import math
from typing import Any, Callable


class ProgressBars:
    """An ``on_event`` callback that keeps one search bar and one tuning bar up to date."""

    def __init__(self, **tqdm_kw: Any) -> None:
        self.kw = tqdm_kw
        self.search: Any = None
        self.tune: Any = None
        self.best_us = math.inf
        self.best_tag = ""
        self.states = self.candidates = 0
        self.programs: dict[str, float] = {}   # the program's own lowerings timed so far (µs)

    def _bar(self, desc: str, total: int, unit: str) -> Any:
        from tqdm.auto import tqdm

        return tqdm(total=total, desc=desc, unit=unit, dynamic_ncols=True, **self.kw)

    def __call__(self, ev: Any) -> None:
        from ..search import CandidateFound, Finished, Progress
        from .autotune import ProgramDone, ProgramWaiting, TuneFinished, TuneStarted, VariantDone

        if isinstance(ev, (Progress, CandidateFound, Finished)):
            self._search(ev.stats, done=isinstance(ev, Finished))
        elif isinstance(ev, TuneStarted):
            self._close_search()
            self.tune = self._bar("tuning", ev.variants, "variant")
        elif isinstance(ev, VariantDone) and self.tune is not None:
            r = ev.result
            if r.ok and r.median_us < self.best_us:
                self.best_us, self.best_tag = r.median_us, r.variant.tag
            self.tune.set_postfix_str(self._best(), refresh=False)   # drawn by the update
            self.tune.update(max(0, ev.done - self.tune.n))
        elif isinstance(ev, ProgramWaiting) and self.tune is not None:
            # the variants are done; the tuner waits for the program's own lowering (it always races)
            self.tune.set_postfix_str(f"{self._best()}; waiting for {ev.lowering} of the program to build",
                                      refresh=True)
        elif isinstance(ev, ProgramDone) and self.tune is not None and ev.result.ok and ev.result.timings:
            self.programs[ev.result.lowering] = ev.result.median_us
            self.tune.set_postfix_str(self._best(), refresh=True)
        elif isinstance(ev, TuneFinished) and self.tune is not None:
            self.tune.set_postfix_str(self._final(ev.report), refresh=True)
            self.close()

    def _search(self, stats: Any, *, done: bool) -> None:
        if self.search is None:
            self.search = self._bar("search", max(1, stats.subtrees_total), "subtree")
        b = self.search
        if stats.subtrees_total and b.total != stats.subtrees_total:
            b.total = stats.subtrees_total
        # a candidate's event carries its worker's counters: the bar shows the largest seen
        self.states = max(self.states, stats.states)
        self.candidates = max(self.candidates, stats.candidates)
        waiting = 0 if done else getattr(stats, "confirming", 0)   # stopped, before its first candidate
        b.set_postfix_str(f"{self.states:,} states, {self.candidates} candidates"
                          + (f"; stopped, confirming {waiting} hit(s)" if waiting else ""), refresh=done or bool(waiting))
        b.update(max(0, stats.subtrees_done - b.n))   # draws the postfix too
        if done:
            self._close_search()

    def _best(self) -> str:
        best = f"best {self.best_us:.2f} µs ({self.best_tag})" if math.isfinite(self.best_us) else "no timing yet"
        progs = ", ".join(f"{k} {v:.2f} µs" for k, v in self.programs.items())
        return f"{best}; {progs}" if progs else best

    def _final(self, report: Any) -> str:
        if not report.timed:
            return f"checked, not timed ({report.device}); picked {report.best.variant.tag}" if report.best else \
                "no variant passed"
        if report.best is None:
            return "no variant passed"
        best = report.best.median_us
        torch_us = [t.median_us for k, t in report.baselines.items()
                    if k in ("torch_eager", "torch_cuda_graph") and hasattr(t, "median_us")]
        if not torch_us:
            return f"best {best:.2f} µs"
        ref = min(torch_us)
        return f"best {best:.2f} µs vs torch {ref:.2f} µs ({ref / best:.2f}x)"

    def _close_search(self) -> None:
        if self.search is not None:
            self.search.refresh()
            self.search.close()
            self.search = None

    def close(self) -> None:
        """Close whatever bar is open (an error or a cancel mid-run leaves no bar hanging)."""
        self._close_search()
        if self.tune is not None:
            self.tune.close()
            self.tune = None


def with_progress(on_event: Callable[[Any], None] | None, bars: ProgressBars | None) -> Callable[[Any], None] | None:
    """``on_event`` that also feeds ``bars`` (the caller's callback first, unchanged)."""
    if bars is None:
        return on_event

    def cb(ev: Any) -> None:
        if on_event is not None:
            on_event(ev)
        bars(ev)

    return cb


__all__ = ["ProgressBars", "with_progress"]
