"""Which contender of Falcon-7B MQA decode's final round faults, and whether timing them in turn is why.

On 2026-12-07 (f) (benchmarks/RESULTS.md) the tuner's final round, timed in turn with every contender's
CUDA graphs captured once and resident (16 input copies each, six contenders), ended twice in
``CUDA error: an illegal memory access`` on the H100; both runs had also timed ~130-160 of the
program's variants first. This probe takes the stored candidates (``found/h100_2026-12-07f/calls/cands``),
compiles the three finalists of those runs and builds the program's own lowerings (torch,
torch.compile, sdpa), and times them one after another (``--mode sequential``, what the tuner does),
in turn with each one's graphs captured once (``once``, the crashing form) or captured for its part
of each round only (``per-round``). Run it with ``CUDA_LAUNCH_BLOCKING=1`` so that the error names the
launch that faults; ``--variants N`` first times the N best-estimated other variants (the crashing
runs timed them all), to tell a variant that corrupts memory from the in-turn timing.

    CUDA_LAUNCH_BLOCKING=1 python benchmarks/probes/final_round_crash.py --mode once
    CUDA_LAUNCH_BLOCKING=1 python benchmarks/probes/final_round_crash.py --mode sequential --variants 130
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

PROGRAM = "mqa_decode_falcon7b_b8_kv2048"
CANDS = ROOT / "benchmarks" / "found" / "h100_2026-12-07f" / "calls" / "cands" / f"{PROGRAM}.json"
FINALISTS = [(16, "cand16/t256/pw64x2-regNone-acc128-smem72-mma"), (14, "cand14/t512/pw0-regNone-acc128-smem72-mma"),
             (16, "cand16/t512/pw0-regNone-acc128-smem72-mma")]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mode", choices=("sequential", "once", "per-round"), default="once")
    ap.add_argument("--variants", type=int, default=0, help="time this many other variants first (plan order)")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=300)
    args = ap.parse_args()

    import torch

    from mirage_lab.ir.serialize import from_json
    from mirage_lab.pipeline.autotune import plan_variants
    from mirage_lab.pipeline.contenders import build_program_lowering, check_program
    from mirage_lab.pipeline.inputs import measuring_inputs
    from mirage_lab.pipeline.library import library_lowerings
    from mirage_lab.runtime import profile as prof
    from mirage_lab.runtime.kernel import compile as rt_compile
    from suite.programs import by_name

    program = by_name(PROGRAM).build()
    cands = [from_json(s) for s in json.loads(CANDS.read_text())]
    mi = measuring_inputs(program, device="cuda")
    planned = {v.tag: v for v, _ in plan_variants(cands)}
    entries = []   # (name, check_inputs, capture)
    for _, tag in FINALISTS:
        v = planned[tag]
        k = rt_compile(v.graph, options=v.options)
        entries.append((tag, k.check_inputs, lambda s, k=k: k.capture(s).replay))
    for low in ["torch", "torch.compile"] + library_lowerings(program):
        p = build_program_lowering(program, low, mi)
        check_program(p, mi, float("inf") if low == "torch" else 1e-2)
        if p.error:
            print(f"{low}: {p.error}")
            continue
        entries.append((low, p.runner.check_inputs, lambda s, r=p.runner: r.capture(s).replay))
    print(f"{len(entries)} contenders; rotation copies {prof.rotation_copies(mi.inputs)}", flush=True)

    finalist_tags = set(dict(FINALISTS).values())
    others = [v for v in planned.values() if v.tag not in finalist_tags][:args.variants]   # plan order
    if others:   # compiled in parallel processes first (the tuner's pool does the same); loaded below
        from mirage_lab.runtime.kernel import precompile
        errs = [e for _, _, e in precompile([(v.graph, v.options) for v in others]) if e]
        print(f"precompiled {len(others)} variants, {len(errs)} failed {errs[:2]}", flush=True)
    for v in others:
        try:
            k = rt_compile(v.graph, options=v.options)
            t = prof.time_captured(k.check_inputs, lambda s, k=k: k.capture(s).replay, mi.inputs, name=v.tag, repeats=100)
            print(f"  variant {v.tag}: {t.median_us:.2f} µs", flush=True)
        except Exception:
            print(f"  variant {v.tag} FAILED:\n{traceback.format_exc()}", flush=True)
            return

    per = max(1, args.repeats // args.rounds)
    try:
        if args.mode == "sequential":
            for name, check, capture in entries:
                t = prof.time_captured(check, capture, mi.inputs, name=name, repeats=args.repeats)
                print(f"{name:50s} {t.median_us:8.2f} µs", flush=True)
            return
        sets = [prof.make_copies(list(check(mi.inputs)), prof.rotation_copies(mi.inputs)) for _, check, _ in entries]
        held = [[capture(s) for s in sets[i]] for i, (_, _, capture) in enumerate(entries)] if args.mode == "once" else None
        rounds: list[list[float]] = [[] for _ in entries]
        for r in range(args.rounds):
            for i in (range(len(entries)) if r % 2 == 0 else range(len(entries) - 1, -1, -1)):
                name = entries[i][0]
                print(f"round {r} {name}", flush=True)
                replays = held[i] if held is not None else [entries[i][2](s) for s in sets[i]]
                rounds[i].append(prof.time_calls(replays, name=name, repeats=per, warmup=2).median_us)
                del replays
        for (name, _, _), rs in zip(entries, rounds):
            print(f"{name:50s} {statistics.median(rs):8.2f} µs  rounds {min(rs):.2f}-{max(rs):.2f}", flush=True)
    except Exception:
        print(f"FAILED ({args.mode}):\n{traceback.format_exc()}", flush=True)
        torch.cuda.synchronize()


if __name__ == "__main__":
    main()
