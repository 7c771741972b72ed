"""The autotuner: lowering variants of the candidates, compiled in parallel, measured, the fastest kept.

1. Every candidate's lowering variants (:mod:`.variants`) are ranked by the cost model
   (:mod:`.cost_model`): first each candidate's most promising variant, then the rest, all
   by estimated latency, so a short budget still sees every candidate once.
2. A pool of fresh processes compiles them in that order (numba compiles one large kernel
   in seconds to tens of seconds, single-threaded) and launches each once, filling numba's
   disk cache; a variant that fails to compile or launch is reported there and skipped.
3. As each compile finishes, this process loads it, checks it against the float64
   reference on the measuring inputs (:mod:`.inputs`; NaN-poisoned outputs) and times it
   the way the baselines are timed (CUDA-graph replay, CUDA events, inputs rotated so
   weights come from HBM). When ``tune_seconds`` run out, compiles still pending are dropped.
4. The fastest few are timed again with more repeats; the fastest correct variant wins.

Under the CUDA simulator (no timing possible) the variants are compiled and checked in
this process in cost-model order and the first correct one wins.

    >>> report = autotune(program, [candidate], tune_seconds=30)    # doctest: +SKIP
    >>> report.best.variant.options, report.best.median_us          # doctest: +SKIP
"""
from __future__ import annotations

import multiprocessing as mp
import os
import queue
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from ..errors import MirageLabError
from ..ir.kernel_graph import KernelGraph
from ..runtime.latency import CANDIDATE, LatencyRow, baseline_rows
from .cost_model import Estimate, estimate
from .inputs import MeasuringInputs, measuring_inputs
from .variants import Variant, lowering_variants

TOLERANCE = 2e-3  # relative error against float64 that a half-precision candidate must meet


# ----------------------------------------------------------------------------- records and events
@dataclass
class VariantResult:
    """What happened to one variant: its estimate, compile time, check and timings (µs)."""

    variant: Variant
    estimate: Estimate
    compile_s: float | None = None
    rel_err: float | None = None
    error: str | None = None
    timings: dict[str, Any] = field(default_factory=dict)   # mode -> runtime.profile.Timing

    @property
    def median_us(self) -> float:
        t = self.timings.get("cuda_graph")
        return t.median_us if t is not None else float("inf")

    @property
    def ok(self) -> bool:
        return self.error is None and self.rel_err is not None

    def latency_row(self, label: str | None = None, *, candidate: int | None = None,
                    device: str = "") -> LatencyRow | None:
        """This variant's CUDA-graph timing as a plot row (``None`` if it failed or was not timed).

        ``candidate``: the candidate's number in the caller's list (default: its position among
        the tuned candidates); ``label`` defaults to ``"candidate {candidate}"``.
        """
        t = self.timings.get("cuda_graph")
        if not self.ok or t is None:
            return None
        n = self.variant.candidate if candidate is None else candidate
        v = self.variant
        return LatencyRow.from_timing(label or f"candidate {n}", t, kind=CANDIDATE, device=device,
                                      options=f"t{v.threads}/{v.options.tag()}", candidate=n)

    def row(self) -> dict[str, Any]:
        """One flat record (JSON-ready) for tables."""
        v = self.variant
        return {"candidate": v.candidate, "threads": v.threads, "options": v.options.tag(),
                "estimate_us": round(self.estimate.us, 2),
                "median_us": None if self.median_us == float("inf") else round(self.median_us, 2),
                "rel_err": self.rel_err, "compile_s": None if self.compile_s is None else round(self.compile_s, 1),
                "error": self.error}


@dataclass
class TuneReport:
    """Every variant tried, the winner, the baselines, and how the measuring was done."""

    results: list[VariantResult]
    best: VariantResult | None
    baselines: dict[str, Any]
    floor_us: float
    input_policy: str
    seconds: float
    budget_s: float
    untried: int
    device: str
    timed: bool   # False under the CUDA simulator: variants were checked, not timed

    def rows(self) -> list[dict[str, Any]]:
        return [r.row() for r in self.results]

    def candidate_rows(self, numbers: Sequence[int] | None = None, *, every_variant: bool = False) -> list[LatencyRow]:
        """Plot rows for the candidates: each one's fastest timed variant, fastest first.

        ``numbers[i]`` is the number the i-th tuned candidate has in the caller's list (e.g.
        the search's order, when a shortlist was tuned); ``every_variant`` gives one row per
        timed variant instead, labelled ``"candidate {n} [t256/fma]"``.
        """
        def number(r: VariantResult) -> int:
            return r.variant.candidate if numbers is None else numbers[r.variant.candidate]

        timed = sorted((r for r in self.results if r.latency_row() is not None), key=lambda r: r.median_us)
        if every_variant:
            return [r.latency_row(f"candidate {number(r)} [t{r.variant.threads}/{r.variant.options.tag()}]",
                                  candidate=number(r), device=self.device) for r in timed]  # type: ignore[misc]
        seen: set[int] = set()
        out = []
        for r in timed:
            if r.variant.candidate not in seen:
                seen.add(r.variant.candidate)
                out.append(r.latency_row(candidate=number(r), device=self.device))
        return out  # type: ignore[return-value]

    def baseline_rows(self) -> list[LatencyRow]:
        """Plot rows for the torch baselines (a baseline that failed to run has none)."""
        from ..runtime.profile import Timing

        return baseline_rows({k: v for k, v in self.baselines.items() if isinstance(v, Timing)}, device=self.device)

    def latency_rows(self, numbers: Sequence[int] | None = None, *, every_variant: bool = False) -> list[LatencyRow]:
        """:meth:`candidate_rows` then :meth:`baseline_rows`: what ``latency_figure`` draws.

            >>> rep = autotune(program, candidates)                             # doctest: +SKIP
            >>> latency_figure(rep.latency_rows(), floor_us=rep.floor_us)       # doctest: +SKIP
        """
        return self.candidate_rows(numbers, every_variant=every_variant) + self.baseline_rows()


@dataclass
class TuneStarted:
    variants: int
    candidates: int
    budget_s: float
    workers: int
    input_policy: str


@dataclass
class VariantDone:
    """One variant compiled (or failed), and, where it compiled, checked and timed."""

    result: VariantResult
    done: int
    total: int
    elapsed: float


@dataclass
class TuneFinished:
    report: TuneReport


# ----------------------------------------------------------------------------- ordering
def plan_variants(candidates: Sequence[KernelGraph], *, max_variants: int | None = None) -> list[tuple[Variant, Estimate]]:
    """All variants of all candidates with estimates, in the order a time budget spends on them.

    Each candidate's best first; then the best of each of its (FMA or tensor cores, block size)
    groups, since the cost model does not rank across those (measured rank correlation about 0;
    in one H100 run a 45 s budget missed GQA decode's fastest lowering, a 256-thread FMA one,
    because every FMA and tensor-core estimate lay within 1 %); then the rest, by estimate.
    """
    per: list[list[tuple[Variant, Estimate]]] = []
    for i, g in enumerate(candidates):
        try:
            vs = lowering_variants(g, candidate=i)
        except MirageLabError:
            continue  # a candidate no variant of which can be generated is skipped (reported by the caller)
        scored = sorted(((v, estimate(v.graph, v.options)) for v in vs), key=lambda p: p[1].us)
        for v, e in scored:
            v.estimate_us = e.us
        per.append(scored)
    firsts = sorted((s[0] for s in per if s), key=lambda p: p[1].us)
    groups: dict[tuple, tuple[Variant, Estimate]] = {}
    for s in per:
        for p in s:
            groups.setdefault((p[0].candidate, p[0].options.mma, p[0].threads), p)
    first_ids = {id(p[0]) for p in firsts}
    seconds = sorted((p for p in groups.values() if id(p[0]) not in first_ids), key=lambda p: p[1].us)
    taken = first_ids | {id(p[0]) for p in seconds}
    rest = sorted((p for s in per for p in s[1:] if id(p[0]) not in taken), key=lambda p: p[1].us)
    out = firsts + seconds + rest
    return out[:max_variants] if max_variants else out


# ----------------------------------------------------------------------------- parent side
def check_outputs(kernel: Any, inputs: Sequence[Any], reference: Sequence[Any],
                  tol: float = TOLERANCE) -> tuple[float, str | None]:
    """Run a compiled μGraph on ``inputs`` (outputs NaN-poisoned, so an element never written
    fails) against ``reference``: ``(largest relative error, why it fails or None)``."""
    from ..runtime.profile import relative_error

    outs = kernel(inputs=list(inputs), poison=True)
    err = max(relative_error(o, r) for o, r in zip(outs, reference))
    return err, None if err < tol else f"relative error {err:.3g} exceeds {tol}"


def _check(res: VariantResult, mi: MeasuringInputs, cache_dir: str | None) -> Any:
    """Load the compiled variant and check it on the measuring inputs; returns the kernel or None."""
    from ..runtime.kernel import compile as rt_compile

    try:
        k = rt_compile(res.variant.graph, cache_dir=cache_dir, options=res.variant.options)
        res.rel_err, why = check_outputs(k, mi.inputs, mi.reference)
        if why is not None:
            res.error = f"{why} (inputs: {mi.policy})"
            return None
        return k
    except Exception as e:  # a candidate that fails to load or launch is reported, never fatal
        res.error = f"{type(e).__name__}: {e}"[:800]
        return None


def _time(res: VariantResult, kernel: Any, mi: MeasuringInputs, repeats: int) -> None:
    from ..runtime.profile import make_copies, rotation_copies, time_calls

    try:
        sets = make_copies(kernel.check_inputs(mi.inputs), rotation_copies(mi.inputs))
        graphs = [kernel.capture(s) for s in sets]
        res.timings["cuda_graph"] = time_calls([g.replay for g in graphs], name=res.variant.tag, repeats=repeats)
    except Exception as e:
        res.error = f"timing failed: {type(e).__name__}: {e}"[:800]


def _baselines(program: KernelGraph, mi: MeasuringInputs, which: str | bool, repeats: int) -> dict[str, Any]:
    from ..runtime.profile import profile_baselines

    if not which:
        return {}
    try:
        return profile_baselines(program, mi.inputs, repeats=repeats,
                                 compile_mode="default" if which == "all" else None)
    except Exception as e:  # a baseline that fails is reported, the tuning result stands
        return {"error": f"{type(e).__name__}: {e}"[:500]}


def autotune(program: KernelGraph, candidates: Sequence[KernelGraph], *, tune_seconds: float = 60.0,
             workers: int | None = None, inputs: Sequence[Any] | None = None, repeats: int = 100,
             final_repeats: int = 300, finalists: int = 3, baselines: str | bool = "eager",
             max_variants: int | None = None, cache_dir: str | os.PathLike | None = None,
             on_event: Callable[[Any], None] | None = None) -> TuneReport:
    """Compile, check and time the lowering variants of ``candidates`` within ``tune_seconds``.

    ``baselines``: ``"eager"`` times torch eager and torch in a CUDA graph, ``"all"`` adds
    torch.compile (its compile takes tens of seconds, outside the budget), ``False`` none.
    Returns a :class:`TuneReport`; ``report.best`` is None only if every variant failed.
    """
    import torch

    from ..runtime.kernel import compile_and_launch, simulator_active
    from ..runtime.profile import floor_us

    emit = on_event or (lambda ev: None)
    t0 = time.monotonic()
    if not candidates:
        raise MirageLabError("autotune: no candidates to tune")
    sim = simulator_active()
    if not sim and not torch.cuda.is_available():
        raise MirageLabError("autotune needs a CUDA GPU (or NUMBA_ENABLE_CUDASIM=1 to check variants without timing)")
    mi = measuring_inputs(program, device="cpu" if sim else "cuda", inputs=inputs)
    planned = plan_variants(candidates, max_variants=max_variants)
    results = [VariantResult(v, e) for v, e in planned]
    cdir = None if cache_dir is None else str(cache_dir)
    n_workers = 1 if sim else max(1, min(len(results), workers or os.cpu_count() or 1))
    emit(TuneStarted(len(results), len(candidates), tune_seconds, n_workers, mi.policy))
    done = 0
    kernels: dict[int, Any] = {}

    def finish_one(i: int, secs: float, err: str | None) -> None:
        nonlocal done
        r = results[i]
        r.compile_s = secs
        if err is not None:
            r.error = f"compile/launch: {err}"
        else:
            k = _check(r, mi, cdir)
            if k is not None:
                kernels[i] = k
                if not sim:
                    _time(r, k, mi, repeats)
        done += 1
        emit(VariantDone(r, done, len(results), time.monotonic() - t0))

    untried = 0
    if sim:
        # no timing possible: check in cost-model order, stop at the first correct variant
        for i, r in enumerate(results):
            if time.monotonic() - t0 > tune_seconds and done:
                untried = len(results) - i
                break
            finish_one(i, 0.0, None)
            if r.ok:
                untried = len(results) - i - 1
                break
    else:
        q: "queue.Queue[tuple[int, float, str | None]]" = queue.Queue()
        ctx = mp.get_context("spawn")
        pool = ctx.Pool(n_workers)
        try:
            for i, r in enumerate(results):
                pool.apply_async(compile_and_launch, ((i, r.variant.graph.to_json(), cdir, r.variant.options.astuple()),),
                                 callback=q.put,
                                 error_callback=lambda e, i=i: q.put((i, 0.0, f"{type(e).__name__}: {e}")))
            while done < len(results):
                left = tune_seconds - (time.monotonic() - t0)
                if left <= 0:
                    break
                try:
                    i, secs, err = q.get(timeout=left)
                except queue.Empty:
                    break
                finish_one(i, secs, err)
        finally:
            pool.terminate()  # compiles still running past the budget are dropped
            pool.join()
        untried = len(results) - done
        # the finalists again, with more repeats, so the winner is not a lucky quick timing
        ok = sorted((i for i in kernels if results[i].ok and results[i].timings), key=lambda i: results[i].median_us)
        for i in ok[:finalists]:
            _time(results[i], kernels[i], mi, final_repeats)
    ok_results = [r for r in results if r.ok and (sim or r.timings)]
    best = min(ok_results, key=lambda r: (r.median_us, r.estimate.us)) if ok_results else None
    device = "CUDA simulator" if sim else torch.cuda.get_device_name()
    base = {} if sim else _baselines(program, mi, baselines, final_repeats)
    report = TuneReport(results, best, base, floor_us(program), mi.policy, time.monotonic() - t0, tune_seconds,
                        untried, device, timed=not sim)
    emit(TuneFinished(report))
    return report
