"""Split-K across blocks (``CodegenOptions.split``) on tuned μGraphs, whole against split, at full shape.

Reads tuner dumps (``suite_bench.py --dump``): for each, the dump's fastest timed lowerings (candidate, threads,
options) are compiled as they were and with each tile's loop split over 2 and 4 blocks, checked against float64
and timed as suite_bench times contenders (one CUDA graph of 40 calls, inputs rotated past L2), beside torch
eager and torch.compile of the program.

    python benchmarks/probes/split_ab_probe.py DUMP.json [DUMP.json ...] [--top 3] [--splits 1,2,4] [--threads 128,256]

``--threads`` times each lowering at those block sizes too (besides the dump's own).
"""
from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

import torch  # noqa: E402

import mirage_lab as mi  # noqa: E402
import suite  # noqa: E402
from rank_quality import options_from_tag  # noqa: E402
from suite_bench import graph_time  # noqa: E402
from mirage_lab.ir.serialize import from_dict  # noqa: E402
from mirage_lab.pipeline.cost_model import estimate  # noqa: E402
from mirage_lab.pipeline.inputs import measuring_inputs  # noqa: E402
from mirage_lab.pipeline.variants import with_block_dim  # noqa: E402
from mirage_lab.runtime import profile as prof  # noqa: E402


def main() -> int:
    args = sys.argv[1:]
    opt = {"--top": "3", "--splits": "1,2,4", "--threads": ""}
    for name in opt:
        if name in args:
            i = args.index(name)
            opt[name] = args[i + 1]
            del args[i:i + 2]
    top = int(opt["--top"])
    splits = [int(x) for x in opt["--splits"].split(",")]
    more_threads = [int(x) for x in opt["--threads"].split(",") if x]
    print("| program | candidate | grid | threads | options | split | estimate µs | µs | rel err |")
    print("|---|---|---|---|---|---|---|---|---|")
    for path in args:
        d = json.load(open(path))
        p = suite.by_name(d["program"])
        program = p.build()
        m = measuring_inputs(program, seed=1)
        sets = prof.make_copies(m.inputs, prof.rotation_copies(m.inputs))
        timed = sorted((v for v in d["variants"] if v.get("median_us") and str(v["candidate"]) in d["tuned"]),
                       key=lambda v: v["median_us"])
        seen = set()
        for v in timed:
            key = (v["candidate"], v["threads"], v["options"])
            if key in seen:
                continue
            seen.add(key)
            if len(seen) > top:
                break
            base = options_from_tag(v["options"])
            for T, S in [(T, S) for T in dict.fromkeys([v["threads"], *more_threads]) for S in splits]:
                g = with_block_dim(from_dict(d["tuned"][str(v["candidate"])]), T)
                grid = [tuple(op.block_graph.grid_dim) for op in g.customized_ops]
                o = replace(base, split=S)
                try:
                    k = mi.runtime.compile(g, options=o)
                    if S > 1 and not any(i.counters for i in k.generated.kernels):
                        continue   # no kernel's loop divides
                    outs = k(inputs=m.inputs, poison=True)
                    rel = max(prof.relative_error(a, r) for a, r in zip(outs, m.reference))
                    us = graph_time([lambda c=c, k=k: k(inputs=c) for c in sets], f"split {S}")[0]
                    est = estimate(g, o).us
                    print(f"| {p.name} | {v['candidate']} | {grid} | {T} | {v['options']} | {S} | "
                          f"{est:.1f} | {us:.1f} | {rel:.1e} |", flush=True)
                except Exception as e:  # noqa: BLE001 - report and go on
                    print(f"| {p.name} | {v['candidate']} | {grid} | {T} | {v['options']} | {S} | | "
                          f"failed: {type(e).__name__}: {str(e)[:160]} | |", flush=True)
        fn = mi.runtime.to_torch_fn(program)
        for name, f in (("eager", fn), ("torch.compile", torch.compile(fn))):
            try:
                f(*m.inputs)
                us = graph_time([lambda c=c, f=f: f(*c) for c in sets], name)[0]
                print(f"| {p.name} | {name} | | | | | | {us:.1f} | |", flush=True)
            except Exception as e:  # noqa: BLE001
                print(f"| {p.name} | {name} | failed: {type(e).__name__}: {str(e)[:160]} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
