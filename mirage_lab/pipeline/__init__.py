"""The pipeline: the one place where the search meets the runtime.

``superoptimize(program)`` = search → autotune (lowering variants compiled in parallel,
checked, timed against the program's own torch lowerings) → an :class:`OptimizedGraph`
that runs exactly what was measured: the fastest μGraph, or the program itself when no
μGraph beat it. The
notebook widget, the CLI demo and ``KernelGraph.superoptimize`` all come through here.

    >>> import mirage_lab as mi
    >>> best = mi.superoptimize(graph, tune_seconds=60)       # doctest: +SKIP
    >>> (O,) = best(inputs=[X, W])                            # doctest: +SKIP
    >>> best.report.best.row()                                # doctest: +SKIP
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from ..errors import MirageLabError
from ..ir import hooks
from ..ir.kernel_graph import KernelGraph
from ..search import NoCandidateError, SearchResult, run_search, search
from .autotune import (ProgramDone, TuneFinished, TuneReport, TuneStarted, VariantDone, VariantResult, autotune,
                       plan_variants)
from .cost_model import Estimate, estimate
from .inputs import MeasuringInputs, measuring_inputs
from .contenders import CudaGraphTimer, ProgramResult, Timer
from .result import OptimizedGraph, result_from_report
from .selection import Candidate, Selection, select_fastest, with_options
from .variants import Variant, lowering_variants, with_block_dim


def gpu_available() -> bool:
    """Whether kernels can be timed here: a CUDA device torch can see, and not the simulator."""
    from ..runtime.kernel import simulator_active

    try:
        import torch

        return bool(torch.cuda.is_available()) and not simulator_active()
    except Exception:  # a broken driver is the same as no GPU here
        return False


def shortlist(candidates: Sequence[KernelGraph], n: int) -> list[int]:
    """Indices of the ``n`` candidates whose best lowering the cost model rates fastest."""
    best: list[tuple[float, int]] = []
    for i, g in enumerate(candidates):
        try:
            best.append((min(estimate(v.graph, v.options).us for v in lowering_variants(g, candidate=i)), i))
        except MirageLabError:
            continue
    return [i for _, i in sorted(best)[:n]]


def superoptimize(graph: KernelGraph, config: str | None = None, *, tune: bool | None = None,
                  tune_seconds: float = 60.0, max_candidates: int = 8, inputs: Sequence[Any] | None = None,
                  baselines: str | bool = "eager", compile_workers: int | None = None, search_seconds: float | None = None,
                  on_event: Callable[[Any], None] | None = None, **search_settings: Any) -> OptimizedGraph:
    """Search for μGraphs equivalent to ``graph``, race their lowerings against the program, return the fastest.

    ``tune=None`` tunes where a GPU is present: the ``max_candidates`` candidates the cost
    model rates best get their lowering variants compiled (``compile_workers`` processes) and
    timed, in CUDA graphs on the same inputs as the program's own lowerings (its torch ops,
    and ``torch.compile`` of them). Tuning stops when no variant left can win, or at
    ``tune_seconds``. The fastest correct contender is returned: a μGraph, or, when none beat
    it, the program itself (``best.is_program``, ``best.winner``; ``best.report.summary()``
    says so and by how much it is faster than torch eager). Without a GPU the cost model picks
    candidate and options. ``on_event`` receives the search's events and the tuner's
    (:class:`TuneStarted`, :class:`ProgramDone`, :class:`VariantDone`, :class:`TuneFinished`).
    ``search_seconds`` stops the search after that long and tunes what it found (attention
    spaces are too large to finish). Other keyword arguments go to the search (``workers``,
    ``griddims``, ``max_block_ops``...).

        >>> best = superoptimize(g, workers=2, tune=False)      # doctest: +SKIP
        >>> best.search_result.stats.candidates                 # doctest: +SKIP
        3
        >>> best = superoptimize(g)                             # doctest: +SKIP
        >>> best.winner, best.latency_us, best.speedup          # doctest: +SKIP
        ('μGraph', 16.5, 1.74)
    """
    if search_seconds is not None:
        on_event = _stop_after(search_seconds, search_settings, on_event)
    res = run_search(graph, config, on_event=on_event, **search_settings)
    if tune is None:
        tune = gpu_available()
    if not res.candidates and not tune:
        res.best  # raises NoCandidateError with the search's numbers (with a GPU, the program itself races alone)
    picks = shortlist(res.candidates, max_candidates) or list(range(min(max_candidates, len(res.candidates))))
    chosen = [res.candidates[i] for i in picks]
    if tune:
        report = autotune(graph, chosen, tune_seconds=tune_seconds, workers=compile_workers, inputs=inputs,
                          baselines=baselines, on_event=on_event)
        res.measurements = report.latency_rows(picks)  # numbered as the search found them
        return result_from_report(graph, res, report)
    v, _ = plan_variants(chosen)[0]
    return OptimizedGraph(v.graph, v.options, program=graph, search_result=res)


def _stop_after(seconds: float, settings: dict[str, Any], on_event: Callable[[Any], None] | None) -> Callable[[Any], None]:
    """An event callback that cancels the search once ``seconds`` have passed (events arrive ~4 per second)."""
    import time

    from ..search import CancelToken

    token = settings.setdefault("cancel", CancelToken())
    t0 = time.monotonic()

    def cb(ev: Any) -> None:
        if on_event is not None:
            on_event(ev)
        if time.monotonic() - t0 > seconds and not token.is_set():
            token.cancel()

    return cb


def _call(graph: KernelGraph, inputs: Sequence[Any] | None = None, /, **kw: Any) -> list[Any]:
    from ..runtime.kernel import run_graph

    return run_graph(graph, inputs, **kw)


hooks.install(call=_call, search=search, superoptimize=superoptimize)

__all__ = ["superoptimize", "autotune", "OptimizedGraph", "TuneReport", "VariantResult", "TuneStarted", "VariantDone",
           "TuneFinished", "Variant", "lowering_variants", "with_block_dim", "estimate", "Estimate", "plan_variants",
           "measuring_inputs", "MeasuringInputs", "gpu_available", "shortlist", "SearchResult", "NoCandidateError",
           "select_fastest", "Selection", "Candidate", "with_options", "ProgramResult", "ProgramDone", "Timer", "CudaGraphTimer",
           "result_from_report"]
