"""One search subtree with each fingerprint backend: states per second, time to its first candidate.

Isolates the cost of the search's fingerprint arithmetic (numpy on the CPU against
Numba-CUDA on the GPU) from the process pool: a single worker explores one task from the
program's task list for ``--seconds`` on each backend. Both must report the same
candidates where both finish.

    python benchmarks/search_backend_bench.py --program gqa --task 13 --seconds 30
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from mirage_lab.search import generator as G  # noqa: E402
from mirage_lab.search.config import SearchConfig  # noqa: E402
from search_bench import programs  # noqa: E402  (the same programs and presets as the search benchmark)

PROGRAMS = {"gqa": "gqa_2x256x64x4096", "rms": "rmsnorm_linear_16x4096x4096",
            "rms6144": "rmsnorm_linear_2x4096x6144", "mlp": "gated_mlp_8x4096x4096"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--program", default="gqa", choices=sorted(PROGRAMS))
    ap.add_argument("--task", type=int, default=0)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--backends", default="numpy,cuda")
    args = ap.parse_args()
    make, config = programs(small=False)[PROGRAMS[args.program]][:2]
    g = make()
    print("| program | task | backend | states | states/s | fingerprint tests | candidates | first cand. s | finished |")
    print("|---|---|---|---|---|---|---|---|---|")
    for be in args.backends.split(","):
        cfg = SearchConfig.from_args(config, fingerprint_backend=be)
        t0 = time.monotonic()
        gen = G.Generator(G.Target(g, cfg), cfg)
        setup = time.monotonic() - t0
        task = gen.all_tasks()[args.task]
        first = []
        t0 = time.monotonic()
        deadline = t0 + args.seconds
        gen.should_stop = lambda: time.monotonic() > deadline
        gen.on_hit = lambda h: first.append(time.monotonic() - t0)
        done = True
        try:
            gen.run_task(task)
        except G.Cancelled:
            done = False
        el = time.monotonic() - t0
        s = gen.stats
        print(f"| {args.program} | {args.task} | {gen.arrays.name} (setup {setup:.1f} s) | {s.states} | {s.states / el:.0f} | "
              f"{s.fingerprint_tests} | {len(first)} | {first[0] if first else float('nan'):.1f} | {done} |", flush=True)


if __name__ == "__main__":
    main()
