"""Time to the first candidate: attention (GQA prefill and decode, multi-head attention with a short
KV) and LoRA chains (``X@A@B + X@W``), with the README's advice (``search_seconds=30``).

Each program is searched from scratch with ``mi.search.search`` (numpy fingerprints unless
``--fingerprints``), stopped at the first candidate or at ``--limit`` seconds; prints the
seconds and states to the first candidate and whether it is the expected kind.

    python benchmarks/first_candidate_bench.py --workers 2
    python benchmarks/first_candidate_bench.py --workers 16 --programs gqa_decode_64x1x128x4096
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import mirage_lab as mi  # noqa: E402
from mirage_lab import examples as ex  # noqa: E402
from mirage_lab.search import CancelToken, CandidateFound, Finished, Progress, search, static_cost  # noqa: E402


def lora_program(batch: int, hidden: int, out: int, rank: int) -> mi.KernelGraph:
    """``X@A@B + X@W``: a linear layer with a rank-``rank`` LoRA adapter."""
    g = mi.new_kernel_graph()
    X = g.new_input((batch, hidden), mi.float16)
    W = g.new_input((hidden, out), mi.float16)
    A = g.new_input((hidden, rank), mi.float16)
    B = g.new_input((rank, out), mi.float16)
    g.mark_output(g.add(g.matmul(g.matmul(X, A), B), g.matmul(X, W)))
    return g


PROGRAMS = {
    "gqa_2x256x64x4096": (lambda: ex.gqa_program(2, 256, 64, 4096), "attention"),
    "gqa_decode_64x1x128x4096": (lambda: ex.gqa_program(64, 1, 128, 4096), "attention"),
    "mha_short_kv_16x128x64x256": (lambda: ex.gqa_program(16, 128, 64, 256), "attention"),
    "lora_16x4096x4096_r16": (lambda: lora_program(16, 4096, 4096, 16), "lora"),
    "lora_16x4096x4096_r64": (lambda: lora_program(16, 4096, 4096, 64), "lora"),
    "lora_8x1024x1024_r8": (lambda: lora_program(8, 1024, 1024, 8), "lora"),
}


def first_candidate(name: str, workers: int, limit: float, fingerprints: str) -> dict:
    make, config = PROGRAMS[name]
    program = make()
    token = CancelToken()
    t0 = time.monotonic()
    states, first, kernels, done = 0, None, None, None
    for ev in search(program, config, workers=workers, cancel=token, fingerprint_backend=fingerprints):
        now = time.monotonic() - t0
        if isinstance(ev, Progress):
            states = ev.stats.states
        elif isinstance(ev, CandidateFound) and first is None:
            first, kernels = now, static_cost(ev.graph).kernels
            states = ev.stats.states
            token.cancel()
        elif isinstance(ev, Finished):
            done = ev
        if now > limit and not token.is_set():
            token.cancel()
    return {"program": name, "config": config, "workers": workers, "first_s": None if first is None else round(first, 1),
            "states": states, "kernels": kernels, "limit_s": limit,
            "subtrees_done": f"{done.stats.subtrees_done}/{done.stats.subtrees_total}" if done else None}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--programs", default="", help="comma-separated names (default: all)")
    ap.add_argument("--workers", type=int, default=os.cpu_count())
    ap.add_argument("--limit", type=float, default=30.0, help="seconds (the README's search_seconds)")
    ap.add_argument("--fingerprints", default="numpy")
    args = ap.parse_args()
    for n in args.programs.split(",") if args.programs else PROGRAMS:
        print(json.dumps(first_candidate(n, args.workers, args.limit, args.fingerprints)), flush=True)


if __name__ == "__main__":
    main()
