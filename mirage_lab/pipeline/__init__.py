"""The pipeline: the one place where the search meets the runtime.

``superoptimize(program)`` = search → autotune (lowering variants compiled in parallel,
checked, timed) → an :class:`OptimizedGraph` that runs exactly what was measured. The
notebook widget, the CLI demo and ``KernelGraph.superoptimize`` all come through here.

    >>> import mirage_lab as mi
    >>> best = mi.superoptimize(graph, tune_seconds=60)       # doctest: +SKIP
    >>> (O,) = best(inputs=[X, W])                            # doctest: +SKIP
    >>> best.report.best.row()                                # doctest: +SKIP
"""
from __future__ import annotations

import warnings
from typing import Any, Callable, Sequence

from ..errors import MirageLabError
from ..ir import hooks
from ..ir.kernel_graph import KernelGraph
from ..search import NoCandidateError, SearchResult, run_search, search
from ..search.settings_check import validate_search_settings
from .autotune import TuneFinished, TuneReport, TuneStarted, VariantDone, VariantResult, autotune, plan_variants
from .cost_model import Estimate, estimate
from .inputs import MeasuringInputs, measuring_inputs
from .result import OptimizedGraph
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
    """Search for μGraphs equivalent to ``graph``, tune their lowering, return the fastest.

    ``tune=None`` tunes where a GPU is present: the ``max_candidates`` candidates the cost
    model rates best get their lowering variants compiled (``compile_workers`` processes) and
    timed within ``tune_seconds``; the fastest correct one is returned, compiled. Without a GPU
    the cost model picks candidate and options. ``on_event`` receives the search's events
    and the tuner's (:class:`TuneStarted`, :class:`VariantDone`, :class:`TuneFinished`).
    ``search_seconds`` stops the search after that long and tunes what it found (attention
    spaces are too large to finish). Other keyword arguments go to the search (``workers``,
    ``griddims``, ``max_block_ops``...).

        >>> best = superoptimize(g, workers=2, tune=False)      # doctest: +SKIP
        >>> best.search_result.stats.candidates                 # doctest: +SKIP
        3
    """
    validate_search_settings(config, search_settings, graph)  # in the caller's cell, before anything runs
    if search_seconds is not None:
        on_event = _stop_after(search_seconds, search_settings, on_event)
    res = run_search(graph, config, on_event=on_event, **search_settings)
    if not res.candidates:
        res.best  # raises NoCandidateError with the search's numbers
    picks = shortlist(res.candidates, max_candidates) or list(range(min(max_candidates, len(res.candidates))))
    chosen = [res.candidates[i] for i in picks]
    if tune is None:
        tune = gpu_available()
    report = None
    if tune:
        report = autotune(graph, chosen, tune_seconds=tune_seconds, workers=compile_workers, inputs=inputs,
                          baselines=baselines, on_event=on_event)
        res.measurements = report.latency_rows(picks)  # numbered as the search found them
        if report.best is not None:
            v = report.best.variant
            kernel = None
            if report.timed:
                from ..runtime.kernel import compile as rt_compile

                kernel = rt_compile(v.graph, options=v.options)
            return OptimizedGraph(v.graph, v.options, program=graph, search_result=res, report=report, kernel=kernel)
        errors = "; ".join(f"{r.variant.tag}: {r.error}" for r in report.results[:3])
        warnings.warn(f"superoptimize: no lowering variant compiled and passed the check ({errors}); "
                      "returning the cost model's pick, unmeasured", RuntimeWarning, stacklevel=2)
    v, _ = plan_variants(chosen)[0]
    return OptimizedGraph(v.graph, v.options, program=graph, search_result=res, report=report)


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
           "select_fastest", "Selection", "Candidate", "with_options"]
