"""A/B on the GPU: staged tensor-core tiles copied by ``cp.async`` into a ring of stages, against register staging.

With register staging a block loads the next iteration's tiles into registers while it computes this one,
then stores them to shared memory: one iteration of its weights in flight, registers held for them, and a
store phase between the loads and the next compute (ncu: Phi-3-mini's SwiGLU latency-bound at 63 % of
DRAM, 2026-11-29 (d)). ``CodegenOptions(async_stages=S)`` copies those tiles global -> shared with
``cp.async`` into S stages, S - 1 iterations ahead. This probe lowers the fastest variants a tuner dump
measured (``suite_bench.py --dump``) with ``async_stages`` 0 (as tuned) and each S given (every qualifying tile,
and the A tiles only: ``LoaderEmitter.async_b_tiles`` off, B staged as before) and, with ``--ldmatrix``, with the
register-blocked loops' fragments read by ``ldmatrix`` (``CodegenOptions.ldmatrix``), checks each against
float64 and times them in one process (CUDA events, inputs rotated past L2, plain calls and CUDA-graph
replays), beside the dump's own measurement of the variant.

    python benchmarks/probes/async_copy_probe.py --dumps d1.json,d2.json --top 3 --stages 2,3,4
    python benchmarks/probes/async_copy_probe.py --dumps d1.json --top 1 --stages 2 --ldmatrix
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "benchmarks" / "probes"))

from mma_blocking_probe import dump_lowerings, print_timed  # noqa: E402
from mirage_lab.codegen import generate_module  # noqa: E402
from mirage_lab.codegen.loaders import LoaderEmitter  # noqa: E402
from mirage_lab.codegen.plan import MAX_SMEM_KB  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dumps", required=True, help="suite_bench --dump files (comma-separated)")
    ap.add_argument("--top", type=int, default=3, help="fastest measured variants per dump")
    ap.add_argument("--stages", default="2,3,4", help="async_stages to try beside the tuned lowering")
    ap.add_argument("--ldmatrix", action="store_true",
                    help="also each with ldmatrix fragments (CodegenOptions.ldmatrix), register-staged and in rings")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp())
    print(torch.cuda.get_device_name(), flush=True)
    print("| program | cand | threads | options | dump µs | stages | rel err | call µs | graph µs |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, r, g, opts, row in dump_lowerings(a.dumps, a.top):
        base = generate_module(g, options=opts).source
        stages = [int(x) for x in a.stages.split(",") if x]
        configs = [(0, True, False)] + [(S, b, False) for S in stages for b in (True, False)]
        if a.ldmatrix:
            configs += [(0, True, True)] + [(S, True, True) for S in stages]
        for S, b_too, ldm in configs:
            LoaderEmitter.async_b_tiles = b_too
            try:
                o = replace(opts, async_stages=S, smem_kb=MAX_SMEM_KB) if S else opts
                gen = base if not S and not ldm else generate_module(g, options=replace(o, ldmatrix=ldm))
            finally:
                LoaderEmitter.async_b_tiles = True
            text = gen if not S and not ldm else gen.source
            label = f"{S}{'' if b_too or not S else ' (A only)'}{' + ldmatrix' if ldm else ''}"
            if S and not any("cp16(sm" in k for k in gen.kernel_sources.values()):
                print(f"{row} {label} | no tile qualifies (or the ring does not fit) | | |", flush=True)
                continue
            if ldm and not any("ldsm4" in k for k in gen.kernel_sources.values()):
                print(f"{row} {label} | no register-blocked loop reads by ldmatrix | | |", flush=True)
                continue
            tag = (f"{name}_{r['candidate']}_{r['threads']}_{r['options'].replace('-', '_')}_cp{S}"
                   f"{'' if b_too else 'a'}{'_ldsm' if ldm else ''}")
            print_timed(row, label, tag, text, g, tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
