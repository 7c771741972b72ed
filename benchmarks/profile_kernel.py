"""Time (or launch for a profiler) one hand-built μGraph lowering beside read-rate references.

    python benchmarks/profile_kernel.py rmsnorm 128 16 512 --mma --pw 64 --depth 1
    python benchmarks/profile_kernel.py rmsnorm 128 16 512 --mma --pw 64 --mv
    ncu --clock-control none --section SpeedOfLight -k regex:kernel \\
        python benchmarks/profile_kernel.py rmsnorm 128 16 512 --mma --pw 64 --launch-only
    python benchmarks/profile_kernel.py json 0 0 128 --json cand.json --tag pw0-regNone-acc128-smem144-mma

Prints the lowering's device time (CUDA events, weights rotated over copies > 2 x L2, median
of 200) and, as references for what the weight read can cost on this GPU, ``torch.sum`` of
the weight (a read-only reduction) and torch's own matmul of the same shapes.
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))   # rank_quality (options from a tag)

import mirage_lab as mi  # noqa: E402
from mirage_lab.codegen import CodegenOptions  # noqa: E402
from mirage_lab.examples import gated_mlp_fused, rms_norm_linear_fused  # noqa: E402
from mirage_lab.pipeline import with_block_dim  # noqa: E402

BUILDERS = {"rmsnorm": lambda b, h, o, g, f: rms_norm_linear_fused(b, h, o, grid=g, forloop_range=f),
            "mlp": lambda b, h, o, g, f: gated_mlp_fused(b, h, o, grid=g, forloop_range=f)}


def timed(fn, n: int = 200) -> float:
    """Median device µs of ``fn(i)`` by CUDA events."""
    for i in range(5):
        fn(i)
    torch.cuda.synchronize()
    ts = []
    for i in range(n):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(50_000)  # keeps the GPU busy while the host launches: device time only
        a.record()
        fn(i)
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b) * 1e3)
    return statistics.median(ts)


def lowering_args(doc: str) -> argparse.ArgumentParser:
    """The command line that names one lowering: program, grid, frange, threads, options."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("program", choices=sorted(BUILDERS) + ["json"], help="a builder, or json: the μGraph in --json")
    ap.add_argument("grid", type=int)
    ap.add_argument("frange", type=int)
    ap.add_argument("threads", type=int)
    ap.add_argument("--shape", default="16,4096,4096", help="batch,hidden,out")
    ap.add_argument("--mma", action="store_true")
    ap.add_argument("--pw", type=int, default=0, help="pipeline_words")
    ap.add_argument("--depth", type=int, default=1, help="pipeline_depth")
    ap.add_argument("--mv", action="store_true", help="mma_b16: 32-column mma warps read W in 16-byte loads (movmatrix)")
    ap.add_argument("--json", default="", help="a saved μGraph (program json: grid and frange are its own)")
    ap.add_argument("--tag", default="", help="the options as a tuner variant's tag (e.g. pw0-regNone-acc128-smem144-mma "
                                              "from a suite_bench --dump row): replaces --mma/--pw/--depth/--mv")
    return ap


def lowering(a: argparse.Namespace) -> tuple[mi.KernelGraph, CodegenOptions]:
    """The μGraph (with its block size) and the codegen options the arguments name."""
    if a.program == "json":
        g = with_block_dim(mi.load(a.json), a.threads)
    else:
        b, h, o = (int(v) for v in a.shape.split(","))
        g = with_block_dim(BUILDERS[a.program](b, h, o, a.grid, a.frange), a.threads)
    if a.tag:
        from rank_quality import options_from_tag

        return g, options_from_tag(a.tag)
    return g, CodegenOptions(mma=a.mma, pipeline_words=a.pw, pipeline_depth=a.depth, mma_b16=a.mv)


def main() -> int:
    ap = lowering_args(__doc__)
    ap.add_argument("--launch-only", action="store_true", help="launch a few times, no timing (for ncu)")
    a = ap.parse_args()
    g, opts = lowering(a)
    k = mi.runtime.compile(g, options=opts)
    copies = 6
    sets = [[(torch.randn(t.dims, device="cuda") * (1.0 if i == 0 else 1 / 64)).to(t.dtype.torch)
             for i, t in enumerate(g.inputs)] for _ in range(copies)]
    if a.launch_only:
        for i in range(4):
            k(inputs=sets[i % copies])
        torch.cuda.synchronize()
        return 0
    w = [s[1] for s in sets]
    x = [s[0] for s in sets]
    rows = [(f"mirage_lab {a.program} grid {a.grid} frange {a.frange} t{a.threads} {opts.tag()}",
             timed(lambda i: k(inputs=sets[i % copies])))]
    if a.program != "json":  # the read references are for the X @ W programs
        rows.append(("torch.sum(W) (read-only reduction)", timed(lambda i: torch.sum(w[i % copies]))))
        rows.append(("torch X @ W (cuBLAS)", timed(lambda i: torch.mm(x[i % copies], w[i % copies]))))
    nbytes = w[0].nbytes
    print(f"{torch.cuda.get_device_name()}; W {tuple(w[0].shape)} = {nbytes / 2**20:.0f} MiB")
    for name, us in rows:
        print(f"| {name} | {us:.1f} µs | {nbytes / us / 1e6:.2f} TB/s of W |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
