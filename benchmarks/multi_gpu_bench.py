"""Issue 23: the suite's tuning spread over 1, 2, 4, 8 GPUs of one host; speed-up per GPU, winners, calibration.

For each N (default: 1, 2, 4, 8 up to ``torch.cuda.device_count()``) a fresh local cluster of N
worker processes, one per GPU (``mirage_lab.pipeline.distributed.local_gpu_cluster``: resource
``GPU=1``, ``CUDA_VISIBLE_DEVICES`` pinned), tunes every selected suite program with
``autotune_on_cluster``. The candidates are the ones ``superoptimize`` would tune: the search's result
from the persistent cache (fill it first with ``suite_bench.py --search-only``; a program not in it is
searched here, outside the timed part), shortlisted to ``--max-candidates``. Each N compiles into a
kernel cache of its own (and torch.compile into an inductor cache of its own), so no N reuses another's
compiles. Printed per N: the tuning wall time (all programs), the speed-up over N=1 and per GPU against
linear (target >= 0.8), whether each program's winner is N=1's, and each GPU's calibration times.

    python benchmarks/multi_gpu_bench.py --only 'llama*' --gpus 1,2,4 --out multi_gpu.md
    python benchmarks/multi_gpu_bench.py --only rmsnorm_llama3_8b_decode --workers-share-gpu 2 --kill-one

``--workers-share-gpu K`` runs K workers on each GPU (on a one-GPU machine: the protocol and the fault
handling, not a speed-up). ``--kill-one`` kills one GPU worker (``os._exit``) after the first variant
result of each program's run with N >= 2 workers, and checks that every variant it held was measured
by another (the report's ``cluster.moved``).
"""
from __future__ import annotations

import argparse
import datetime
import json
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import suite  # noqa: E402  (benchmarks/suite)


def candidates_of(p: suite.SuiteProgram, max_candidates: int, log, search_cap: float | None = None,
                  workers: int | None = None) -> tuple[Any, list]:
    """The program and the shortlist superoptimize would tune (the search from the persistent cache)."""
    from mirage_lab.pipeline import shortlist

    program = p.build()
    t0 = time.perf_counter()
    secs = p.search_seconds if search_cap is None else min(p.search_seconds or search_cap, search_cap)
    best = program.superoptimize(p.config, tune=False, search_seconds=secs, progress=False,
                                 **({"workers": workers} if workers else {}))
    res = best.search_result
    picks = shortlist(res.candidates, max_candidates) or list(range(min(max_candidates, len(res.candidates))))
    log(f"  {p.name}: {len(res.candidates)} candidates ({time.perf_counter() - t0:.1f} s, cache or search), "
        f"tuning {len(picks)}")
    return program, [res.candidates[i] for i in picks]


def winner_tag(rep: Any) -> str:
    c = rep.chosen
    return "none" if c is None else c.variant.tag if rep.winner == "μGraph" else c.lowering


def killer(client: Any, kill: bool, log):
    """An ``on_event`` that, when ``kill``, ends one GPU worker's process after the first variant result."""
    from mirage_lab.pipeline.autotune import VariantDone
    from mirage_lab.pipeline.distributed import gpu_workers, kill_worker

    state = {"done": not kill, "victim": None}

    def on_event(ev: Any) -> None:
        if state["done"] or not isinstance(ev, VariantDone):
            return
        workers = gpu_workers(client)
        if len(workers) < 2:
            return
        state["done"], state["victim"] = True, workers[-1]
        log(f"    killing {workers[-1]} (os._exit) after {ev.done} variants")
        kill_worker(client, workers[-1])

    return on_event, state


def run_n(n_gpus: int, per_gpu: int, work: list, a: argparse.Namespace, log, scratch: Path | None = None) -> dict:
    """Every program tuned on a fresh cluster of ``n_gpus`` GPUs (``per_gpu`` workers each).

    ``scratch``: the kernel and inductor caches' folder (default: a new empty one, so nothing is reused)."""
    scratch = scratch or Path(tempfile.mkdtemp(prefix=f"multi_gpu_n{n_gpus}_"))
    fixed = {"stop_margin": None, "max_variants": a.fixed_work} if a.fixed_work else {}
    env = {"TORCHINDUCTOR_CACHE_DIR": str(scratch / "inductor")}
    t0 = time.perf_counter()
    out: dict[str, Any] = {"gpus": n_gpus, "workers": n_gpus * per_gpu, "programs": {}}
    try:
        _tune_on_cluster(n_gpus, per_gpu, work, a, log, scratch, env, fixed, out, t0)
    except TimeoutError as e:   # dask's close of the cluster: what was measured is kept
        if "tune_s" not in out:
            raise
        log(f"   N={n_gpus}: the cluster's close timed out ({e!r}); its results are kept")
    return out


def _tune_on_cluster(n_gpus: int, per_gpu: int, work: list, a: argparse.Namespace, log, scratch: Path,
                     env: dict, fixed: dict, out: dict, t0: float) -> None:
    from dask.distributed import Client

    from mirage_lab.pipeline.distributed import autotune_on_cluster, local_gpu_cluster

    with local_gpu_cluster(list(range(n_gpus)), per_gpu=per_gpu, env=env) as lc, Client(lc) as client:
        client.wait_for_workers(n_gpus * per_gpu, timeout=300)
        out["cluster_start_s"] = time.perf_counter() - t0
        tune_total = 0.0

        def tune(item: tuple) -> tuple:
            p, program, cands = item
            on_event, kstate = killer(client, a.kill_one and n_gpus * per_gpu >= 2 and a.concurrent <= 1, log)
            t1 = time.perf_counter()
            try:
                rep = autotune_on_cluster(program, cands, client, tune_seconds=a.tune_seconds, workers=a.compile_workers,
                                          unit_variants=a.unit_variants, on_event=on_event,
                                          cache_dir=scratch / "kernels", **fixed)
            except Exception as e:
                traceback.print_exc()
                return p, None, e, kstate, time.perf_counter() - t1
            return p, rep, None, kstate, time.perf_counter() - t1

        if a.concurrent > 1:   # several programs tuned at once, as for the layers of a model: the wall of the batch
            from concurrent.futures import ThreadPoolExecutor

            t_batch = time.perf_counter()
            with ThreadPoolExecutor(a.concurrent) as ex:
                outcomes = list(ex.map(tune, work))
            batch_s = time.perf_counter() - t_batch
        else:
            outcomes, batch_s = [tune(item) for item in work], None
        for p, rep, err, kstate, secs in outcomes:
            if err is not None:
                out["programs"][p.name] = {"error": f"{type(err).__name__}: {err}"}
                continue
            tune_total += secs
            run = rep.cluster
            moved_vars = [i for m in run.moved for i in m.variants]
            rec = {"tune_s": secs, "winner": winner_tag(rep), "chosen_us": rep.chosen_us, "variants": len(rep.results),
                   "measured": sum(r.compile_s is not None for r in rep.results), "untried": rep.untried,
                   "compile_s_sum": sum(r.compile_s or 0.0 for r in rep.results),
                   "stop_reason": rep.stop_reason, "calibration": run.rows(), "warnings": run.calibration_warnings,
                   "moved_units": len(run.moved), "moved_variants": len(moved_vars),
                   "moved_measured": sum(rep.results[i].compile_s is not None for i in moved_vars),
                   "killed": kstate["victim"],
                   # the program's own lowerings: torch.compile's build (s; prewarm_s: a child process's part)
                   "program_lowerings": [(q.lowering, q.median_us, q.compile_s, q.prewarm_s) for q in rep.programs],
                   "timeline": run.timeline, "compiler_warmup": run.compiler_warmup}
            out["programs"][p.name] = rec
            builds = ", ".join(f"{q[0]} {q[2] or 0:.0f} s" + (f" (child {q[3]:.0f} s)" if q[3] else "")
                               for q in rec["program_lowerings"] if q[0] != "torch")
            log(f"    N={n_gpus}: {p.name} {secs:.1f} s, winner {rec['winner']} ({rep.chosen_us or float('nan'):.2f} µs), "
                f"built {builds}, "
                f"{rec['measured']}/{rec['variants']} measured, compiles {rec['compile_s_sum']:.0f} s summed, "
                f"stop: {rec['stop_reason']}"
                + (f"; killed {kstate['victim']}: {len(run.moved)} units moved, "
                   f"{rec['moved_measured']}/{len(moved_vars)} of their variants measured elsewhere"
                   if kstate["victim"] else ""))
        out["tune_s"] = tune_total if batch_s is None else batch_s
        # how busy the GPUs were, over every program's GPU tasks (starts, units), and where they waited: for a
        # unit's compile, or for anything else (the caller, starts)
        from mirage_lab.pipeline.distributed import gpu_timeline_summary

        out["gpu_timeline"] = gpu_timeline_summary([e for x in out["programs"].values() for e in x.get("timeline", [])])
        out["gpu_task_s"] = {w: v["busy_s"] for w, v in out["gpu_timeline"].items()}
        log(f"   N={n_gpus}: GPU tasks per worker " + ", ".join(f"{v:.1f} s" for v in out["gpu_task_s"].values())
            + f" of {out['tune_s']:.1f} s")
        warm = {w: v for x in out["programs"].values() for w, v in x.get("compiler_warmup", {}).items() if v.get("ran")}
        if warm:
            log(f"   N={n_gpus}: torch.compile warm-up per worker: " + ", ".join(
                f"{w} {v.get('s', 0):.1f} s" + (f" ({v['error']})" if v.get("error") else "") for w, v in warm.items()))
        for w, v in out["gpu_timeline"].items():
            log(f"   N={n_gpus}: {w}: busy {v['busy_s']:.1f} s, idle {v['idle_s']:.1f} s of a {v['window_s']:.1f} s window, "
                f"{v['waiting_compile_s']:.1f} s of it waiting on a unit's compile")


def table(runs: list[dict], device: str) -> str:
    base = runs[0]
    lines = [f"Tuning wall time on {device}, {datetime.date.today()} (benchmarks/multi_gpu_bench.py)", "",
             "| GPUs | workers | tuning s | speed-up vs 1 | per GPU vs linear | variants measured | measured / s | "
             "throughput vs 1 | per GPU vs linear | winners as N=1 | GPU tasks s per worker |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"]

    def rate(r: dict) -> float:   # the tuning stops adaptively or at tune_seconds: N GPUs may measure more
        return sum(x.get("measured", 0) for x in r["programs"].values()) / r["tune_s"] if r.get("tune_s") else float("nan")

    for r in runs:
        sp = base["tune_s"] / r["tune_s"] if r.get("tune_s") else float("nan")
        tp = rate(r) / rate(base)
        same = [n for n, x in r["programs"].items() if x.get("winner") == base["programs"].get(n, {}).get("winner")]
        lines.append(f"| {r['gpus']} | {r['workers']} | {r.get('tune_s', float('nan')):.1f} | {sp:.2f}× | "
                     f"{sp / r['gpus']:.2f} | {sum(x.get('measured', 0) for x in r['programs'].values())} | "
                     f"{rate(r):.3f} | {tp:.2f}× | {tp / r['gpus']:.2f} | {len(same)}/{len(r['programs'])} | "
                     + " / ".join(f"{v:.0f}" for v in r.get("gpu_task_s", {}).values()) + " |")
    lines += ["", "Calibration (µs per launch, median of 50 batches of 10 after 0.2 s of warm-up; copy 256 MiB, fp16 matmul 2048³), the largest run:", "",
              "| worker | device | copy µs | matmul µs |", "|---|---|---:|---:|"]
    last = runs[-1]
    first_prog = next((x for x in last["programs"].values() if "calibration" in x), None)
    for row in (first_prog or {}).get("calibration", []):
        lines.append(f"| {row['worker']} | {row['device']} | {row.get('copy_us', '-')} | {row.get('matmul_us', '-')} |")
    warned = sorted({w for r in runs for x in r["programs"].values() for w in x.get("warnings", [])})
    lines += ["", "Calibration warnings: " + ("; ".join(warned) if warned else "none")]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default=None, help="comma-separated suite names or globs (default: every program)")
    ap.add_argument("--gpus", default=None, help="comma-separated GPU counts (default 1,2,4,8 up to the devices)")
    ap.add_argument("--workers-share-gpu", type=int, default=1, metavar="K", help="K worker processes per GPU")
    ap.add_argument("--kill-one", action="store_true", help="kill one GPU worker mid-run (N >= 2 workers)")
    ap.add_argument("--search-cap", type=float, default=None, help="cap each program's search_seconds (seconds)")
    ap.add_argument("--tune-seconds", type=float, default=600.0, help="tune_seconds ceiling per program")
    ap.add_argument("--max-candidates", type=int, default=8, help="superoptimize's max_candidates")
    ap.add_argument("--unit-variants", type=int, default=4, help="variants per unit of work")
    ap.add_argument("--compile-workers", type=int, default=None,
                    help="compile processes per GPU worker (default: the host's cores / GPUs)")
    ap.add_argument("--fixed-work", type=int, default=None, metavar="K",
                    help="the same work at every N: the first K planned variants of each program, all measured "
                         "(no adaptive stop; keep --tune-seconds above what N=1 needs)")
    ap.add_argument("--shared-kernels", action="store_true",
                    help="every N reuses one kernel and inductor cache, filled by an untimed pass on the most "
                         "GPUs first: times the GPUs' share of tuning, as a team sharing one cache sees it")
    ap.add_argument("--concurrent", type=int, default=1, metavar="K",
                    help="tune K programs at once on the cluster (the wall of the whole batch is timed); "
                         "each run's reference worker, which races the program's own lowerings, is spread")
    ap.add_argument("--search-workers", type=int, default=None,
                    help="search processes per program (default: one per core)")
    ap.add_argument("--out", type=Path, default=None, help="write the markdown table here")
    ap.add_argument("--json", type=Path, default=None, help="write every record here")
    a = ap.parse_args(argv)

    def log(msg: str) -> None:
        print(msg, flush=True)

    import torch

    # device_count asks NVML: this process holds no CUDA context while the searches below fork their workers
    have = torch.cuda.device_count()
    if not have:
        print("multi_gpu_bench needs CUDA GPUs", file=sys.stderr)
        return 2
    counts = [int(x) for x in a.gpus.split(",")] if a.gpus else [n for n in (1, 2, 4, 8) if n <= have]
    if max(counts) > have:
        print(f"--gpus asks for {max(counts)} GPUs; this machine has {have}", file=sys.stderr)
        return 2
    log(f"{datetime.date.today()} {have} GPUs, torch {torch.__version__}; N = {counts}, {a.workers_share_gpu} worker(s) per GPU")
    work = []
    for p in suite.select(a.only):
        try:
            program, cands = candidates_of(p, a.max_candidates, log, a.search_cap, a.search_workers)
        except Exception as e:   # a search that finds nothing within the cap: that program is left out, said so
            log(f"  {p.name}: left out ({type(e).__name__}: {str(e)[:160]})")
            continue
        if cands:
            work.append((p, program, cands))
    if not work:
        print("no selected program has candidates to tune (every search found nothing)", file=sys.stderr)
        return 1
    device = f"{have}× {torch.cuda.get_device_name()}"
    runs = []
    shared = Path(tempfile.mkdtemp(prefix="multi_gpu_shared_")) if a.shared_kernels else None
    if shared is not None:
        log(f"== warm-up pass (untimed) on N={max(counts)}: fills the shared kernel cache")
        run_n(max(counts), a.workers_share_gpu, work, a, log, scratch=shared)
    for n in counts:
        log(f"== N={n}")
        runs.append(run_n(n, a.workers_share_gpu, work, a, log, scratch=shared))
        log(f"   N={n}: tuning {runs[-1].get('tune_s', float('nan')):.1f} s (cluster start {runs[-1]['cluster_start_s']:.1f} s)")
        if a.json:   # after each N, so a run cut short keeps what it measured
            a.json.write_text(json.dumps(runs, indent=1, default=str))
    mode = ("fixed work: the first %d planned variants of each program, all measured" % a.fixed_work
            if a.fixed_work else "adaptive stop (the work differs between N)")
    if a.concurrent > 1:
        mode += f"; {a.concurrent} programs tuned at once"
    mode += "; compiles " + ("from one shared, pre-filled kernel cache" if shared else "cold at every N")
    device += f" ({mode})"
    text = table(runs, device)
    print(text)
    if a.out:
        a.out.write_text(text + "\n")
    if a.json:
        a.json.write_text(json.dumps(runs, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
