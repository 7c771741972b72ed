"""Launch a program's lowering variants once each, for ``compute-sanitizer --tool memcheck`` to name any that reads or
writes out of bounds.

The tuner's final round on Falcon-7B MQA decode ended twice in an illegal memory access (benchmarks/RESULTS.md,
2026-12-07 (f)); ``final_round_crash.py`` tells a faulty variant from the in-turn timing by timing, this names the
kernel and the address. Each variant runs once, eagerly (no CUDA graph), on the tuner's measuring inputs, after
the finalists of those runs; the split-K variants (``sk``) that the normal tuner seldom reaches are taken first
among the others. Compiles run in parallel processes first (outside the sanitizer's process, which only loads them).

    python benchmarks/probes/memcheck_variants.py --compile-only --variants 60      # fill the kernel cache
    compute-sanitizer --tool memcheck --print-limit 3 python benchmarks/probes/memcheck_variants.py --variants 60
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from final_round_crash import CANDS, FINALISTS, PROGRAM  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--variants", type=int, default=60, help="other variants after the finalists (split-K first)")
    ap.add_argument("--compile-only", action="store_true", help="compile in parallel processes and stop")
    args = ap.parse_args()

    import torch

    from mirage_lab.ir.serialize import from_json
    from mirage_lab.pipeline.autotune import plan_variants
    from mirage_lab.pipeline.inputs import measuring_inputs
    from mirage_lab.runtime.kernel import compile as rt_compile, precompile
    from suite.programs import by_name

    program = by_name(PROGRAM).build()
    planned = [v for v, _ in plan_variants([from_json(s) for s in json.loads(CANDS.read_text())])]
    finals = [v for tag in dict(FINALISTS).values() for v in planned if v.tag == tag]
    others = [v for v in planned if v not in finals]
    others = ([v for v in others if "-sk" in v.tag] + [v for v in others if "-sk" not in v.tag])[:args.variants]
    todo = finals + others
    if args.compile_only:
        errs = [e for _, _, e in precompile([(v.graph, v.options) for v in todo]) if e]
        print(f"compiled {len(todo)} variants, {len(errs)} failed {errs[:2]}", flush=True)
        return
    mi = measuring_inputs(program, device="cuda")
    for v in todo:
        k = rt_compile(v.graph, options=v.options)
        k(inputs=k.check_inputs(mi.inputs))
        torch.cuda.synchronize()   # memcheck reports the faulting access at this launch
        print(f"ran {v.tag}", flush=True)
    print(f"done: {len(todo)} variants", flush=True)


if __name__ == "__main__":
    main()
