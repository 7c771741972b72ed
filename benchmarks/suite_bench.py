"""The suite of issue 19: each program from scratch as a user runs it, against torch and the copy floor.

For each program of ``benchmarks/suite`` (real model layers, built with the public API), in one
process: ``best = program.superoptimize(config, search_seconds=...)`` with the README's settings,
``best(inputs=xs)`` checked against float64 on fresh inputs, then every contender timed the same
way: device time per call in one CUDA graph of 40 calls, inputs rotating over copies larger than
2x L2, CUDA events (``runtime.profile``'s copies and ``time_calls``); every contender is captured first, then
the graphs are timed in turn, 5 rounds of 10 replays, median of the round medians (``Contenders``: a drift
of the clocks reaches each alike; until 2026-12-07 (d) each contender's 50 replays ran one after another).
Contenders: the returned kernel, torch eager, torch.compile (default and max-autotune without its
own CUDA graphs: the calls are in ours), a library kernel computing the same function where there
is one (FlashAttention via ``sdpa`` for attention, K prepared in the layout a KV cache keeps, outside
the timing: the bar), and the copy floor (a device-to-device copy moving half the program's bytes in and
half out, as e2e_bench's ``copy_floor_us``). The tuner races that library kernel too, on the program's
own layouts (``pipeline.library``), and may return it: the "returned" column says which won (μGraph,
library, or the program itself). Each row also carries the cost model's ranking quality: Spearman's
rho between estimate and measurement over the program's timed variants, and the suite's pooled rho.

    python benchmarks/suite_bench.py --list                         # no GPU needed
    python benchmarks/suite_bench.py --only 'gqa_*' --resume suite.jsonl --out suite.md
    python benchmarks/suite_bench.py --search-only --workers 1 --search-cap 120 --resume search.jsonl

``--resume FILE`` appends one JSON record per program as it finishes and skips the programs
already there, so the suite runs in parts; a program whose run was killed reads as failed and is
skipped too, unless ``--retry-failed``. The table (``--out``) then holds every program of the file. ``--search-only`` runs only the search
(``superoptimize(tune=False)``, CPU is enough) and reports its seconds and candidates.
"""
from __future__ import annotations

import argparse
import datetime
import gc
import json
import math
import statistics
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import suite  # noqa: E402  (benchmarks/suite)

CALLS_PER_GRAPH = 40


# ----------------------------------------------------------------------------------- records
def table_rows(done: list[dict], selected: set[str], whole_file: bool) -> list[dict]:
    """The records the table shows, in the suite's order: with ``--resume``, every program the file holds (a suite
    run in parts, ``--only`` one part at a time, gets one table of all of them); without, the selected ones."""
    order = {p.name: i for i, p in enumerate(suite.PROGRAMS)}
    return sorted((r for r in done if whole_file or r["program"] in selected),
                  key=lambda r: order.get(r["program"], 1 << 30))


def load_records(path: Path | None) -> list[dict]:
    """The results in a ``--resume`` file, one per program (the last); a program that started and never
    finished (the process was killed, e.g. at a command's time limit) reads as a failure that says so."""
    if path is None or not path.exists():
        return []
    last: dict[tuple[str, str], dict] = {}
    for line in path.read_text().splitlines():
        if line.strip():
            r = json.loads(line)
            key = (r["program"], r.get("mode", "gpu"))
            if r.get("started"):
                r = {**r, "error": "started but never finished (killed? it ran past the command's time limit)"}
            last[key] = r
    return list(last.values())


def append_record(path: Path | None, rec: dict) -> None:
    if path is None:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        f.write(json.dumps(rec, default=str) + "\n")


# ----------------------------------------------------------------------------------- search only
def search_marks(marks: dict[str, Any], t0: float, log) -> Callable[[Any], None]:
    """An ``on_event`` that records the search's first candidate and end into ``marks`` (seconds since ``t0``)."""
    from mirage_lab.search import CandidateFound, Finished

    def on_event(ev: Any) -> None:
        now = time.perf_counter() - t0
        if isinstance(ev, CandidateFound) and "first_candidate_s" not in marks:
            marks["first_candidate_s"] = now
            log(f"  first candidate at {now:.1f}s")
        elif isinstance(ev, Finished):
            marks.update(search_s=now, candidates=ev.stats.candidates, states=ev.stats.states, cancelled=ev.cancelled)
            log(f"  search done at {now:.1f}s: {ev.stats.candidates} candidates{' (stopped)' if ev.cancelled else ''}")

    return on_event


def search_only(p: suite.SuiteProgram, cap: float | None, settings: dict, log) -> dict:
    """Search (no tuning) with the README's settings, stopped at ``cap`` seconds: seconds, first candidate, count."""
    from mirage_lab.search import NoCandidateError

    program = p.build()
    limit = min(x for x in (p.search_seconds, cap, math.inf) if x is not None)
    marks: dict[str, Any] = {}
    t0 = time.perf_counter()

    on_event = search_marks(marks, t0, log)

    rec: dict[str, Any] = {"program": p.name, "mode": "search-only", "kind": p.kind, "dtype": p.dtype,
                           "config": p.config, "readme_search_s": p.search_seconds, "cap_s": cap}
    try:
        best = program.superoptimize(p.config, tune=False, search_seconds=None if math.isinf(limit) else limit,
                                     on_event=on_event, **settings)
        rec["chosen_kernels"] = len(best.customized_ops)
    except NoCandidateError as e:
        rec["error"] = f"NoCandidateError: {str(e)[:200]}"
    rec.update(marks, total_s=time.perf_counter() - t0,
               capped=bool(marks.get("cancelled")) and (p.search_seconds is None or limit < p.search_seconds))
    return rec


# ----------------------------------------------------------------------------------- GPU timing
def graph_time(calls: Sequence[Callable[[], Any]], name: str, repeats: int = 50):
    """Device µs per call: ``CALLS_PER_GRAPH`` calls (cycling over ``calls``) in one CUDA graph, its replays
    timed with ``runtime.profile.time_calls`` (CUDA events, median); the Timing is per replay."""
    from mirage_lab.runtime import profile as prof

    g = capture_calls(calls)
    t = prof.time_calls([g.replay], name=name, repeats=repeats, batch=10)
    return t.median_us / CALLS_PER_GRAPH, t


#: Contenders are timed in turn, in this many rounds (``Contenders``): a compute-bound GEMM's clocks drift under
#: load, and timed one after another, torch.compile of Mistral-7B's prefill read 38.99 µs as one contender and 41.38 as
#: the program returned, the same compiled function (2026-12-07 (c); 0.946x when rerun). In 5 rounds, the medians of
#: the rounds still read 40.80 against 39.87 (rounds 38.45-41.33 and 38.30-42.05, 2026-12-07 (e)): now 10 rounds,
#: alternating direction, and the ratios taken round by round (``Contenders.ratio``).
ROUNDS = 10


def capture_calls(calls: Sequence[Callable[[], Any]]) -> Any:
    """One CUDA graph of ``CALLS_PER_GRAPH`` calls, cycling over ``calls`` (each on its own rotated inputs)."""
    from mirage_lab.runtime import profile as prof

    n = len(calls)

    def many() -> None:
        for i in range(CALLS_PER_GRAPH):
            calls[i % n]()

    return prof._capture(many)


class Contenders:
    """The contenders of one program, timed in turn: each is captured as it is added (its CUDA graph of
    ``CALLS_PER_GRAPH`` calls, ``capture_calls``), then :meth:`time` times every graph in turn, ``repeats / rounds``
    replays a round, for ``rounds`` rounds; a contender's figure is the median of its round medians, so a drift of the
    clocks over the minute reaches every contender alike. One that cannot run or be captured gets None, said why.

        >>> c = Contenders(print)                                    # doctest: +SKIP
        >>> c.add("returned", best_fn, sets); c.add("torch eager", fn, sets)
        >>> c.time()                                                 # {"returned": 16.4, "torch eager": 28.7}
    """

    def __init__(self, log: Callable[[str], Any]) -> None:
        self.log = log
        self.graphs: dict[str, Any] = {}
        self.names: list[str] = []
        self.rounds: dict[str, list[float]] = {}   # each contender's round medians, after time()

    def add(self, name: str, fn: Callable[..., Any], sets: list[list[Any]]) -> bool:
        """Capture ``fn`` over the input ``sets`` (``prof._capture`` warms it up first); False if it failed."""
        self.names.append(name)
        try:
            self.graphs[name] = capture_calls([lambda s=s: fn(*s) for s in sets])
            return True
        except Exception as e:  # a baseline that cannot run or be captured leaves its column empty, said why
            self.log(f"  {name}: failed: {type(e).__name__}: {str(e)[:300]}")
            return False

    def time(self, rounds: int = ROUNDS, repeats: int = 50) -> dict[str, float | None]:
        from mirage_lab.runtime import profile as prof

        per_round = max(1, repeats // rounds)
        medians: dict[str, list[float]] = {name: [] for name in self.graphs}
        order = list(self.graphs.items())
        for k in range(rounds):   # forward, then backward: a drift within a round reaches both ends alike
            for name, g in (order if k % 2 == 0 else order[::-1]):
                t = prof.time_calls([g.replay], name=name, repeats=per_round, batch=min(10, per_round), warmup=2)
                medians[name].append(t.median_us / CALLS_PER_GRAPH)
        self.rounds = medians
        out: dict[str, float | None] = {name: None for name in self.names}
        for name, ms in medians.items():
            out[name] = statistics.median(ms)
            self.log(f"  {name:22s} {out[name]:9.2f} µs/call (median of {rounds} rounds of {per_round} replays of "
                     f"{CALLS_PER_GRAPH}, in turn with the others: rounds {min(ms):.2f}-{max(ms):.2f})")
        return out

    def ratio(self, a: str, b: str) -> float | None:
        """``a``'s time over ``b``'s, the median of the rounds' ratios (paired: a round's clocks reach both)."""
        ra, rb = self.rounds.get(a), self.rounds.get(b)
        if not ra or not rb or len(ra) != len(rb) or any(y <= 0 for y in rb):
            return None
        return statistics.median([x / y for x, y in zip(ra, rb)])


def copy_floor_us(nbytes: int) -> float:
    """A device-to-device copy moving ``nbytes`` in all (half read, half written), timed as the contenders."""
    import torch

    from mirage_lab.runtime import profile as prof

    half = max(8, nbytes // 4)  # float16 elements in half the bytes
    src = torch.empty(half, dtype=torch.float16, device="cuda")
    dst = torch.empty_like(src)
    sets = prof.make_copies([src], prof.rotation_copies([src]))
    return graph_time([lambda s=s: dst.copy_(s) for (s,) in sets], "copy floor")[0]


def run_gpu(p: suite.SuiteProgram, tune_seconds: float, cap: float | None, settings: dict, log,
            max_autotune: bool = True, dump: Path | None = None) -> dict:
    import torch

    import mirage_lab as mi
    from mirage_lab.pipeline import TuneFinished, measuring_inputs
    from mirage_lab.runtime import profile as prof

    program = p.build()
    search_s = p.search_seconds if cap is None else min(x for x in (p.search_seconds, cap) if x is not None)
    marks: dict[str, Any] = {}
    t0 = time.perf_counter()

    searched = search_marks(marks, t0, log)

    def on_event(ev: Any) -> None:
        searched(ev)
        if isinstance(ev, TuneFinished):
            marks["tune_end_s"] = time.perf_counter() - t0

    # the user's path: build, superoptimize with the README's settings, call
    best = program.superoptimize(p.config, tune_seconds=tune_seconds, search_seconds=search_s, on_event=on_event,
                                 **settings)
    superopt_s = time.perf_counter() - t0
    is_program = bool(getattr(best, "is_program", False))
    is_library = bool(getattr(best, "is_library", False))
    winner = getattr(best, "winner", None)
    rep = getattr(best, "report", None)
    try:  # the tuner's pick; a result that is the program itself may have no variant
        chosen = rep.best.variant.tag
    except AttributeError:
        chosen = None
    log(f"  superoptimize {superopt_s:.1f}s; returned {returned_kind(is_program, is_library)} "
        f"({winner or chosen}); tuned latency {getattr(best, 'latency_us', None)}")
    if dump is not None:
        dump_tuning(dump, p.name, best, log)

    m = measuring_inputs(program, seed=1)   # fresh inputs (another seed than the tuner's)
    xs = m.inputs
    outs = best(inputs=xs)
    rel = max(prof.relative_error(o, r) for o, r in zip(outs, m.reference))
    sets = prof.make_copies(xs, prof.rotation_copies(xs))
    res: dict[str, Any] = {
        "program": p.name, "mode": "gpu", "model": p.source, "kind": p.kind, "dtype": p.dtype, "phase": p.phase,
        "shapes": p.shapes_text(), "config": p.config, "search_seconds": search_s, "tune_seconds": tune_seconds,
        "device": torch.cuda.get_device_name(), "date": str(datetime.date.today()), "superoptimize_s": superopt_s,
        "search_s": marks.get("search_s"), "first_candidate_s": marks.get("first_candidate_s"),
        "candidates": marks.get("candidates"), "search_stopped": marks.get("cancelled"),
        "is_program": is_program, "is_library": is_library, "winner": winner, "chosen": chosen,
        "tuned_us": getattr(best, "latency_us", None), "rel_err": rel, "input_policy": m.policy,
        # the cost model's ranking: (estimate µs, measured µs) of every timed variant, and their Spearman rho
        "rank_pairs": rep.rank_pairs() if rep is not None else [],
        "rho": rep.rank_correlation() if rep is not None else None,
    }

    # every contender captured first, then timed in turn (Contenders): the returned result, called as the user calls
    # it (its compiled launches if the call cannot be captured), torch eager, torch.compile (and max-autotune), and
    # the library kernel where there is one
    c = Contenders(log)
    key_of = {"returned": "returned_us", "returned (launches)": "returned_us", "torch eager": "eager_us"}
    if not c.add("returned", lambda *s: best(inputs=list(s)), sets) and getattr(best, "kernel", None) is not None \
            and not (is_program or is_library):
        c.add("returned (launches)", lambda *s: best.kernel.module.run(list(s)), sets)
        res["returned_timed_as"] = "kernel launches (the call could not be captured)"
    fn = mi.runtime.to_torch_fn(program)
    c.add("torch eager", fn, sets)
    res["max_autotune_us"] = None
    for key, mode in (("compile_us", None), ("max_autotune_us", "max-autotune-no-cudagraphs"))[:2 if max_autotune else 1]:
        name = f"torch.compile {mode or 'default'}"
        key_of[name] = key
        try:
            torch._dynamo.reset()   # each mode compiles afresh; a graph captured before keeps its kernels
            cfn = torch.compile(fn, mode=mode)
            tc = time.perf_counter()
            cfn(*xs)
            torch.cuda.synchronize()
            res[key.replace("_us", "_compile_s")] = time.perf_counter() - tc
            c.add(name, cfn, sets)
        except Exception as e:
            log(f"  torch.compile {mode}: failed: {type(e).__name__}: {str(e)[:300]}")
    lib_sets = None
    if p.library:
        lib_xs, lib_fn = suite.LIBRARIES[p.library](xs)
        res["library"] = p.library
        res["library_rel_err"] = max(prof.relative_error(o, r) for o, r in zip([lib_fn(*lib_xs)], m.reference))
        lib_sets = [suite.LIBRARIES[p.library](s)[0] for s in sets]
        key_of[f"library ({p.library})"] = "library_us"
        c.add(f"library ({p.library})", lib_fn, lib_sets)
    res.update({k: None for k in set(key_of.values())})
    for name, us in c.time().items():
        if us is not None:
            res[key_of[name]] = us
    ours = "returned" if c.rounds.get("returned") else "returned (launches)"
    paired = {key_of[name]: c.ratio(ours, name) for name in c.rounds if not name.startswith("returned")}
    del c, lib_sets
    nbytes = sum(t.nbytes() for t in program.inputs) + sum(t.nbytes() for t in program.outputs)
    res["copy_floor_us"] = copy_floor_us(nbytes)
    res.update(ratios(res, paired))
    log(f"  rel err {rel:.1e}; returned {fmt(res['returned_us'])} µs, eager {fmt(res['eager_us'])}, compile "
        f"{fmt(res['compile_us'])}, max-autotune {fmt(res['max_autotune_us'])}, library {fmt(res.get('library_us'))}, "
        f"floor {fmt(res['copy_floor_us'])}; vs best torch {fmt(res['vs_best_torch'], 2)}x, "
        f"vs compile {fmt(res['vs_compile'], 2)}x, vs floor {fmt(res['vs_floor'], 2)}x")
    del sets, best
    return res


def dump_tuning(folder: Path, name: str, best: Any, log) -> None:
    """``folder/<name>.json``: the tuner's row per variant and per program lowering, every candidate
    μGraph (JSON, in the search's order), and the tuned ones by the number the variant rows give them
    (``tuned``: a row's ``candidate`` counts the shortlist, not the search's list), so the losers can be
    studied (and profiled) off the GPU."""
    rep = getattr(best, "report", None)
    sr = getattr(best, "search_result", None)
    tuned: dict[str, Any] = {}
    for r in getattr(rep, "results", []):
        tuned.setdefault(str(r.variant.candidate), json.loads(r.variant.graph.to_json()))
    out = {"program": name, "stop_reason": getattr(rep, "stop_reason", None),
           "variants": rep.rows() if rep is not None else [],
           "programs": [r.row() for r in getattr(rep, "programs", [])],
           "candidates": [json.loads(c.to_json()) for c in getattr(sr, "candidates", [])],
           "tuned": tuned}
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.json").write_text(json.dumps(out))
    log(f"  dumped {len(out['variants'])} variant rows and {len(out['candidates'])} candidates to {folder / name}.json")


def returned_kind(is_program: bool, is_library: bool) -> str:
    return "the program itself" if is_program else "a library kernel" if is_library else "a μGraph"


NOTHING_FOUND_CAP_S = 5.0   # a GPU run's search, after the search phase found nothing for the program


def search_phase(todo: Sequence[suite.SuiteProgram], a: argparse.Namespace, log) -> dict[str, dict]:
    """Search ``todo`` in ``a.search_jobs`` processes at once (``--search-only``, ``--workers`` each), filling the
    persistent cache the GPU runs then read; returns each program's search-only record."""
    import concurrent.futures as cf
    import subprocess

    path = Path(a.resume).with_suffix(".search.jsonl") if a.resume else Path("/tmp/suite_search_phase.jsonl")
    have = {r["program"]: r for r in load_records(path) if r.get("mode") == "search-only" and "search_s" in r}
    need = [p for p in todo if p.name not in have]
    log(f"search phase: {len(need)} programs, {a.search_jobs} at a time, {a.workers or 'default'} workers each "
        f"({len(todo) - len(need)} already searched in {path})")

    def one(p: suite.SuiteProgram) -> None:
        cmd = [sys.executable, str(Path(__file__).resolve()), "--search-only", "--only", p.name, "--resume", str(path)]
        if a.workers:
            cmd += ["--workers", str(a.workers)]
        if a.search_cap is not None:
            cmd += ["--search-cap", str(a.search_cap)]
        r = subprocess.run(cmd, capture_output=True, text=True)
        tail = [ln for ln in r.stdout.splitlines() if ln.strip().startswith(("first candidate", "done in"))]
        log(f"  searched {p.name}: {'; '.join(tail)[-160:]}" + ("" if r.returncode == 0 else f" (rc {r.returncode})"))

    t0 = time.perf_counter()
    with cf.ThreadPoolExecutor(a.search_jobs) as ex:
        list(ex.map(one, need))
    log(f"search phase done in {time.perf_counter() - t0:.1f}s")
    return {r["program"]: r for r in load_records(path) if r.get("mode") == "search-only" and "search_s" in r}


def ratios(r: dict, paired: dict[str, float | None] | None = None) -> dict:
    """The row's ratios. ``paired`` (a column key -> the returned result's time over that contender's, round by
    round, :meth:`Contenders.ratio`) replaces the quotient of the two medians where given: timed in the same rounds,
    a drift of the clocks cancels in each round's ratio (kept as ``ratio_of``: "paired" or "medians")."""
    ours = r.get("returned_us")
    paired = {k: v for k, v in (paired or {}).items() if v}
    best_key = min((k for k in ("eager_us", "compile_us") if r.get(k)), key=lambda k: r[k], default=None)
    div = lambda a, b: a / b if a and b else None  # noqa: E731
    vs = lambda k: (paired.get(k) or div(ours, r.get(k))) if k else None  # noqa: E731
    bar = max(x for x in (0.8 * (r.get("compile_us") or 0), 1.1 * (r.get("copy_floor_us") or 0)))
    return {"vs_best_torch": vs(best_key), "vs_compile": vs("compile_us"),
            "vs_floor": div(ours, r.get("copy_floor_us")), "vs_library": vs("library_us"),
            "ratio_of": "paired" if paired else "medians",
            "target_us": bar or None, "meets_target": bool(ours and bar and ours <= bar)}


# ----------------------------------------------------------------------------------- tables
def fmt(x: Any, nd: int = 1) -> str:
    return "—" if x is None else f"{x:.{nd}f}"


def gpu_table(rows: list[dict]) -> str:
    head = ("| program | dtype | rel err | superopt. s | **returned µs** | eager | torch.compile | max-autotune | "
            "library | copy floor | vs best torch | vs compile | vs floor | target µs | returned | ρ (variants) |")
    out = [head, "|" + "---|" * 16]
    for r in rows:
        if "error" in r:
            out.append(f"| {r['program']} | {r.get('dtype', '')} | failed: {r['error'][:150]} |" + " |" * 13)
            continue
        win = returned_label(r)
        lib = "—" if r.get("library_us") is None else f"{r['library_us']:.1f} ({r['library']})"
        out.append(f"| {r['program']} | {r['dtype']} | {r['rel_err']:.1e} | {r['superoptimize_s']:.0f} | "
                   f"**{fmt(r['returned_us'])}** | {fmt(r['eager_us'])} | {fmt(r['compile_us'])} | "
                   f"{fmt(r['max_autotune_us'])} | {lib} | {fmt(r['copy_floor_us'])} | {fmt(r['vs_best_torch'], 2)} | "
                   f"{fmt(r['vs_compile'], 2)} | {fmt(r['vs_floor'], 2)} | {fmt(r['target_us'])}"
                   f"{'' if r['meets_target'] else ' (missed)'} | {win} | {rho_text(r)} |")
    ok = [r for r in rows if "error" not in r and r.get("vs_compile")]
    if ok:
        gm = math.exp(sum(math.log(r["vs_compile"]) for r in ok) / len(ok))
        wins = sum(1 for r in ok if not r.get("is_program") and not r.get("is_library"))
        libs = sum(1 for r in ok if r.get("is_library"))
        le1 = sum(1 for r in ok if r["vs_best_torch"] is not None and r["vs_best_torch"] <= 1.0)
        met = sum(1 for r in ok if r["meets_target"])
        out.append("")
        out.append(f"{len(ok)} programs timed ({len(rows) - len(ok)} failed or untimed): geometric mean "
                   f"**{gm:.3f}x torch.compile**; a μGraph won on **{wins}**, a library kernel on {libs}, the program "
                   f"itself on {len(ok) - wins - libs}; "
                   f"{le1} at <= 1.00x the better of eager and torch.compile; {met} meet 0.80x compile or 1.10x floor; "
                   f"worst rel err {max(r['rel_err'] for r in ok):.1e}.")
    out.append(rank_summary(rows))
    return "\n".join(out)


def returned_label(r: dict) -> str:
    """What the "returned" column says: ``μGraph``, ``library (sdpa)``, ``program (torch.compile)``."""
    if r.get("is_library"):
        return f"library ({r.get('winner')})"
    win = "program" if r.get("is_program") else "μGraph"
    return win + (f" ({r['winner']})" if r.get("winner") and r.get("winner") != "μGraph" else "")


def rho_text(r: dict) -> str:
    n = len(r.get("rank_pairs") or [])
    return "—" if r.get("rho") is None else f"{r['rho']:.2f} ({n})"


def rank_summary(rows: list[dict]) -> str:
    """The cost model's ranking over the suite: pooled Spearman rho of every timed variant, and the mean of the
    programs' own (weighted by their variants), from the records' ``rank_pairs``."""
    from mirage_lab.pipeline.ranking import pooled_spearman

    groups = [[tuple(p) for p in r["rank_pairs"]] for r in rows if "error" not in r and r.get("rank_pairs")]
    if not groups:
        return "Cost model ranking: no program had timed variants (no rho)."
    s = pooled_spearman(groups)
    return (f"Cost model ranking (Spearman rho, estimate vs measured, timed variants): pooled **{fmt(s['pooled'], 2)}** "
            f"over {s['pairs']} variants of {len(groups)} programs; mean within a program {fmt(s['mean'], 2)} "
            f"({s['programs']} programs with a ranking); target >= 0.8.")


def search_table(rows: list[dict]) -> str:
    out = ["| program | kind | dtype | config | README search s | cap s | first candidate s | search s | candidates | "
           "result |", "|" + "---|" * 10]
    for r in rows:
        if r.get("candidates"):
            res = "found"
        elif r.get("cancelled"):
            res = "none before the stop"
        else:
            res = "none (search ended)" if "search_s" in r else f"failed: {r.get('error', '')[:100]}"
        out.append(f"| {r['program']} | {r.get('kind')} | {r.get('dtype')} | {r.get('config')} | "
                   f"{fmt(r.get('readme_search_s'), 0)} | {fmt(r.get('cap_s'), 0)} | {fmt(r.get('first_candidate_s'))} | "
                   f"{fmt(r.get('search_s'))} | {r.get('candidates', 0)} | {res} |")
    found = sum(1 for r in rows if r.get("candidates"))
    out += ["", f"{found} of {len(rows)} programs yield a candidate within their limit."]
    return "\n".join(out)


# ----------------------------------------------------------------------------------- main
def list_programs() -> str:
    lines = []
    for p in suite.PROGRAMS:
        cfg = f"config={p.config!r}" + (f", search_seconds={p.search_seconds:g}" if p.search_seconds else "")
        lines.append(f"{p.name:48s} {p.dtype:9s} {p.phase:8s} {p.shapes_text():42s} [{cfg}] {p.source}")
    return "\n".join(lines) + f"\n{len(suite.PROGRAMS)} programs"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--list", action="store_true", help="one line per program (name, dtype, phase, shapes, settings, "
                                                        "model); no GPU needed")
    ap.add_argument("--only", default=None, help="comma-separated names or globs (default: every program)")
    ap.add_argument("--resume", type=Path, default=None, help="JSONL results file: appended as each program "
                                                              "finishes; programs already in it are skipped")
    ap.add_argument("--retry-failed", action="store_true", help="with --resume: run again the programs whose record "
                                                                "is an error")
    ap.add_argument("--out", type=Path, default=None, help="write the markdown table here")
    ap.add_argument("--search-only", action="store_true", help="search only (tune=False; CPU is enough)")
    ap.add_argument("--tune-seconds", type=float, default=60.0, help="superoptimize's tune_seconds (README default 60)")
    ap.add_argument("--search-cap", type=float, default=None,
                    help="stop every search after this many seconds (the README's settings search some programs to "
                         "the end); recorded in each row")
    ap.add_argument("--skip-max-autotune", action="store_true",
                    help="leave torch.compile's max-autotune column empty (its tuning takes minutes per program)")
    ap.add_argument("--workers", type=int, default=None, help="search workers (default: the search's own)")
    ap.add_argument("--dump", type=Path, default=None,
                    help="GPU runs: write the tuner's row per variant and the candidates per program into this folder")
    ap.add_argument("--search-phase-only", action="store_true",
                    help="with --search-jobs: run the parallel search phase, then stop (the GPU runs come later, "
                         "reading the cache)")
    ap.add_argument("--search-jobs", type=int, default=1,
                    help="GPU runs: first search this many programs at once, in processes of their own (--search-only "
                         "with --workers W each), filling the persistent cache; each program's superoptimize then "
                         "finds its search there and tunes. Its row adds the search phase's seconds. The search's "
                         "result is the same as in one process (the cache key holds every result-changing setting)")
    a = ap.parse_args(argv)

    def log(msg: str) -> None:
        print(msg, flush=True)

    if a.list:
        print(list_programs())
        return 0
    progs = suite.select(a.only)
    mode = "search-only" if a.search_only else "gpu"
    done = [r for r in load_records(a.resume) if r.get("mode") == mode]  # one file may hold both kinds of run
    keep = {r["program"] for r in done if not (a.retry_failed and "error" in r)}
    settings = {} if a.workers is None else {"workers": a.workers}
    if not a.search_only:
        import torch

        if not torch.cuda.is_available():
            print("suite_bench needs a CUDA GPU (or --search-only, or --list)", file=sys.stderr)
            return 2
        log(f"{datetime.date.today()} {torch.cuda.get_device_name()} torch {torch.__version__}")
    todo = [p for p in progs if p.name not in keep]
    log(f"{len(progs)} programs selected, {len(progs) - len(todo)} already in {a.resume}, {len(todo)} to run")
    searched: dict[str, dict] = {}
    if not a.search_only and a.search_jobs > 1 and todo:
        searched = search_phase(todo, a, log)
        if a.search_phase_only:
            return 0
    for i, p in enumerate(todo, 1):
        log(f"== [{i}/{len(todo)}] {p.name} ({p.dtype}, {p.shapes_text()}; {p.source})")
        append_record(a.resume, {"program": p.name, "mode": mode, "dtype": p.dtype, "kind": p.kind, "started": True})
        t0 = time.perf_counter()
        try:
            cap = a.search_cap
            if p.name in searched and not searched[p.name].get("candidates"):
                # the search phase found nothing within its cap, and a search cut short that found nothing is not
                # cached: search again only briefly, so the program races alone (the row says so)
                cap = NOTHING_FOUND_CAP_S
                log(f"  the search phase found no candidate: searching again for {cap:.0f} s only")
            rec = (search_only(p, a.search_cap, settings, log) if a.search_only
                   else run_gpu(p, a.tune_seconds, cap, settings, log, not a.skip_max_autotune, a.dump))
            if p.name in searched:  # the search ran in the search phase: its numbers, and its seconds counted in
                s_rec = searched[p.name]
                rec["search_phase"] = {k: s_rec.get(k) for k in ("search_s", "first_candidate_s", "candidates",
                                                                  "states", "cancelled", "total_s", "error")}
                rec["search_s"] = s_rec.get("search_s")
                rec["first_candidate_s"] = s_rec.get("first_candidate_s")
                rec["candidates"] = s_rec.get("candidates", 0)
                if rec.get("superoptimize_s") is not None and s_rec.get("total_s") is not None:
                    rec["superoptimize_s"] += s_rec["total_s"]
        except Exception as e:
            traceback.print_exc()
            rec = {"program": p.name, "dtype": p.dtype, "kind": p.kind,
                   "mode": mode, "error": f"{type(e).__name__}: {e}"}
        rec["wall_s"] = time.perf_counter() - t0
        log(f"  done in {rec['wall_s']:.1f}s" + (f": {rec['error'][:200]}" if "error" in rec else ""))
        done = [r for r in done if r["program"] != p.name] + [rec]
        append_record(a.resume, rec)
        if not a.search_only:
            import torch

            torch._dynamo.reset()
            gc.collect()
            torch.cuda.empty_cache()
    rows = table_rows(done, {p.name for p in progs}, whole_file=a.resume is not None)
    md = search_table(rows) if a.search_only else gpu_table(rows)
    print(md, flush=True)
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(md + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
