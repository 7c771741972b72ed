"""End-to-end benchmark: ``best = program.superoptimize()`` from scratch, then ``best(inputs)``, as a user runs it.

For each seed program, in one process: the search and the tuning (wall clock, from
scratch: pass ``--cache`` a fresh folder), a check of the returned kernel against a float64
reference on fresh inputs, then timed the same way as torch eager, torch in a CUDA graph
and torch.compile (plain and in a CUDA graph): device time with CUDA events over inputs
rotated so weights come from HBM (``runtime.profile.time_calls``), and the wall time of one
synchronous call (``best(inputs); torch.cuda.synchronize()``). Floor = bytes / 3.0 TB/s.

    python benchmarks/e2e_bench.py                                   # every program
    python benchmarks/e2e_bench.py --programs rmsnorm_linear_16x4096x4096 --tune-seconds 45
    python benchmarks/e2e_bench.py --out results/                    # JSON + markdown there
"""
from __future__ import annotations

import argparse
import datetime
import json
import sys
import time
import traceback
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import mirage_lab as mi  # noqa: E402
from mirage_lab import examples as ex  # noqa: E402
from mirage_lab.pipeline import TuneFinished, TuneStarted, VariantDone, measuring_inputs  # noqa: E402
from mirage_lab.runtime import profile as prof  # noqa: E402
from mirage_lab.search import CandidateFound, Finished, Progress  # noqa: E402

from call_path_bench import host_us, wall_sync_us  # noqa: E402  (this folder: one way to time a call)

PROGRAMS = {  # name: (program, search config, search seconds (None: to the end))
    "rmsnorm_linear_16x4096x4096": (lambda: ex.rms_norm_linear_program(16, 4096, 4096), None, None),
    "rmsnorm_linear_2x4096x6144": (lambda: ex.rms_norm_linear_program(2, 4096, 6144), None, None),
    "gated_mlp_8x4096x4096": (lambda: ex.gated_mlp_program(8, 4096, 4096), None, 60.0),
    "gqa_2x256x64x4096": (lambda: ex.gqa_program(2, 256, 64, 4096), "attention", 30.0),
    "gqa_decode_64x1x128x4096": (lambda: ex.gqa_program(64, 1, 128, 4096), "attention", 90.0),
}


def copy_floor_us(nbytes: int) -> float:
    """Device µs of one device-to-device copy moving ``nbytes`` in all (half read, half written).

    The measured floor of *one kernel* moving the program's bytes: unlike bytes / 3.0 TB/s
    (the rate of a 1 GiB copy), it includes what a kernel of this size pays to start, ramp up
    and drain. Sources rotate over copies larger than 2 x L2, as for every timed call.
    """
    half = max(1, nbytes // 4)  # float16 elements in half the bytes
    src = torch.empty(half, dtype=torch.float16, device="cuda")
    dst = torch.empty(half, dtype=torch.float16, device="cuda")
    sets = prof.make_copies([src], prof.rotation_copies([src]))
    return prof.time_calls([lambda s=s: dst.copy_(s) for (s,) in sets], name="copy floor", repeats=300).median_us


_READ_SRC = """
@cuda.jit(fastmath=True)
def k(w, out):
    t = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    step = cuda.gridDim.x * cuda.blockDim.x * 4
    acc = 0
    for j in range(t * 4, w.shape[0], step):
        v = ldg4(w, j)
        acc ^= v[0] ^ v[1] ^ v[2] ^ v[3]
    out[t] = acc
"""


def read_floor_us(nbytes: int) -> float:
    """Device µs of the fastest plain read of ``nbytes`` (16-byte loads, grid-strided, best of 3 launch shapes).

    What reading the program's bytes costs a numba kernel on this GPU, nothing computed or
    written: on the H100 a 32 MB read takes 15.2 µs at best (benchmarks/probes/splitk_read_bench.py
    --flat sweeps 35 shapes), while a copy moving 16 MB in and 16 MB out takes 12.8 µs.
    """
    from mirage_lab.gpu.numba_compat import cuda
    from probes.splitk_read_bench import compiled  # the read sweeps' kernel builder (benchmarks/probes)

    k = compiled(_READ_SRC, "<read floor>")
    w0 = torch.empty(max(4, nbytes // 16 * 4), dtype=torch.int32, device="cuda")
    src = [cuda.as_cuda_array(w) for (w,) in prof.make_copies([w0], prof.rotation_copies([w0]))]
    out = cuda.as_cuda_array(torch.empty(264 * 1024, dtype=torch.int32, device="cuda"))
    return min(prof.time_calls([lambda w=w: k[b, t](w, out) for w in src], name="read floor", repeats=300).median_us
               for b, t in ((264, 512), (528, 256), (132, 1024)))


def process_state(log, xs) -> None:
    """What else this process runs after superoptimize (threads, child processes, load): a slow wall explained."""
    import multiprocessing as mp
    import os
    import threading

    kids = mp.active_children()
    try:
        import psutil

        me = psutil.Process()
        busy = [(c.pid, c.name(), c.cpu_percent(interval=0.2)) for c in me.children(recursive=True)]
    except Exception as e:  # psutil missing: the counts still say enough
        busy = [f"psutil: {e}"]
    tiny = wall_sync_us(lambda: xs[0].add_(0))
    log(f"  process: threads {[t.name for t in threading.enumerate()]}; mp children {len(kids)}; all children "
        f"{busy[:20]}; load {os.getloadavg()}; tiny torch op + sync {tiny:.1f} µs")


def spearman(xs: list[float], ys: list[float]) -> float | None:
    if len(xs) < 3:
        return None
    rank = lambda v: {i: r for r, i in enumerate(sorted(range(len(v)), key=lambda i: v[i]))}  # noqa: E731
    rx, ry = rank(xs), rank(ys)
    n = len(xs)
    return 1 - 6 * sum((rx[i] - ry[i]) ** 2 for i in range(n)) / (n * (n * n - 1))


def run(name: str, tune_seconds: float, search_seconds: float | None, log) -> dict:
    make, config, default_search_s = PROGRAMS[name]
    program = make()
    marks: dict[str, float] = {}
    found: list[tuple[float, int, int]] = []   # (seconds, candidate index, states so far): when the search found what
    t0 = time.perf_counter()

    def on_event(ev) -> None:
        now = time.perf_counter() - t0
        if isinstance(ev, Progress):
            marks["states"] = ev.stats.states
            if ev.stats.states and "first_state_s" not in marks:
                marks["first_state_s"] = now
        elif isinstance(ev, CandidateFound):
            found.append((round(now, 2), ev.index, int(marks.get("states", 0))))
        elif isinstance(ev, Finished):
            marks["search_s"] = now
            log(f"  search done at {now:.1f}s: {ev.stats.candidates} candidates, {ev.stats.states} states")
        elif isinstance(ev, TuneStarted):
            marks["tune_start"] = now
            log(f"  tuning {ev.variants} variants of {ev.candidates} candidates, {ev.workers} compile workers, "
                f"inputs {ev.input_policy}")
        elif isinstance(ev, VariantDone):
            r = ev.result.row()
            err = "—" if r["rel_err"] is None else f"{r['rel_err']:.1e}"
            log(f"    [{ev.done}/{ev.total} {ev.elapsed:5.1f}s] {ev.result.variant.tag:44s} est {r['estimate_us']:6.1f} "
                f"meas {r['median_us']} err {err} compile {r['compile_s']}s {(r['error'] or '')[:90]}")
        elif isinstance(ev, TuneFinished):
            marks["tune_end"] = now

    best = program.superoptimize(config, tune_seconds=tune_seconds, baselines=False, on_event=on_event,
                                 search_seconds=search_seconds if search_seconds is not None else default_search_s)
    total = time.perf_counter() - t0
    rep = best.report
    log(f"  superoptimize: {total:.1f}s in all; returned {best.winner}; best μGraph "
        f"{rep.best.variant.tag if rep.best else None} ({rep.best.median_us if rep.best else None} µs); "
        f"stop: {rep.stop_reason}")

    # fresh inputs (another seed), checked against float64, then every contender timed the same way
    m = measuring_inputs(program, seed=1)
    xs = m.inputs
    outs = best(inputs=xs, poison=True)
    rel = max(prof.relative_error(o, r) for o, r in zip(outs, m.reference))
    sets = prof.make_copies(xs, prof.rotation_copies(xs))
    call_dev = prof.time_calls([lambda s=s: best(inputs=s) for s in sets], name="call", repeats=300)
    graph_dev = prof.time_calls([lambda s=s: best(inputs=s, graph=True) for s in sets], name="graph", repeats=300)
    wall = wall_sync_us(lambda: best(inputs=xs))
    wall_graph = wall_sync_us(lambda: best(inputs=xs, graph=True))
    # the same calls' device time on these (unrotated, partly L2-resident) inputs, and the wall over rotated
    # inputs (whose device time is call_dev's): what a synchronous call adds, both ways
    warm_dev = prof.time_calls([lambda: best(inputs=xs)], name="call, unrotated", repeats=300)
    rot = iter(range(10**9))
    wall_rot = wall_sync_us(lambda: best(inputs=sets[next(rot) % len(sets)]))
    log(f"  wall/sync over rotated inputs {wall_rot:.1f} µs (device {call_dev.median_us:.1f}: +{wall_rot - call_dev.median_us:.1f}); "
        f"unrotated {wall:.1f} µs (device {warm_dev.median_us:.1f}: +{wall - warm_dev.median_us:.1f})")
    process_state(log, xs)
    base = prof.profile_baselines(program, xs, repeats=300)
    fn = mi.runtime.to_torch_fn(program)
    wall_torch = wall_sync_us(lambda: fn(*xs))
    k = best.kernel
    idle_sync = wall_sync_us(lambda: None)
    module = getattr(k, "module", None)   # a μGraph's kernel module; the program or a library kernel has none
    breakdown = {"check_inputs": host_us(lambda: k.check_inputs(xs)),
                 "best_call": host_us(lambda: best(inputs=xs)), "graph_replay": host_us(lambda: best(inputs=xs, graph=True)),
                 "torch_eager": host_us(lambda: fn(*xs)), "idle_sync_wall": idle_sync}
    if module is not None:
        breakdown["module_run"] = host_us(lambda: module.run(xs))
    launchers = sorted({getattr(getattr(module, f"_launch_{i.name}").go, "__qualname__", "?")
                        for i in k.kernels}) if module is not None else [best.winner]
    log(f"  launch path: {launchers}")
    log("  host µs per call (no sync): " + ", ".join(f"{a} {b:.1f}" for a, b in breakdown.items()))
    rows = [r for r in rep.results if r.timings]
    corr = spearman([r.estimate.us for r in rows], [r.median_us for r in rows])
    res = {
        "program": name, "device": torch.cuda.get_device_name(), "search_s": marks.get("search_s"),
        "tune_s": rep.seconds, "total_s": total, "variants_timed": len(rows), "variants_total": len(rep.results),
        "variants_failed": sum(1 for r in rep.results if r.error), "input_policy": rep.input_policy,
        "chosen": rep.best.variant.tag if rep.best else None, "tuned_us": rep.best.median_us if rep.best else None,
        "returned": best.winner, "stop_reason": rep.stop_reason,
        "search_stop_reason": best.search_result.stop_reason if best.search_result else None,
        "first_state_s": marks.get("first_state_s"), "candidates_found": found,
        "programs": [p.row() for p in getattr(rep, "programs", [])],
        "rel_err": rel, "call_us": call_dev.median_us, "graph_us": graph_dev.median_us, "wall_sync_us": wall,
        "call_unrotated_us": warm_dev.median_us, "wall_sync_rotated_us": wall_rot,
        "wall_sync_graph_us": wall_graph, "torch_wall_sync_us": wall_torch,
        "torch_eager_us": base["torch_eager"].median_us, "torch_graph_us": base["torch_cuda_graph"].median_us,
        "compile_us": base["torch_compile"].median_us, "compile_graph_us": base["torch_compile_cuda_graph"].median_us,
        "floor_us": prof.floor_us(program), "copy_floor_us": copy_floor_us(
            sum(t.nbytes() for t in program.inputs) + sum(t.nbytes() for t in program.outputs)),
        "read_floor_us": read_floor_us(sum(t.nbytes() for t in program.inputs)),
        "estimate_vs_measured_spearman": corr,
        "tuning": rep.rows(), "host_breakdown_us": breakdown, "launch_path": launchers,
        "candidates": len(best.search_result.candidates),
    }
    log(f"  check rel err {rel:.2e}; call {call_dev.median_us:.1f} µs (graph {graph_dev.median_us:.1f}); wall/sync call "
        f"{wall:.1f} µs (graph {wall_graph:.1f}); torch eager {res['torch_eager_us']:.1f}, compile graph "
        f"{res['compile_graph_us']:.1f}, floor {res['floor_us']:.1f} (one-kernel copy of the bytes "
        f"{res['copy_floor_us']:.1f}, plain read of the inputs {res['read_floor_us']:.1f}); cost-model rank corr {corr}")
    return res


def table(rows: list[dict]) -> str:
    head = ("| program | search s | tune s | total s | chosen | rel err | **call µs** | graph=True µs | wall/sync call µs | "
            "torch eager | torch graph | torch.compile | torch.compile graph | floor | copy floor | read floor | "
            "call / compile graph | call / floor |")
    out = [head, "|" + "---|" * 18]
    for r in rows:
        if "error" in r:
            out.append(f"| {r['program']} | failed: {r['error'][:120]} |" + " |" * 16)
            continue
        f = lambda x: "—" if x is None else f"{x:.1f}"  # noqa: E731
        out.append(f"| {r['program']} | {f(r['search_s'])} | {f(r['tune_s'])} | {f(r['total_s'])} | {r['chosen']} | "
                   f"{r['rel_err']:.1e} | **{r['call_us']:.1f}** | {r['graph_us']:.1f} | {r['wall_sync_us']:.1f} | "
                   f"{r['torch_eager_us']:.1f} | {r['torch_graph_us']:.1f} | {r['compile_us']:.1f} | "
                   f"{r['compile_graph_us']:.1f} | {r['floor_us']:.1f} | {f(r.get('copy_floor_us'))} | "
                   f"{f(r.get('read_floor_us'))} | "
                   f"{r['call_us'] / r['compile_graph_us']:.2f} | "
                   f"{r['call_us'] / r['floor_us']:.2f} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--programs", default=",".join(PROGRAMS))
    ap.add_argument("--tune-seconds", type=float, default=60.0)
    ap.add_argument("--search-seconds", type=float, default=None, help="override every program's search limit")
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("e2e_bench needs a CUDA GPU", file=sys.stderr)
        return 2

    def log(msg: str) -> None:
        print(msg, flush=True)

    # No CUDA in this process before the first superoptimize, as in the README: a parent holding a
    # CUDA context makes the search spawn its workers instead of forking them (slower to start).
    log(f"{datetime.date.today()} torch {torch.__version__}")
    rows = []
    for name in a.programs.split(","):
        log(f"== {name}")
        try:
            rows.append(run(name, a.tune_seconds, a.search_seconds, log))
        except Exception as e:
            traceback.print_exc()
            rows.append({"program": name, "error": f"{type(e).__name__}: {e}"})
        if a.out:
            a.out.mkdir(parents=True, exist_ok=True)
            (a.out / "e2e_bench.json").write_text(json.dumps(rows, indent=1, default=str))
    log(f"{torch.cuda.get_device_name()}; copy {prof.measure_copy_tbps():.2f} TB/s")
    md = table(rows)
    print(md)
    if a.out:
        (a.out / "e2e_bench.md").write_text(md + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
