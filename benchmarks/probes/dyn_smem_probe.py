"""A/B on the GPU: a tuner dump's best-estimated variants with the 48 KB static pool and with dynamic shared memory.

The code generator keeps every tile as float32 in one shared-memory pool; past numba's static 48 KB the
buffers that do not fit moved to a per-block global scratch area. ``CodegenOptions(smem_kb=N)`` lets the
pool grow to N KB as dynamic shared memory, opted in at launch (``cuFuncSetAttribute``). On the suite's
Qwen-2.5 0.5B SwiGLU (bf16) half of every shortlisted variant's loop steps ran in global scratch, and the
best μGraph measured 187 µs against torch.compile's 12 µs (benchmarks/RESULTS.md, "2026-11-29 (b),
continued"). This probe lowers each dump's candidates (``suite_bench.py --dump``) with this tree's variants, takes
the ``--top`` by estimate, and times each as it is and with ``smem_kb`` raised: one module per variant, checked against float64,
then device time of plain calls and of CUDA-graph replays, inputs rotated over copies larger than 2 x L2.
The cost model's estimate for both is printed beside the measurement. Not yet in the tuner's variants:
this is the measurement that decides it.

    python benchmarks/probes/dyn_smem_probe.py                       # the two stored H200 dumps
    python benchmarks/probes/dyn_smem_probe.py --dumps d1.json,d2.json --top 6 --smem 100,227
"""
from __future__ import annotations

import argparse
import dataclasses
import glob
import json
import sys
import tempfile
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "benchmarks" / "probes"))

from codegen_ab_probe import measure  # noqa: E402
from mirage_lab.codegen import generate_module  # noqa: E402
from mirage_lab.ir.serialize import from_dict  # noqa: E402
from mirage_lab.pipeline.cost_model import estimate  # noqa: E402
from mirage_lab.pipeline.variants import _smem_variant, device_smem_kb, lowering_variants  # noqa: E402

DUMPS = sorted(glob.glob(str(ROOT / "benchmarks" / "found" / "dump_*_h200_2026-11-29b.json")))


def shortlist(d: dict, top: int) -> list[tuple[float, int, object]]:
    """The dump's candidates lowered by this tree (``lowering_variants``), ``top`` best estimates first."""
    out = []
    for i, c in enumerate(d["candidates"]):
        for v in lowering_variants(from_dict(c), candidate=i):
            out.append((estimate(v.graph, v.options).us, i, v))
    out.sort(key=lambda r: r[0])
    return out[:top]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dumps", default=",".join(DUMPS), help="suite_bench --dump files (comma-separated)")
    ap.add_argument("--top", type=int, default=4, help="variants per dump, best estimate first")
    ap.add_argument("--smem", default="auto,227", help="pool sizes in KB to try beside 48 ('auto': the size the "
                                                      "tuner's variant asks for, what the spilled buffers need)")
    ap.add_argument("--repeats", type=int, default=50, help="timed calls per measurement")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp())
    print(torch.cuda.get_device_name(), flush=True)
    print("| program | variant | pool KB | scratch floats | dyn smem B | est µs | rel err | call µs | graph µs |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for path in a.dumps.split(","):
        d = json.loads(Path(path).read_text())
        prog = {p["lowering"]: p.get("median_us") for p in d.get("programs", [])}
        print(f"| {d['program']} | program (tuner's µs) {prog} | | | | | | | |", flush=True)
        for _, i, v in shortlist(d, a.top):
            base = dataclasses.replace(v.options, smem_kb=48)
            auto = _smem_variant(base, generate_module(v.graph, options=base), device_smem_kb())
            sizes = [auto.smem_kb if x == "auto" and auto else 48 if x == "auto" else int(x) for x in a.smem.split(",")]
            for kb in dict.fromkeys([48] + sizes):   # in order, once each
                o = dataclasses.replace(v.options, smem_kb=kb)
                gen = generate_module(v.graph, options=o)
                pool = max(k.pool_floats for k in gen.kernels) * 4 // 1024
                scratch = sum(k.scratch_floats_per_block for k in gen.kernels)
                dyn = max(k.dyn_smem_bytes for k in gen.kernels)
                est = estimate(v.graph, o).us
                cells = (f"| {d['program']} | cand{i}/t{v.threads}/{o.tag()} | {pool} | {scratch} | {dyn} | {est:.1f} |")
                if kb != 48 and not dyn:
                    print(cells + " the same source (fits 48 KB) | | |", flush=True)
                    continue
                try:
                    err, dev, gdev = measure(f"v{i}_{v.threads}_{abs(hash(o.tag()))}_{kb}", gen.source, v.graph, tmp,
                                             repeats=a.repeats)
                    print(cells + f" {err:.1e} | {dev:.2f} | {gdev:.2f} |", flush=True)
                except Exception as e:  # noqa: BLE001 - a launch the driver refuses is a result here
                    print(cells + f" failed: {type(e).__name__}: {str(e)[:160]} | | |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
