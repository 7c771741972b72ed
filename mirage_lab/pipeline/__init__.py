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

import math
from typing import Any, Callable, Sequence

from ..errors import MirageLabError
from ..ir import hooks
from ..ir.kernel_graph import KernelGraph
from ..search import NoCandidateError, SearchResult, run_search, search
from ..search.settings_check import validate_search_settings
from .autotune import (ProgramDone, ProgramWaiting, TuneFinished, TuneReport, TuneStarted, VariantDone, VariantResult,
                       autotune, plan_variants)
from .cache import CacheHit, CacheWarning, Lookup
from .compile_pool import CompilePool, start_early
from .search_stop import Plateau
from .contenders import CudaGraphTimer, ProgramResult, Timer
from .cost_model import Estimate, estimate
from .inputs import MeasuringInputs, measuring_inputs
from .library import LIBRARIES, LibraryLowering, library_lowerings
from .progress import ProgressBars, with_progress
from .result import OptimizedGraph, result_from_report
from .selection import Candidate, Selection, select_fastest, with_options
from .variants import Variant, lowering_variants, with_block_dim


def gpu_available() -> bool:
    """Whether kernels can be timed here: a CUDA device torch can see, and not the simulator.

    Asked before the search forks its workers, so it must not initialise CUDA in this process
    (``torch.cuda.is_available()`` does: a forked worker then cannot use the GPU for its
    fingerprints). ``torch.cuda.device_count()`` asks NVML first, which leaves CUDA alone.
    """
    from ..runtime.paths import simulator_active

    try:
        import torch

        return torch.cuda.device_count() > 0 and not simulator_active()
    except Exception:  # a broken driver is the same as no GPU here
        return False


SHORTLIST_BAND = 2.0   # a candidate whose best estimate is past this factor of the best one is not tuned


def shortlist(candidates: Sequence[KernelGraph], n: int, band: float = SHORTLIST_BAND) -> list[int]:
    """Indices of up to ``n`` candidates to tune: the cost model's best of each grid, grids taken in turn.

    Candidates are grouped by their customized ops' grids (and kernel ops); the groups are taken
    in the order of their best estimate, one candidate each, round after round, until ``n``. The
    estimates rank lowerings within a program only roughly (Spearman's rho against H100
    measurements 0.76 held out: RESULTS.md, "Cost model ranking, round 2"), so every grid gets a
    turn rather than eight variations of one narrow grid crowding out a wide one.
    Gross differences the estimates do tell apart (a grid that fills a quarter of the SMs, a block
    that re-reads its operand many times): on the H100 records every candidate rated past ``band``
    (2×) times the best measured 5–18× slower than the winner, and every winning candidate was the
    best rated. Those are left out: their compiles (20–40 s each) ate the tuning budget before the
    plausible ones were measured.

        >>> shortlist([], 8)
        []
    """
    scored: list[tuple[float, int]] = []
    for i, g in enumerate(candidates):
        try:
            scored.append((min(estimate(v.graph, v.options).us for v in lowering_variants(g, candidate=i)), i))
        except MirageLabError:
            continue
    groups: dict[tuple, list[int]] = {}
    best = min((us for us, _ in scored), default=0.0)
    for us, i in sorted(scored):
        if us > band * best:
            break
        groups.setdefault(_tiling_key(candidates[i]), []).append(i)
    picks: list[int] = []
    queues = list(groups.values())   # in the order of each group's best estimate
    for k in range(max((len(q) for q in queues), default=0)):
        picks.extend(q[k] for q in queues if k < len(q))
    return picks[:n]


def _tiling_key(g: KernelGraph) -> tuple:
    """The grids of ``g``'s customized ops, and its other kernel ops, in order (how it splits the work)."""
    return tuple(tuple(op.block_graph.grid_dim) if getattr(op, "block_graph", None) is not None else op.op_type
                 for op in g.ops if op.op_type != "input")


def superoptimize(graph: KernelGraph, config: str | None = None, *, tune: bool | None = None,
                  tune_seconds: float = 60.0, max_candidates: int = 8, inputs: Sequence[Any] | None = None,
                  baselines: str | bool = "eager", compile_workers: int | None = None, search_seconds: float | None = None,
                  on_event: Callable[[Any], None] | None = None, cache: bool = True, progress: bool = True,
                  cluster: Any = None, stop_when_quiet: bool = True, **search_settings: Any) -> OptimizedGraph:
    """Search for μGraphs equivalent to ``graph``, race their lowerings against the program, return the fastest.

    ``tune=None`` tunes where a GPU is present: the ``max_candidates`` candidates the cost
    model rates best get their lowering variants compiled (``compile_workers`` processes) and
    timed, in CUDA graphs on the same inputs as the program's own lowerings (its torch ops,
    and ``torch.compile`` of them). Tuning stops when no variant left can win, or at
    ``tune_seconds``. The fastest correct contender is returned: a μGraph, or, when none beat
    it, the program itself (``best.is_program``, ``best.winner``; ``best.report.summary()``
    says so and by how much it is faster than torch eager). Without a GPU the cost model picks
    candidate and options. ``on_event`` receives the search's events and the tuner's
    (:class:`TuneStarted`, :class:`ProgramDone`, :class:`ProgramWaiting`, :class:`VariantDone`,
    :class:`TuneFinished`).
    The search stops once the cost model's best candidate has not improved by 5 % for max(5 s, half
    the time it took to appear) (:mod:`.search_stop`; ``stop_when_quiet=False`` searches to the end:
    the residual RMSNorm + QKV of LLaMA-3 8B took over 4 minutes on the H200 host that way, and on the
    timelines measured the best candidate came in the first 10-40 s). ``search_seconds`` adds a
    ceiling (attention spaces are too large to finish). Other keyword arguments go to the search
    (``workers``, ``griddims``, ``max_block_ops``...).

    ``cache``: reuse and store the search and the tuning in the persistent cache
    (:mod:`mirage_lab.pipeline.cache`, ``mi.cache``); a repeat call returns the stored winner,
    and on another GPU only the tuning runs again. ``progress``: draw progress bars
    (``tqdm.auto``: a widget in Jupyter, text in a terminal) and say where a cached result came from.
    ``cluster``: a Dask ``Client`` (or scheduler address) whose ``GPU`` workers tune the candidates'
    variants in small units (:mod:`.distributed`, docs/scaling.md); this process then needs no GPU.

        >>> best = superoptimize(g, workers=2, tune=False)      # doctest: +SKIP
        >>> best.search_result.stats.candidates                 # doctest: +SKIP
        3
        >>> best = superoptimize(g)                             # doctest: +SKIP
        >>> best.winner, best.latency_us, best.speedup          # doctest: +SKIP
        ('μGraph', 16.5, 1.74)
    """
    validate_search_settings(config, search_settings, graph)  # in the caller's cell, before anything runs
    bars = ProgressBars() if progress else None
    on_event = with_progress(on_event, bars)
    early = None
    try:
        lookup = Lookup(graph, config, search_settings, search_seconds=search_seconds, enabled=cache,
                        stop_when_quiet=stop_when_quiet,
                        say=print if progress else None, on_event=on_event)
        res = lookup.search()
        if res is None:
            plateau = Plateau() if stop_when_quiet else None
            limited = search_seconds is not None or plateau is not None
            run_on = _stop_after(math.inf if search_seconds is None else search_seconds, search_settings, on_event,
                                 plateau) if limited else on_event
            if tune is not False and cluster is None:
                # compile processes warm up, and compile the candidates found, while the search runs
                early = start_early(compile_workers, max_candidates)
                if early is not None:
                    early.prewarm_program(graph)   # a child process: started before the search forks
                    early.preload_compiler(graph)  # torch.compile's imports, overlapping the search's set-up
                    run_on = _once_workers_run(early.on_candidates(run_on), lambda: early.warm_program(graph))
            res = run_search(graph, config, on_event=run_on, **search_settings)
            if plateau is not None and plateau.stopped is not None:
                res.stop_reason = plateau.stopped
            lookup.save_search(res, quiet_stopped=plateau is not None and plateau.stopped is not None)
        if tune is None:
            tune = gpu_available() or cluster is not None
        if not res.candidates and not tune:
            res.best  # raises NoCandidateError with the search's numbers (when tuning, the program races alone)
        device = None
        if cluster is not None and tune:
            from .distributed import client_for, cluster_device

            cluster = client_for(cluster)
            device = cluster_device(cluster)  # the workers' GPU keys the tuning, not this machine's
        best = lookup.tuned(res, tune=tune, max_candidates=max_candidates, tune_seconds=tune_seconds,
                            baselines=baselines, inputs=inputs, device=device)
        if best is None:
            best, picks = _tune(graph, res, tune=tune, tune_seconds=tune_seconds, max_candidates=max_candidates,
                                inputs=inputs, baselines=baselines, compile_workers=compile_workers, on_event=on_event,
                                cluster=cluster, pool=early)
            lookup.save_tuned(best, picks)
        return best
    finally:
        if early is not None:
            early.close()
        if bars is not None:
            bars.close()


def _tune(graph: KernelGraph, res: SearchResult, *, tune: bool, tune_seconds: float, max_candidates: int,
          inputs: Sequence[Any] | None, baselines: str | bool, compile_workers: int | None,
          on_event: Callable[[Any], None] | None, cluster: Any = None,
          pool: Any = None) -> tuple[OptimizedGraph, list[int]]:
    """The shortlist tuned (or, with ``tune=False``, the cost model's pick); the winner and the shortlist."""
    picks = shortlist(res.candidates, max_candidates) or list(range(min(max_candidates, len(res.candidates))))
    chosen = [res.candidates[i] for i in picks]
    if tune:
        if cluster is not None:
            from .distributed import autotune_on_cluster

            report = autotune_on_cluster(graph, chosen, cluster, tune_seconds=tune_seconds, workers=compile_workers,
                                         inputs=inputs, baselines=baselines, on_event=on_event)
        else:
            report = autotune(graph, chosen, tune_seconds=tune_seconds, workers=compile_workers, inputs=inputs,
                              baselines=baselines, on_event=on_event, pool=pool)
        res.measurements = report.latency_rows(picks)  # numbered as the search found them
        return result_from_report(graph, res, report), picks
    v, _ = plan_variants(chosen)[0]
    return OptimizedGraph(v.graph, v.options, program=graph, search_result=res), picks


def _once_workers_run(on_event: Callable[[Any], None], start: Callable[[], None]) -> Callable[[Any], None]:
    """``on_event`` that calls ``start`` at the search's first progress event: its workers exist by then.

    ``start`` (torch.compile of the program, in a thread) puts CUDA and a busy thread into this
    process. Started before the search, it made the search spawn its workers instead of forking
    them (each then imports torch and numba and recomputes the target's fingerprints) or, in a
    race, fork while that thread held locks; the README example's search then visited no state in
    its 30 s on a fresh H100 host (2026-11-28). The first ``Progress`` comes after the last fork.
    """
    from ..search import Progress

    started = False

    def cb(ev: Any) -> None:
        nonlocal started
        on_event(ev)
        if not started and isinstance(ev, Progress):
            started = True
            start()

    return cb


def _stop_after(seconds: float, settings: dict[str, Any], on_event: Callable[[Any], None] | None,
                plateau: Plateau | None = None) -> Callable[[Any], None]:
    """An event callback that cancels the search once ``seconds`` have passed (events arrive ~4 per second),
    or sooner once ``plateau`` says the cost model's best candidate has stopped improving (:mod:`.search_stop`)."""
    import time

    from ..search import CancelToken, CandidateFound, Progress

    token = settings.setdefault("cancel", CancelToken())
    t0 = time.monotonic()

    def cb(ev: Any) -> None:
        if on_event is not None:
            on_event(ev)
        now = time.monotonic() - t0
        if plateau is not None:
            if isinstance(ev, Progress):
                plateau.progress(now, ev.stats.states)
            elif isinstance(ev, CandidateFound):
                plateau.candidate(now, _best_estimate(ev.graph, ev.index))
            if not token.is_set() and plateau.should_stop(now):
                plateau.stopped = plateau.reason(now)
                token.cancel(finish_confirmations=True)   # a budget: hits being confirmed are waited for
        if now > seconds and not token.is_set():
            token.cancel(finish_confirmations=True)

    return cb


def _best_estimate(g: KernelGraph, index: int) -> float:
    """The cost model's best lowering of a candidate, µs (inf where it cannot lower it)."""
    try:
        return min(estimate(v.graph, v.options).us for v in lowering_variants(g, candidate=index))
    except (MirageLabError, ValueError):
        return float("inf")


def _call(graph: KernelGraph, inputs: Sequence[Any] | None = None, /, **kw: Any) -> list[Any]:
    from ..runtime.kernel import run_graph

    return run_graph(graph, inputs, **kw)


hooks.install(call=_call, search=search, superoptimize=superoptimize)

__all__ = ["superoptimize", "autotune", "OptimizedGraph", "TuneReport", "VariantResult", "TuneStarted", "VariantDone",
           "TuneFinished", "Variant", "lowering_variants", "with_block_dim", "estimate", "Estimate", "plan_variants",
           "measuring_inputs", "MeasuringInputs", "gpu_available", "shortlist", "SearchResult", "NoCandidateError",
           "select_fastest", "Selection", "Candidate", "with_options", "ProgramResult", "ProgramDone", "ProgramWaiting", "Timer", "CudaGraphTimer",
           "result_from_report", "CacheHit", "CacheWarning", "ProgressBars", "CompilePool", "LIBRARIES",
           "LibraryLowering", "library_lowerings"]
