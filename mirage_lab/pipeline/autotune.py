"""The autotuner: lowering variants of the candidates raced against the program itself; the fastest kept.

1. Every candidate's lowering variants (:mod:`.variants`) are ranked by the cost model
   (:mod:`.cost_model`): first each candidate's most promising variant, then the best of
   each (FMA or tensor cores, block size) group, then the rest, all by estimated latency.
2. A pool of fresh processes compiles them in that order (numba compiles one large kernel
   in seconds to tens of seconds, single-threaded) and launches each once, filling numba's
   disk cache; a variant that fails to compile or launch is reported there and skipped.
3. Meanwhile this process builds, checks and times the program's own lowerings
   (:mod:`.contenders`): its torch ops as the code generator lowers them, and
   ``torch.compile`` of them, each in a CUDA graph.
4. As each compile finishes, this process loads it, checks it against the float64
   reference on the measuring inputs (:mod:`.inputs`; NaN-poisoned outputs) and times it
   exactly as the program's lowerings are timed (CUDA-graph replay, CUDA events, inputs
   rotated so weights come from HBM). Tuning stops when no variant left can win by the
   calibrated cost model (:mod:`.stopping`), or when ``tune_seconds`` run out.
5. The fastest few variants and the program's lowerings are timed again with more
   repeats; the fastest correct contender is :attr:`TuneReport.chosen` (a μGraph only if
   faster than the program by more than ``CHOICE_MARGIN``), and torch eager is timed for the speedup.

Under the CUDA simulator (no timing possible) the variants are compiled and checked in
this process in cost-model order and the first correct one wins; an injected ``timer``
makes the same race run there (the tests' fake timings).

    >>> report = autotune(program, [candidate], tune_seconds=30)    # doctest: +SKIP
    >>> report.winner, report.summary()                             # doctest: +SKIP
"""
from __future__ import annotations

import os
import queue
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence, TypeVar

from ..cpus import usable_cpus
from ..errors import MirageLabError
from ..ir.kernel_graph import KernelGraph
from ..runtime.latency import CANDIDATE, LatencyRow, baseline_rows
from .contenders import PROGRAM_PHRASE, library_phrase
from .compile_pool import CompileFeed
from .cost_model import Estimate, estimate
from .library import library_title
from .measured import Measured, raise_on_gpu_fault
from .inputs import MeasuringInputs, measuring_inputs
from .stopping import KIND_SAFETY, STOP_MARGIN, lowering_kind, rule_items, variant_group

OWN_LOWERINGS = ("torch", "torch.compile")   # the program as the user wrote it, run by PyTorch
# how much faster than those a μGraph or library kernel must measure to be returned: the tuner's timing and
# a later one of the same two kernels (suite_bench, another process) differed by up to 2.8 % (Gemma 2B
# GeGLU on the H200: a μGraph timed 1.5 % faster than torch.compile in the tuner, 1.3 % slower after)
CHOICE_MARGIN = 0.03
from .variants import Variant, lowering_variants

T = TypeVar("T")
TOLERANCE = 2e-3  # relative error against float64 that a half-precision candidate must meet at least
# ... or, where the program's own torch ops are less accurate in its dtype (bfloat16 keeps 8 bits: its
# matmuls land near 2e-3 to 2e-2 against float64), this many times their error on the same inputs
PROGRAM_ERROR_FACTOR = 2.0


# ----------------------------------------------------------------------------- records and events
@dataclass
class VariantResult(Measured):
    """What happened to one variant: its estimate, compile time, check and timings (µs)."""

    variant: Variant
    estimate: Estimate
    compile_s: float | None = None
    rel_err: float | None = None
    error: str | None = None
    timings: dict[str, Any] = field(default_factory=dict)   # mode -> runtime.profile.Timing

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


@dataclass(repr=False)
class TuneReport:
    """Every contender tried, the winner, the baselines, how the measuring was done and why it stopped.

    ``results``: the μGraph lowering variants; ``best``: the fastest correct one (``None`` if
    none passed). ``programs``: the program's own lowerings that raced with them (``"torch"``,
    ``"torch.compile"``); ``eager``: torch eager's ``Timing`` (what the user started from).
    :attr:`chosen` is what ``superoptimize`` returns, :attr:`winner` says which kind it is,
    :meth:`summary` says it in one line.
    """

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
    programs: list[Any] = field(default_factory=list)    # contenders.ProgramResult
    eager: Any = None                                     # runtime.profile.Timing of torch eager
    stop_reason: str = ""
    cluster: Any = None   # distributed.ClusterRun where tuned on a Dask cluster: workers, calibration, moved units

    def rows(self) -> list[dict[str, Any]]:
        return [r.row() for r in self.results]

    # ------------------------------------------------------------------ how well the cost model ranked
    def rank_pairs(self) -> list[tuple[float, float]]:
        """``(cost model's estimate µs, measured median µs)`` of every variant checked correct and timed."""
        return [(r.estimate.us, r.median_us) for r in self.results if r.ok and r.timings]

    def rank_correlation(self) -> float | None:
        """Spearman's rho between the cost model's estimates and the measured times of the timed variants
        (ties get their average rank); ``None`` with fewer than two, or where either side is all ties.

            >>> rep.rank_correlation()                                    # doctest: +SKIP
            0.83
        """
        from .ranking import spearman

        pairs = self.rank_pairs()
        return spearman([e for e, _ in pairs], [m for _, m in pairs])

    # ------------------------------------------------------------------ the decision
    @property
    def program_best(self) -> Any:
        """The fastest correct program lowering (untimed: the first correct one), or ``None``."""
        ok = [p for p in self.programs if p.ok and (not self.timed or p.timings)]
        if not ok:
            return None
        return min(ok, key=lambda p: p.median_us) if self.timed else ok[0]

    @property
    def chosen(self) -> Any:
        """What ``superoptimize`` returns: the fastest measured contender, μGraph or program lowering.

        A μGraph or a library kernel must be faster than the program's own best lowering (torch or
        torch.compile) by more than ``CHOICE_MARGIN`` to be chosen: two timings of the same pair in
        different processes disagree by up to ~3 %, and a win inside that may be a slowdown where the
        user runs it. Not timed (simulator): the first correct variant in cost-model order, else the program.
        """
        if not self.timed:
            first = next((r for r in self.results if r.ok), None)
            return self.best or first or self.program_best
        progs = [p for p in self.programs if p.ok and p.timings]
        own = [p for p in progs if p.lowering in OWN_LOWERINGS]
        bar = min((p.median_us for p in own), default=float("inf")) * (1 - CHOICE_MARGIN)
        others = [p for p in progs if p not in own] + sorted(
            (r for r in self.results if r.ok and r.timings), key=lambda r: (r.median_us, r.estimate.us))
        ranked = own + [c for c in others if c.median_us < bar] if own else others
        return min(ranked, key=lambda c: c.median_us) if ranked else None  # min keeps the first of equals

    @property
    def winner(self) -> str | None:
        """``"μGraph"``, or the program lowering chosen (``"torch"``, ``"torch.compile"``, a library's such as
        ``"sdpa"``); ``None`` if nothing ran."""
        c = self.chosen
        return None if c is None else "μGraph" if isinstance(c, VariantResult) else c.lowering

    @property
    def chosen_us(self) -> float | None:
        c = self.chosen
        return c.median_us if c is not None and self.timed and c.timings else None

    @property
    def eager_us(self) -> float | None:
        return None if self.eager is None else self.eager.median_us

    @property
    def compile_us(self) -> float | None:
        """torch.compile of the program in a CUDA graph, where it compiled and was timed."""
        p = next((p for p in self.programs if p.lowering == "torch.compile" and p.ok and p.timings), None)
        return None if p is None else p.median_us

    @property
    def speedup(self) -> float | None:
        """torch eager's time / the chosen contender's time (measured); ``None`` where either is missing."""
        us, e = self.chosen_us, self.eager_us
        return e / us if us and e else None

    @property
    def speedup_vs_compile(self) -> float | None:
        """torch.compile's time (CUDA graph) / the chosen contender's time, where both were measured."""
        us, c = self.chosen_us, self.compile_us
        return c / us if us and c else None

    def summary(self) -> str:
        """One line: what won, its time, and how much faster it is than what the user started from.

            >>> rep.summary()                                             # doctest: +SKIP
            'no μGraph beat PyTorch on this GPU: returning the program itself (torch.compile in a CUDA graph, ...'
        """
        c = self.chosen
        if c is None:
            return "nothing ran correctly: no μGraph variant and no program lowering passed the check"
        best_mu = min((r.median_us for r in self.results if r.ok and r.timings), default=None)
        if not self.timed:
            if isinstance(c, VariantResult):
                return f"not timed ({self.device}): the first correct variant in cost-model order, {c.variant.tag}"
            return ("no μGraph variant passed the check: returning the program itself "
                    f"({c.lowering}, not timed on the {self.device})")
        figures = [_faster("torch eager", self.eager_us, c.median_us)]
        if self.compile_us is not None and (isinstance(c, VariantResult) or c.lowering != "torch.compile"):
            figures.append(_faster("torch.compile", self.compile_us, c.median_us))
        figures = [f for f in figures if f]
        if isinstance(c, VariantResult):
            torch_us = next((p.median_us for p in self.programs if p.lowering in ("torch", "program") and p.ok
                             and p.timings), None)
            extra = f"; the program's own ops in a CUDA graph {torch_us:.2f} µs" if torch_us else ""
            return f"μGraph {c.variant.tag}: {c.median_us:.2f} µs" + "".join(", " + f for f in figures) + extra
        why = f"best μGraph {best_mu:.2f} µs" if best_mu is not None else (
            "no μGraph variant passed the check" if self.results else "the search found no candidate")
        title = library_title(c.lowering)
        if title is not None:
            torch_us = next((p.median_us for p in self.programs if p.lowering == "torch" and p.ok and p.timings), None)
            if torch_us is not None:
                why += f"; the program's own ops {torch_us:.2f} µs"
            return (f"{library_phrase(title)} ({c.lowering} for the part it computes, the program's other ops as torch "
                    f"calls, in a CUDA graph, {c.median_us:.2f} µs; {why})" + "".join("; " + f for f in figures[:1])
                    + "".join(", " + f for f in figures[1:]))
        return (f"{PROGRAM_PHRASE} ({c.lowering} in a CUDA graph, {c.median_us:.2f} µs; {why})"
                + "".join("; " + f for f in figures[:1]) + "".join(", " + f for f in figures[1:]))

    def __repr__(self) -> str:
        ok = sum(r.ok for r in self.results)
        progs = ", ".join(f"{p.lowering} {'%.2f µs' % p.median_us if p.timings else (p.error or 'not timed')}"
                          for p in self.programs)
        return (f"TuneReport({self.summary()}\n  {len(self.results)} variants ({ok} correct, {self.untried} untried) "
                f"in {self.seconds:.1f} s of {self.budget_s:.0f} s on {self.device}; program: {progs or 'not raced'}"
                f"\n  stopped: {self.stop_reason or '-'})")

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
class ProgramDone:
    """One of the program's own lowerings (``result.lowering``) built, checked and, where timing runs, timed."""

    result: Any   # contenders.ProgramResult
    elapsed: float


@dataclass
class ProgramWaiting:
    """The tuner waits for one of the program's own lowerings still building (torch.compile's warm-up):
    every variant that could win is measured, and the program must race before anything is returned."""

    lowering: str
    elapsed: float


@dataclass
class TuneFinished:
    report: TuneReport


def _faster(name: str, theirs: float | None, ours: float) -> str:
    """``"1.32× faster than torch eager (17.80 µs)"``, or honestly slower."""
    if theirs is None or not ours:
        return ""
    if theirs >= ours:
        return f"{theirs / ours:.2f}× faster than {name} ({theirs:.2f} µs)"
    return f"{ours / theirs:.2f}× slower than {name} ({theirs:.2f} µs)"


# ----------------------------------------------------------------------------- ordering
def plan_order(per: Sequence[Sequence[T]], estimate_us: Callable[[T], float], group: Callable[[T], Any]) -> list[T]:
    """The order a time budget spends on variants: ``per`` holds each candidate's, sorted by estimate.

    Each candidate's best first; then the best of each of the other groups (``group``: candidate,
    FMA or tensor cores, block size), a hedge where the estimate errs (with the model of 2026-11-22,
    whose rank correlation was about 0, a 45 s budget missed GQA decode's fastest lowering, a
    256-thread FMA one); then the rest, all by estimate. Groups of one kind thus come in the order of
    their estimates, and the first of a kind measured calibrates the others (:mod:`.stopping`).
    """
    firsts = sorted((s[0] for s in per if s), key=estimate_us)
    groups: dict[Any, T] = {}
    for s in per:
        for p in s:
            groups.setdefault(group(p), p)
    first_ids = {id(p) for p in firsts}
    seconds = sorted((p for p in groups.values() if id(p) not in first_ids), key=estimate_us)
    taken = first_ids | {id(p) for p in seconds}
    rest = sorted((p for s in per for p in s[1:] if id(p) not in taken), key=estimate_us)
    return firsts + seconds + rest


def plan_variants(candidates: Sequence[KernelGraph], *, max_variants: int | None = None) -> list[tuple[Variant, Estimate]]:
    """All variants of all candidates with estimates, in the order a time budget spends on them (:func:`plan_order`)."""
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
    out = plan_order(per, lambda p: p[1].us, lambda p: variant_group(p[0]))
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


def _check(res: VariantResult, mi: MeasuringInputs, cache_dir: str | None, tol: float = TOLERANCE) -> Any:
    """Load the compiled variant and check it on the measuring inputs; returns the kernel or None."""
    from ..runtime.kernel import compile as rt_compile

    try:
        k = rt_compile(res.variant.graph, cache_dir=cache_dir, options=res.variant.options)
        res.rel_err, why = check_outputs(k, mi.inputs, mi.reference, tol)
        if why is not None:
            res.error = f"{why} (inputs: {mi.policy})"
            return None
        return k
    except Exception as e:  # a candidate that fails to load or launch is reported, never fatal (but a GPU fault)
        raise_on_gpu_fault(e, f"checking the variant {res.variant.tag}")
        res.error = f"{type(e).__name__}: {e}"[:800]
        return None


# A variant measured this many times its estimate or more is timed once more, and the faster timing stands.
OUTLIER_FACTOR = 2.0


def _time(res: VariantResult, kernel: Any, mi: MeasuringInputs, repeats: int, timer: Any) -> None:
    """Time a checked variant: the timer's CUDA-graph replay over rotated input copies (as every contender).

    A time ``OUTLIER_FACTOR`` or more above the variant's estimate is taken again and the smaller of the two
    kept: interference (another process's kernels on the GPU, torch.compile's autotuning among them) only
    ever adds time, and one such reading calibrates the stopping rule for the variant's whole group or
    kind. On the H200 two inflated readings (448 and 367 µs for 16-19 µs estimates) ruled out the other
    77 variants of the README example, and torch.compile came back instead of a μGraph 7 % faster.
    """
    def once() -> Any:
        return timer.graph(res.variant.tag, kernel.check_inputs, lambda s: kernel.capture(s).replay, mi.inputs, repeats)

    try:
        t = once()
        est = res.estimate.us
        if est > 0 and t.median_us >= OUTLIER_FACTOR * est:
            first, again = t, once()
            t = min(first, again, key=lambda x: x.median_us)
            t.extra = {**t.extra, "retimed_us": [round(first.median_us, 2), round(again.median_us, 2)]}
        res.timings["cuda_graph"] = t
    except Exception as e:
        raise_on_gpu_fault(e, f"timing the variant {res.variant.tag}")
        res.error = f"timing failed: {type(e).__name__}: {e}"[:800]


def _extra_baselines(fns: dict[str, Any], mi: MeasuringInputs, which: str | bool, repeats: int) -> dict[str, Any]:
    """``baselines="all"``: eager launches and Python call time of the torch function and of torch.compile."""
    from ..runtime.profile import profile_torch

    out: dict[str, Any] = {}
    if which != "all":
        return out
    for key, fn in fns.items():
        try:
            res = profile_torch(fn, mi.inputs, name=key, repeats=repeats, graph=False)
        except Exception as e:  # a baseline that fails is reported, the tuning result stands
            raise_on_gpu_fault(e, f"timing the baseline {key}")
            out[f"{key}_error"] = f"{type(e).__name__}: {e}"[:500]
            continue
        if key == "torch_compile":
            out["torch_compile"] = res["eager"]
        out[f"{key}_python_call"] = res["python_call"]
    return out


class _Tuning:
    """The state of one autotune run: contenders, measurements, and the rule that ends it."""

    def __init__(self, program: KernelGraph, results: list[VariantResult], mi: MeasuringInputs, timer: Any,
                 cache_dir: str | None, repeats: int, stop_margin: float | None, emit: Callable[[Any], None],
                 t0: float) -> None:
        self.program, self.results, self.mi, self.timer = program, results, mi, timer
        self.cache_dir, self.repeats, self.stop_margin, self.emit, self.t0 = cache_dir, repeats, stop_margin, emit, t0
        self.kernels: dict[int, Any] = {}
        self.finished: set[int] = set()
        self.programs: list[Any] = []
        self.excluded_s = 0.0   # torch.compile's own compile: run while the pool compiles, outside the budget
        self._to_race: list[str] = []   # the program's lowerings not raced yet (race_program, race_ready)
        self._warm: Any = None

    # -------------------------------------------------------------- the program's own lowerings
    def race_program(self, lowerings: Sequence[str], warm: Any = None, block: bool = True) -> None:
        """Build, check and time the program's own lowerings. ``warm``: a :class:`~.contenders.ProgramWarmup`
        started with the search, whose lowering is taken instead of built here (only the wait is excluded).
        Without ``block``, a warm lowering still building is left for :meth:`race_ready` (the variants are
        timed meanwhile: waiting for it first put 7-11 s before the first variant's time on the H200)."""
        from .contenders import program_lowerings_for

        self._to_race = list(program_lowerings_for(self.program, lowerings, self.timer is not None))
        self._warm = warm
        self.race_ready(block)

    def racing(self) -> bool:
        """Some of the program's own lowerings are not raced yet (a warm-up still building)."""
        return bool(self._to_race)

    def race_ready(self, block: bool = True) -> None:
        """Race the program's lowerings not raced yet; without ``block``, skip a warm-up that is still building."""
        for name in list(self._to_race):
            building = self._warm is not None and self._warm.lowering == name and not self._warm.ready()
            if not block and building:
                continue
            if building:
                self.emit(ProgramWaiting(name, time.monotonic() - self.t0))
            self._to_race.remove(name)
            self._race_one(name, self._warm)

    def _race_one(self, name: str, warm: Any) -> None:
        from .contenders import build_program_lowering, check_program, time_program

        pre = warm.take(name) if warm is not None else None
        if pre is not None:
            p, waited = pre
            self.excluded_s += waited
        else:
            p = build_program_lowering(self.program, name, self.mi)
            if name == "torch.compile" and p.compile_s:
                self.excluded_s += p.compile_s
        if p.error is None:  # the program defines correct: its plain ops need only be finite
            tol = float("inf") if name in ("torch", "program") else self.tolerance()
            check_program(p, self.mi, tol)
        if p.error is None and self.timer is not None:
            time_program(p, self.timer, self.mi, self.repeats)
        self.programs.append(p)
        self.emit(ProgramDone(p, time.monotonic() - self.t0))

    def tolerance(self) -> float:
        """The relative error a contender may have: :data:`TOLERANCE`, or :data:`PROGRAM_ERROR_FACTOR` times
        the program's plain torch lowering's error where that is larger (the dtype's own precision)."""
        plain = next((q.rel_err for q in self.programs if q.ok and q.rel_err is not None), None)
        return max(TOLERANCE, PROGRAM_ERROR_FACTOR * (plain or 0.0))

    # -------------------------------------------------------------- the variants
    def finish(self, i: int, secs: float, err: str | None) -> None:
        r = self.results[i]
        r.compile_s = secs
        if err is not None:
            r.error = f"compile/launch: {err}"
        else:
            k = _check(r, self.mi, self.cache_dir, self.tolerance())
            if k is not None:
                self.kernels[i] = k
                if self.timer is not None:
                    _time(r, k, self.mi, self.repeats, self.timer)
        self.finished.add(i)
        self.emit(VariantDone(r, len(self.finished), len(self.results), time.monotonic() - self.t0))

    def best_us(self) -> float:
        timed = [c.median_us for c in [*self.results, *self.programs] if c.ok and c.timings]
        return min(timed, default=float("inf"))

    def possible(self, wait: bool = False) -> list[int]:
        """Unfinished variants the cost model still rates as possible winners (:mod:`.stopping`); ``wait``:
        only those to compile now (the first of a kind or group with nothing timed; the rest wait for it)."""
        from .stopping import possible_winners

        pending = [i for i in range(len(self.results)) if i not in self.finished]
        if self.stop_margin is None or self.timer is None:
            return pending
        return possible_winners(rule_items(self.results), best_us=self.best_us(), margin=self.stop_margin,
                                pending=pending, kind=lowering_kind, safety=KIND_SAFETY, wait=wait)

    def left_s(self, budget: float) -> float:
        return budget + self.excluded_s - (time.monotonic() - self.t0)

    def stop_reason_now(self) -> str:
        best = self.best_us()
        return (f"the best measured ({best:.2f} µs) can no longer change: none of the {len(self.results) - len(self.finished)} "
                f"variants left is rated a possible winner (calibrated estimate within {1 + (self.stop_margin or 0):.2f}× "
                f"of the best; {KIND_SAFETY:g}× that for a group calibrated by its kind)")

    # -------------------------------------------------------------- torch eager and the baseline rows
    def baselines(self, which: str | bool, final_repeats: int) -> tuple[Any, dict[str, Any]]:
        """torch eager's ``Timing`` (the speedup's reference; ``None`` if it failed) and the report's baseline rows."""
        from .contenders import EAGER

        base: dict[str, Any] = {}
        eager = None
        fn = to_torch_fn_of(self.program)
        try:
            eager = self.timer.eager(EAGER, fn, self.mi.inputs, final_repeats)
        except Exception as e:  # the figure is missing, the tuning result stands
            raise_on_gpu_fault(e, "timing torch eager")
            base["torch_eager_error"] = f"{type(e).__name__}: {e}"[:500]
        if which:
            if eager is not None:
                base["torch_eager"] = eager
            for p in self.programs:
                title = library_title(p.lowering)   # a library contender's row is labelled by its title
                key = {"torch": "torch_cuda_graph", "torch.compile": "torch_compile_cuda_graph"}.get(
                    p.lowering, f"{title} + CUDA graph" if title else None)
                if key and p.ok and p.timings:
                    base[key] = p.timings["cuda_graph"]
                elif key and p.error:
                    base[f"{key}_error"] = p.error
            fns = {"torch": fn}
            compiled = next((p.runner for p in self.programs if p.lowering == "torch.compile" and p.ok), None)
            if compiled is not None:
                fns["torch_compile"] = compiled.fn
            base.update(_extra_baselines(fns, self.mi, which, final_repeats))
        return eager, base

    # -------------------------------------------------------------- finalists
    def final_round(self, finalists: int, final_repeats: int) -> None:
        """The fastest few variants and every program lowering again, with more repeats."""
        from .contenders import time_program

        ok = sorted((i for i in self.kernels if self.results[i].ok and self.results[i].timings),
                    key=lambda i: self.results[i].median_us)
        for i in ok[:finalists]:
            _time(self.results[i], self.kernels[i], self.mi, final_repeats, self.timer)
        for p in self.programs:
            if p.ok and p.timings:
                time_program(p, self.timer, self.mi, final_repeats)


def autotune(program: KernelGraph, candidates: Sequence[KernelGraph], *, tune_seconds: float = 60.0,
             workers: int | None = None, inputs: Sequence[Any] | None = None, repeats: int = 100,
             final_repeats: int = 300, finalists: int = 3, baselines: str | bool = "eager",
             max_variants: int | None = None, cache_dir: str | os.PathLike | None = None,
             on_event: Callable[[Any], None] | None = None, timer: Any = None,
             program_lowerings: Sequence[str] = ("torch", "torch.compile", "library"),
             stop_margin: float | None = STOP_MARGIN, pool: Any = None) -> TuneReport:
    """Race the lowering variants of ``candidates`` against the program's own lowerings; stop when answered.

    The variants compile in a pool while the program's lowerings (``program_lowerings``: its
    torch ops via the code generator, ``torch.compile`` of them, and ``"library"``: the program
    with a library kernel in place of the part it computes, :mod:`.library`) are built, checked and
    timed here; then each variant, as its compile finishes, is checked and timed the same way
    (``timer``: CUDA-graph replay over rotated input copies; default :class:`~.contenders.CudaGraphTimer`
    on a GPU, none under the CUDA simulator). Tuning stops once no variant left is a possible
    winner (:mod:`.stopping`; ``stop_margin=None`` measures all), or at ``tune_seconds``
    (a ceiling; torch.compile's own compile time is not counted). The finalists are timed again.
    ``pool``: a :class:`~.compile_pool.CompilePool` already running (``superoptimize`` starts one
    with its search); its processes compile the variants, and it stays open for its owner to close.

    ``baselines``: torch eager is always timed (the speedup's reference); ``"all"`` adds eager
    launches of torch.compile and Python call times; ``False`` leaves every baseline row out.
    Returns a :class:`TuneReport`: ``report.chosen`` is the winner, ``report.best`` the fastest μGraph.

        >>> rep = autotune(program, [candidate], tune_seconds=30)     # doctest: +SKIP
        >>> rep.winner, rep.summary()                                 # doctest: +SKIP
    """
    import torch

    from ..runtime.kernel import compile_and_launch, simulator_active
    from ..runtime.profile import floor_us
    from .contenders import default_timer

    emit = on_event or (lambda ev: None)
    t0 = time.monotonic()
    if not candidates and not program_lowerings:
        raise MirageLabError("autotune: no candidates to tune")
    sim = simulator_active()
    if not sim and not torch.cuda.is_available():
        raise MirageLabError("autotune needs a CUDA GPU (or NUMBA_ENABLE_CUDASIM=1 to check variants without timing)")
    if timer is None:
        timer = default_timer()
    mi = measuring_inputs(program, device="cpu" if sim else "cuda", inputs=inputs)
    planned = plan_variants(candidates, max_variants=max_variants)
    results = [VariantResult(v, e) for v, e in planned]
    cdir = None if cache_dir is None else str(cache_dir)
    n_workers = 1 if sim else (pool.workers if pool is not None else max(1, min(len(results), workers or usable_cpus())))
    emit(TuneStarted(len(results), len(candidates), tune_seconds, n_workers, mi.policy))
    tn = _Tuning(program, results, mi, timer, cdir, repeats, stop_margin, emit, t0)
    reason = "every planned variant was measured" if results else "no μGraph candidate to tune"
    owned = pool is None
    warm = getattr(pool, "program_warmup", None)   # torch.compile built while the search ran
    pool = None if sim else getattr(pool, "pool", None)
    q: "queue.Queue[tuple[int, float, str | None]]" = queue.Queue()
    feed: CompileFeed | None = None
    try:
        if not sim and results:  # compiles start before the program's lowerings are built and timed
            if pool is None:
                from ..search.lifetime import spawn_pool

                pool = spawn_pool(n_workers)

            def submit(i: int, pool: Any = pool) -> None:
                r = results[i]
                pool.apply_async(compile_and_launch, ((i, r.variant.graph.to_json(), cdir, r.variant.options.astuple()),),
                                 callback=q.put,
                                 error_callback=lambda e, i=i: q.put((i, 0.0, f"{type(e).__name__}: {e}")))

            # two per worker queued or running: workers stay busy while this process checks and times,
            # and a variant the stopping rule rules out later is never compiled. Before any time is known
            # only the first of each kind goes (the search's speculative compiles made it cheap): sending
            # the plan's first 32 sent 8 FMA groups of the README example that the first time rules out
            # (benchmarks/stop_replay.py: 51 variants timed against 35)
            feed = CompileFeed(submit, depth=2 * n_workers)
            feed.top_up(tn.possible(wait=True))
        # torch.compile still building (its warm-up started with the search) is raced when it is ready,
        # between variants, not before the first of them
        tn.race_program(program_lowerings, warm=warm, block=feed is None)
        while len(tn.finished) < len(results):
            tn.race_ready(block=False)
            possible = tn.possible()
            if not possible:
                if tn.racing():   # the program's own lowering may change the best: wait for it
                    tn.race_ready()
                    continue
                reason = tn.stop_reason_now()
                break
            left = tn.left_s(tune_seconds)
            if left <= 0:
                reason = f"tune_seconds ({tune_seconds:g} s) ran out"
                break
            if feed is not None:
                feed.top_up(tn.possible(wait=True))
                try:   # while a warm-up builds, look up now and then to race it
                    i, secs, err = q.get(timeout=min(left, 0.5) if tn.racing() else left)
                except queue.Empty:
                    if tn.racing() and tn.left_s(tune_seconds) > 0:
                        continue
                    reason = f"tune_seconds ({tune_seconds:g} s) ran out"
                    break
                feed.landed(i)
                tn.finish(i, secs, err)
                continue
            # in this process (CUDA simulator): compile and check in plan order, skipping the hopeless
            tn.finish(possible[0], 0.0, None)
            if timer is None and results[possible[0]].ok:
                reason = "not timed (CUDA simulator): the first correct variant in cost-model order"
                break
        tn.race_ready()   # every lowering of the program is raced, whatever ended the loop
    finally:
        if pool is not None and owned:
            pool.terminate()  # compiles still running when tuning stops are dropped
            pool.join()
    untried = len(results) - len(tn.finished)
    if untried and "ran out" in reason:
        reason += f" with {untried} of {len(results)} variants not measured"
    eager = None
    base: dict[str, Any] = {}
    if timer is not None:
        tn.final_round(finalists, final_repeats)
        eager, base = tn.baselines(baselines, final_repeats)
    ok_results = [r for r in results if r.ok and (timer is None or r.timings)]
    best = min(ok_results, key=lambda r: (r.median_us, r.estimate.us)) if ok_results else None
    device = "CUDA simulator" if sim else torch.cuda.get_device_name()
    report = TuneReport(results, best, base, floor_us(program), mi.policy, time.monotonic() - t0, tune_seconds,
                        untried, device, timed=timer is not None, programs=tn.programs, eager=eager, stop_reason=reason)
    emit(TuneFinished(report))
    return report


def to_torch_fn_of(program: KernelGraph) -> Callable[..., Any]:
    """The program as the user's torch function (eager): what the speedup is measured against."""
    from ..runtime.torch_fn import to_torch_fn

    return to_torch_fn(program)
