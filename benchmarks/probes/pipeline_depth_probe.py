"""How far ahead should a weight stream be loaded? A tuner dump's fastest lowerings at several register-prefetch depths.

A skinny matmul that streams W through registers waits one DRAM round trip an iteration unless its loads
were issued iterations ahead (``CodegenOptions.pipeline_words`` x ``pipeline_depth``). In the H200 suite
runs of 2026-11-29 (f) two iterations ahead (``pw64x2``) beat none by 10-15 % on LLaMA-3 8B's and
ReluLLaMA's gated MLPs, one ahead (``pw64``) did not, and the cost model rated all three the same, so the
tuner stopped before it timed ``pw64x2`` on LLaMA-3 70B's norm + QKV (64 iterations). This probe lowers the
``--top`` fastest variants of each dump (``suite_bench.py --dump``) at each ``WORDSxDEPTH`` of ``--depths``,
checks each against float64, times it in one process (CUDA events, inputs rotated past L2, plain calls
and CUDA-graph replays) and prints the cost model's estimate beside it. ``--dry`` only generates (no GPU).

    python benchmarks/probes/pipeline_depth_probe.py --dumps d1.json,d2.json --top 1 --depths 0x1,64x2,128x3,128x4
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "benchmarks" / "probes"))

from mma_blocking_probe import dump_lowerings  # noqa: E402
from mirage_lab.codegen import generate_module  # noqa: E402
from mirage_lab.pipeline.cost_model import estimate  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dumps", required=True, help="suite_bench --dump files (comma-separated)")
    ap.add_argument("--top", type=int, default=1, help="fastest measured variants per dump")
    ap.add_argument("--depths", default="0x1,64x1,64x2,128x3,128x4", help="pipeline_words x pipeline_depth to try")
    ap.add_argument("--dry", action="store_true", help="generate and estimate only (no GPU)")
    ap.add_argument("--variants", default="", help="only these measured CANDIDATE:THREADS rows of the dumps (comma-separated; "
                                                   "with --top large enough to reach them)")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp())
    if not a.dry:
        import torch

        from mma_blocking_probe import print_timed

        print(torch.cuda.get_device_name(), flush=True)
    print("| program | cand | threads | options | dump µs | words x depth | estimate µs | rel err | call µs | graph µs |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    only = {tuple(int(x) for x in v.split(":")) for v in a.variants.split(",") if v}
    for name, r, g, opts, row in dump_lowerings(a.dumps, a.top):
        if only and (r["candidate"], r["threads"]) not in only:
            continue
        seen: dict[str, str] = {}
        for wd in a.depths.split(","):
            words, depth = (int(v) for v in wd.split("x"))
            o = replace(opts, pipeline_words=words, pipeline_depth=depth)
            gen = generate_module(g, options=o)
            body = "".join(gen.kernel_sources.values())
            label = f"{wd} | {estimate(g, o).us:.1f}"
            if body in seen:
                print(f"{row} {label} | the same kernels as {seen[body]} | | |", flush=True)
                continue
            seen[body] = wd
            if a.dry:
                print(f"{row} {label} | (dry: {len(body.splitlines())} lines) | | |", flush=True)
                continue
            tag = f"{name}_{r['candidate']}_{r['threads']}_pw{words}x{depth}"
            print_timed(row, label, tag, gen.source, g, tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
