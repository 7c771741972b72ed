"""Time to the first candidate: attention (GQA prefill and decode, multi-head attention with a short
KV) and LoRA chains (``X@A@B + X@W``), with the README's advice (``search_seconds=30``).

Each program is searched from scratch with ``mi.search.search`` (numpy fingerprints unless
``--fingerprints``), stopped at the first candidate or at ``--limit`` seconds; prints the
seconds and states to the first candidate and whether it is the expected kind. The process's
fixed costs come with it: ``import_s`` (``import mirage_lab`` in this new process; the first
program of a run), ``first_state_s`` (the first progress event that counts a state, from the
call to ``search()``; events come every ``progress_interval``, 0.25 s) and ``first_s``.

    python benchmarks/first_candidate_bench.py --workers 2
    python benchmarks/first_candidate_bench.py --workers 16 --programs gqa_decode_64x1x128x4096
"""
from __future__ import annotations

import time

_T0 = time.monotonic()

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import mirage_lab as mi  # noqa: E402

IMPORT_S = time.monotonic() - _T0
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
    "rmsnorm_linear_16x4096x4096": (lambda: ex.rms_norm_linear_program(16, 4096, 4096), None),   # the README's
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
    states, first, kernels, done, first_state = 0, None, None, None, None
    for ev in search(program, config, workers=workers, cancel=token, fingerprint_backend=fingerprints):
        now = time.monotonic() - t0
        if isinstance(ev, Progress):
            states = ev.stats.states
            if states and first_state is None:
                first_state = now
        elif isinstance(ev, CandidateFound) and first is None:
            first, kernels = now, static_cost(ev.graph).kernels
            states = ev.stats.states
            token.cancel()
        elif isinstance(ev, Finished):
            done = ev
        if now > limit and not token.is_set():
            token.cancel()
    return {"program": name, "config": config, "workers": workers, "import_s": round(IMPORT_S, 2),
            "first_state_s": None if first_state is None else round(first_state, 2),
            "first_s": None if first is None else round(first, 2),
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
