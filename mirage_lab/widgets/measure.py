"""GPU measurements for the explorer: each candidate tuned and timed, reported as it improves, then baselines.

Goes through the pipeline's autotuner (:func:`mirage_lab.pipeline.autotune`), the same one
``superoptimize`` and the CLI use: lowering variants compiled in parallel, checked against
the float64 reference on inputs the program computes finitely, timed with CUDA-graph
replay on L2-cold input copies. Results arrive as the pipeline's typed records
(``VariantResult``, ``LatencyRow``). Needs a CUDA GPU; :func:`gpu_available` says whether there is one.

    >>> gpu_available() in (True, False)
    True
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from ..ir.kernel_graph import KernelGraph
from ..pipeline import gpu_available  # noqa: F401  (re-exported: the explorer asks it)
from ..runtime.latency import LatencyRow, current_device


def measure(program: KernelGraph, candidates: Sequence[tuple[int, KernelGraph]], *,
            on_candidate: Callable[[int, Any, LatencyRow | None], None],
            on_baselines: Callable[[list[LatencyRow]], None], inputs: Sequence[Any] | None = None,
            baselines: bool = True, compile_mode: str | None = "default", repeats: int = 200,
            tune_seconds: float = 60.0, should_stop: Callable[[], bool] = lambda: False) -> None:
    """Tune every ``(index, graph)`` through the pipeline, reporting results as they arrive.

    ``on_candidate(index, result, row)``: the pipeline's ``VariantResult`` of that candidate's
    fastest lowering so far (or its first failure) and its ``LatencyRow`` (``None`` when it
    failed). ``on_baselines(rows)``: the torch baselines' rows, once, at the end. The same
    autotuner as ``superoptimize``: same inputs policy, same variants, same timing.
    """
    from ..pipeline import VariantDone, autotune

    if should_stop() or not candidates:
        return
    index = [i for i, _ in candidates]
    best: dict[int, Any] = {}
    device = current_device()

    def on_event(ev: Any) -> None:
        if not isinstance(ev, VariantDone):
            return
        r = ev.result
        ci = index[r.variant.candidate]
        cur = best.get(ci)
        better = r.ok and r.timings and (cur is None or not cur.ok or r.median_us < cur.median_us)
        if cur is None or better:
            best[ci] = r
            on_candidate(ci, r, r.latency_row(candidate=ci, device=device))

    which = ("all" if compile_mode else "eager") if baselines else False
    rep = autotune(program, [g for _, g in candidates], inputs=inputs, baselines=which, repeats=min(repeats, 100),
                   final_repeats=repeats, tune_seconds=tune_seconds, on_event=on_event)
    # the finalists were timed again with more repeats after their VariantDone: report the final numbers
    final: dict[int, Any] = {}
    for r in rep.results:
        ci = index[r.variant.candidate]
        if r.ok and r.timings and (ci not in final or r.median_us < final[ci].median_us):
            final[ci] = r
    for ci, r in final.items():
        on_candidate(ci, r, r.latency_row(candidate=ci, device=device))
    rows = rep.baseline_rows()
    if rows:
        on_baselines(rows)
