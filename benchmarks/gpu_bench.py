"""GPU benchmark: generated mirage_lab kernels against torch baselines, per program.

For each program: the memory floor (bytes / 3.0 TB/s), torch eager, torch under a CUDA
graph, torch.compile (eagerly called and under a CUDA graph), and the fastest of the
candidate μGraphs (device time by CUDA-graph replay with events; end-to-end Python call
time), with correctness (relative error against a float64 reference). All timed in one
process, the same way, with inputs rotated so weights come from HBM.

    python benchmarks/gpu_bench.py                       # every program, default candidates
    python benchmarks/gpu_bench.py --programs gqa_decode --candidates gqa_decode=found.json
    python benchmarks/gpu_bench.py --out results/        # JSON + markdown table written there

Candidate μGraphs: the hand-built fused ones of ``mirage_lab.examples`` with a few
grid/for-loop variants; ``--candidates NAME=FILE`` adds μGraphs saved with ``mi.save``
(e.g. search results) to program NAME.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import mirage_lab as mi  # noqa: E402
from mirage_lab.examples import (gated_mlp_fused, gated_mlp_program, gqa_flashdecoding, gqa_program,  # noqa: E402
                                 rms_norm_linear_fused, rms_norm_linear_program)
from mirage_lab.codegen import CodegenOptions  # noqa: E402
from mirage_lab.pipeline import select_fastest, with_block_dim, with_options  # noqa: E402  (the tuner's own: one definition)
from mirage_lab.runtime import profile as prof  # noqa: E402

# lowering variants measured for every candidate μGraph (speed only; results are identical)
OPTION_SETS = {
    "default": [CodegenOptions()],
    "sweep": [CodegenOptions(), CodegenOptions(max_stream_acc=64), CodegenOptions(pipeline_words=32)],
    "final": [CodegenOptions(), CodegenOptions(max_stream_acc=64), CodegenOptions(phase_words=64),
              CodegenOptions(mma=True), CodegenOptions(mma=True, pipeline_words=64)],
    # tensor-core streamed matmuls, without and with the next iteration's B tile prefetched into registers
    "mma": [CodegenOptions(mma=True), CodegenOptions(mma=True, pipeline_words=64)],
    # streamed W / staged X tiles loaded 1..4 iterations ahead (CodegenOptions.pipeline_depth)
    "depth": [CodegenOptions(mma=True, pipeline_words=64), CodegenOptions(mma=True, pipeline_words=64, pipeline_depth=2),
              CodegenOptions(mma=True, pipeline_words=64, pipeline_depth=3),
              CodegenOptions(mma=True, pipeline_words=64, pipeline_depth=4),
              CodegenOptions(mma=True, pipeline_words=128, pipeline_depth=4),
              CodegenOptions(pipeline_words=64, pipeline_depth=2), CodegenOptions(pipeline_words=128, pipeline_depth=4)],
    "wide": [CodegenOptions(pipeline_words=0), CodegenOptions(pipeline_words=32),
             CodegenOptions(pipeline_words=0, max_registers=128), CodegenOptions(pipeline_words=32, max_registers=168),
             CodegenOptions(pipeline_words=0, max_stream_acc=64)],
}


def _randn(scales: list[float]) -> Callable[[mi.KernelGraph, torch.Generator], list[torch.Tensor]]:
    def make(g: mi.KernelGraph, gen: torch.Generator) -> list[torch.Tensor]:
        return [(torch.randn(t.dims, generator=gen, device="cuda") * s).to(t.dtype.torch)
                for t, s in zip(g.inputs, scales)]
    return make


@dataclass
class Program:
    name: str
    program: Callable[[], mi.KernelGraph]
    candidates: Callable[[], list[mi.KernelGraph]]
    inputs: Callable[[mi.KernelGraph, torch.Generator], list[torch.Tensor]]
    target_us: float | None = None
    fma_best: Callable[[], tuple[mi.KernelGraph, CodegenOptions]] | None = None  # fastest FMA-path config measured


def programs() -> dict[str, Program]:
    """The benchmarked programs and their default candidate μGraphs (grid / for-loop variants)."""
    def rl(b, h, o, vs):  # (grid, forloop_range[, threads])
        return [with_block_dim(rms_norm_linear_fused(b, h, o, grid=v[0], forloop_range=v[1]), v[2]) if len(v) > 2
                else rms_norm_linear_fused(b, h, o, grid=v[0], forloop_range=v[1]) for v in vs]

    def gq(b, q, d, n, vs):  # (kv_splits, q_blocks, forloop_range[, threads])
        return [with_block_dim(gqa_flashdecoding(b, q, d, n, kv_splits=v[0], q_blocks=v[1], forloop_range=v[2]), v[3])
                if len(v) > 3 else gqa_flashdecoding(b, q, d, n, kv_splits=v[0], q_blocks=v[1], forloop_range=v[2])
                for v in vs]

    def mlp(vs):
        return [with_block_dim(gated_mlp_fused(8, 4096, 4096, grid=v[0], forloop_range=v[1]), v[2]) if len(v) > 2
                else gated_mlp_fused(8, 4096, 4096, grid=v[0], forloop_range=v[1]) for v in vs]

    return {p.name: p for p in [
        Program("rmsnorm_linear_16x4096x4096", lambda: rms_norm_linear_program(16, 4096, 4096),
                lambda: rl(16, 4096, 4096, [(128, 16), (256, 16), (128, 16, 256), (256, 16, 256), (128, 8, 256),
                                              (128, 16, 512), (128, 8, 512), (256, 16, 512)]),
                _randn([1.0, 1 / 64]), target_us=12.5,
                fma_best=lambda: (rl(16, 4096, 4096, [(128, 16, 256)])[0], CodegenOptions(max_stream_acc=64))),
        Program("rmsnorm_linear_2x4096x6144", lambda: rms_norm_linear_program(2, 4096, 6144),
                lambda: rl(2, 4096, 6144, [(192, 16), (192, 8), (384, 8), (192, 16, 256), (96, 16, 256), (192, 8, 256),
                                            (192, 8, 512), (192, 16, 512)]),
                _randn([1.0, 1 / 64]),
                fma_best=lambda: (rl(2, 4096, 6144, [(192, 8)])[0], CodegenOptions(phase_words=64))),
        Program("gqa_decode_64x1x128x4096", lambda: gqa_program(64, 1, 128, 4096),
                lambda: gq(64, 1, 128, 4096, [(8, 1, 4), (16, 1, 2), (8, 1, 8), (4, 1, 8), (4, 1, 4), (8, 1, 4, 256),
                                              (16, 1, 2, 256)]),
                _randn([1 / 128 ** 0.5, 0.5, 1.0]), target_us=49.0,
                fma_best=lambda: (gq(64, 1, 128, 4096, [(8, 1, 8)])[0], CodegenOptions())),
        Program("gqa_2x256x64x4096", lambda: gqa_program(2, 256, 64, 4096),
                lambda: gq(2, 256, 64, 4096, [(8, 16, 4)]),
                _randn([1 / 8, 0.5, 1.0]),
                fma_best=lambda: (gq(2, 256, 64, 4096, [(8, 16, 4)])[0], CodegenOptions())),
        Program("gated_mlp_8x4096x4096", lambda: gated_mlp_program(8, 4096, 4096),
                lambda: mlp([(256, 16), (128, 16), (128, 16, 256), (256, 16, 256), (256, 8, 256), (128, 16, 512),
                             (128, 8, 512), (256, 16, 512)]),
                _randn([1.0, 1 / 64, 1 / 64]),
                fma_best=lambda: (mlp([(256, 16)])[0], CodegenOptions())),
    ]}


def fmt_us(x: float | None) -> str:
    return "—" if x is None or x != x or x == float("inf") else f"{x:.1f}"


def run_program(p: Program, extra: list, repeats: int, compile_baseline: bool, log,
                copy_tbps: float, options: list[CodegenOptions]) -> dict:
    prog = p.program()
    cands = p.candidates() + extra  # extra: μGraphs (under every option set) or (μGraph, options) pairs
    gen = torch.Generator(device="cuda").manual_seed(0)
    xs = p.inputs(prog, gen)
    row: dict = {"program": p.name, "floor_us": prof.floor_us(prog), "target_us": p.target_us,
                 "floor_measured_us": prof.floor_us(prog, bandwidth_tbps=copy_tbps),
                 "bytes": sum(t.nbytes() for t in prog.inputs) + sum(t.nbytes() for t in prog.outputs)}
    ref = mi.run_reference(prog, [x.double() for x in xs])
    # baselines
    try:
        base = prof.profile_baselines(prog, xs, repeats=repeats, compile_mode="default" if compile_baseline else None)
        row["baselines"] = {k: v.as_dict() for k, v in base.items()}
        fn_out = mi.runtime.to_torch_fn(prog)(*xs)
        row["torch_rel_err"] = max(prof.relative_error(o, r) for o, r in zip(fn_out, ref))
    except Exception:
        log(f"[{p.name}] baselines failed:\n{traceback.format_exc()}")
        row["baselines"] = {}
    # candidates
    sel = select_fastest(cands, xs, reference=ref, repeats=repeats, options=options)
    row["candidates"] = []
    for c in sel.candidates:
        bgs = [op.block_graph for op in c.graph.customized_ops]
        row["candidates"].append({
            "grids": [list(b.grid_dim) for b in bgs], "franges": [b.forloop_range for b in bgs],
            "threads": [b.block_dim[0] for b in bgs], "options": c.options.tag(), "rel_err": c.rel_err, "error": c.error, "hash": c.graph.content_hash()[:12],
            "timings": {k: v.as_dict() for k, v in c.timings.items()},
            "resources": c.kernel.resource_report() if c.kernel is not None and c.error is None else None,
        })
        if c.error:
            log(f"[{p.name}] candidate grids={[b.grid_dim for b in bgs]} franges={[b.forloop_range for b in bgs]} "
                f"{c.options.tag()}: {c.error}")
    row["_best_graph"] = sel.best.kernel if sel.best is not None else None
    if sel.best is not None:
        b = sel.best
        row["best"] = sel.candidates.index(b)
        med = b.timings["cuda_graph"].median_us
        row["best_us"] = med
        row["best_python_call_us"] = b.timings["python_call"].median_us
        row["best_python_call_graph_us"] = b.timings["python_call_graph"].median_us
        row["best_eager_us"] = b.timings["eager"].median_us
        row["best_rel_err"] = b.rel_err
        row["achieved_tbps"] = row["bytes"] / (med * 1e-6) / 1e12
    return row


def table(rows: list[dict], device: str) -> str:
    lines = [f"Device: {device}. Times in µs per call (median; device time by CUDA events, inputs rotated "
             "so every call reads from HBM). `graph` = the call captured in a CUDA graph and replayed.",
             "",
             "| program | floor @3.0 | floor @copy | torch eager | torch graph | torch.compile | torch.compile graph | mirage_lab graph "
             "| mirage_lab eager | py call | py call (graph) | best/floor@copy | compile-graph/best | TB/s | rel err | best μGraph |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        b = r.get("baselines", {})
        g = lambda k: b.get(k, {}).get("median_us")  # noqa: E731
        best = r.get("best_us")
        cfg = ""
        if "best" in r:
            c = r["candidates"][r["best"]]
            cfg = f"grids {c['grids']}, franges {c['franges']}, threads {c.get('threads')}, {c['options']}"
        ratio = lambda a, c: "—" if not a or not c else f"{a / c:.2f}"  # noqa: E731
        lines.append(
            f"| {r['program']} | {fmt_us(r['floor_us'])} | {fmt_us(r.get('floor_measured_us'))} | {fmt_us(g('torch_eager'))} | {fmt_us(g('torch_cuda_graph'))} "
            f"| {fmt_us(g('torch_compile'))} | {fmt_us(g('torch_compile_cuda_graph'))} | **{fmt_us(best)}** "
            f"| {fmt_us(r.get('best_eager_us'))} | {fmt_us(r.get('best_python_call_us'))} "
            f"| {fmt_us(r.get('best_python_call_graph_us'))} | {ratio(best, r.get('floor_measured_us'))} "
            f"| {ratio(g('torch_compile_cuda_graph'), best)} | {r.get('achieved_tbps', 0):.2f} "
            f"| {r.get('best_rel_err', float('nan')):.1e} | {cfg} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--programs", default="", help="comma-separated program names (default: all)")
    ap.add_argument("--candidates", action="append", default=[], help="NAME=FILE: add saved μGraphs to program NAME")
    ap.add_argument("--repeats", type=int, default=200)
    ap.add_argument("--workers", type=int, default=0, help="processes compiling kernels (default: cores)")
    ap.add_argument("--no-compile-baseline", action="store_true", help="skip torch.compile")
    ap.add_argument("--options", default="default", choices=sorted(OPTION_SETS),
                    help="lowering variants to measure per candidate")
    ap.add_argument("--export", default="", help="comma-separated programs whose best μGraph is exported to --out")
    ap.add_argument("--first", type=int, default=0, help="only the first N default candidates per program")
    ap.add_argument("--with-fma-best", action="store_true",
                    help="also measure each program's fastest FMA-path configuration (its μGraph and options) "
                         "from benchmarks/RESULTS.md, as a same-run reference for --options mma")
    ap.add_argument("--mode", default="bench", choices=["bench", "precompile", "run"],
                    help="precompile: fill the kernel cache only; run: launch each candidate twice, no timing "
                         "(for an external profiler such as ncu)")
    ap.add_argument("--out", default=os.environ.get("OUT", "."), help="folder for gpu_bench.json / gpu_bench.md")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available() or mi.runtime.simulator_active():
        print("gpu_bench needs a CUDA GPU (and NUMBA_ENABLE_CUDASIM unset)")
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    logf = open(out / "gpu_bench.log", "a")

    def log(msg: str) -> None:
        print(msg, flush=True)
        logf.write(msg + "\n")
        logf.flush()

    progs = programs()
    if args.first:
        for p in progs.values():
            p.candidates = (lambda f, n: (lambda: f()[:n]))(p.candidates, args.first)
    names = [n for n in args.programs.split(",") if n] or list(progs)
    extra: dict[str, list[mi.KernelGraph]] = {n: [] for n in names}
    for spec in args.candidates:
        n, path = spec.split("=", 1)
        loaded = mi.load(path)
        extra.setdefault(n, []).extend(loaded if isinstance(loaded, list) else [loaded])
    if args.with_fma_best:
        for n in names:
            if progs[n].fma_best is not None:
                extra.setdefault(n, []).append(progs[n].fma_best())
    device = torch.cuda.get_device_name()
    log(f"gpu_bench {datetime.datetime.now().isoformat(timespec='seconds')} on {device}; torch {torch.__version__}")
    copy_tbps = prof.measure_copy_tbps()
    log(f"device-to-device copy: {copy_tbps:.2f} TB/s (read + write); floors below use 3.0 TB/s (H100) "
        f"and this measured value")
    opts = OPTION_SETS[args.options]
    t0 = time.perf_counter()
    all_graphs = [pair for n in names for pair in with_options(progs[n].candidates() + extra.get(n, []), opts)]
    res = mi.runtime.precompile(all_graphs, workers=args.workers or None)
    bad = [r for r in res if r[2]]
    log(f"precompiled {len(res)} μGraphs in {time.perf_counter() - t0:.0f} s "
        f"(slowest {max(r[1] for r in res):.0f} s); {len(bad)} failed")
    for h, _, err in bad:
        log(f"  {h[:12]}: {err}")
    if args.mode == "precompile":
        return 0
    if args.mode == "run":
        for n in names:
            p = progs[n]
            for g, o in with_options(p.candidates() + extra.get(n, []), opts):
                k = mi.runtime.compile(g, options=o)
                xs = p.inputs(g, torch.Generator(device="cuda").manual_seed(0))
                for _ in range(2):
                    k(inputs=xs)
                torch.cuda.synchronize()
                log(f"[{n}] ran {[b.block_graph.grid_dim for b in g.customized_ops]} {o.tag()}: "
                    f"{k.resource_report()}")
        return 0
    rows = []
    for n in names:
        t1 = time.perf_counter()
        try:
            rows.append(run_program(progs[n], extra.get(n, []), args.repeats, not args.no_compile_baseline, log,
                                    copy_tbps, opts))
        except Exception:
            log(f"[{n}] failed:\n{traceback.format_exc()}")
            continue
        best_graph = rows[-1].pop("_best_graph")
        log(f"[{n}] done in {time.perf_counter() - t1:.0f} s: best {fmt_us(rows[-1].get('best_us'))} µs, "
            f"floor {fmt_us(rows[-1]['floor_us'])} µs")
        if n in args.export.split(",") and best_graph is not None:
            path = mi.runtime.export(best_graph, out / f"{n}.py", latency_us=rows[-1]["best_us"], device=device)
            log(f"[{n}] exported the best μGraph to {path}")
        (out / "gpu_bench.json").write_text(json.dumps({"device": device, "copy_tbps": copy_tbps, "rows": rows},
                                                       indent=1, default=str))
    md = table(rows, f"{device} (copy {copy_tbps:.2f} TB/s)")
    (out / "gpu_bench.md").write_text(md + "\n")
    log("\n" + md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
