"""A/B on the GPU: register-blocked tensor-core staged matmuls against tiles dealt round-robin.

A staged ``mma.m16n8k16`` matmul dealt its 16x8 output tiles to warps round-robin, each tile with its
own k loop, so every k-step of every tile read its A fragment (4 shared loads) and B fragment (2) again:
6 shared loads a mma, 768 bytes, where the tensor cores need a fraction of that time.
``StagedMmaEmitter.register_blocking`` gives each warp an R x C block of tiles in one k loop (4R + 2C
loads for R x C mma). This probe lowers the fastest variants a tuner dump measured (``suite_bench.py
--dump``: its ``variants`` rows and ``tuned`` graphs) with the switch off and on, checks both against
float64 and times them in one process (CUDA events, inputs rotated past L2, plain calls and CUDA-graph
replays), beside the dump's own measurement of the variant.

    python benchmarks/probes/mma_blocking_probe.py --dumps d1.json,d2.json --top 3
"""
from __future__ import annotations

import argparse
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
from mirage_lab.codegen.staged_mma import StagedMmaEmitter  # noqa: E402
from mirage_lab.ir.serialize import from_dict  # noqa: E402
from mirage_lab.pipeline import with_block_dim  # noqa: E402
from rank_quality import options_from_tag  # noqa: E402

DUMPS = sorted((ROOT / "benchmarks" / "found" / "h200_2026-11-29c" / "dumps_call4").glob("gated_mlp_silu_*.json"))


def fastest(d: dict, top: int) -> list[dict]:
    """The dump's ``top`` fastest measured variant rows whose graph it kept."""
    rows = [r for r in d["variants"] if r.get("median_us") and str(r["candidate"]) in d.get("tuned", {})]
    return sorted(rows, key=lambda r: r["median_us"])[:top]


def dump_lowerings(paths: str, top: int):
    """``(program, row, graph, options, table row prefix)`` of the ``top`` fastest measured variants of each dump
    in the comma-separated ``paths``, the graph at the variant's threads."""
    for path in paths.split(","):
        d = json.loads(Path(path).read_text())
        name = Path(path).stem
        for r in fastest(d, top):
            g = with_block_dim(from_dict(d["tuned"][str(r["candidate"])]), r["threads"])
            row = f"| {name} | {r['candidate']} | {r['threads']} | {r['options']} | {r['median_us']:.1f} |"
            yield name, r, g, options_from_tag(r["options"]), row


def print_timed(row: str, label: str, tag: str, text: str, g, tmp: Path) -> None:
    """Check and time module ``text`` of ``g`` (``codegen_ab_probe.measure``) and print its table row, or why not."""
    try:
        err, dev, gdev = measure(tag, text, g, tmp)
    except Exception as e:  # noqa: BLE001 - e.g. a launch that needs more registers or shared memory than it may have
        print(f"{row} {label} | {type(e).__name__}: {str(e)[:80]} | | |", flush=True)
        return
    print(f"{row} {label} | {err:.1e} | {dev:.2f} | {gdev:.2f} |", flush=True)


def source(g, options, blocking: bool) -> str:
    """The module of ``g`` with register blocking on or off."""
    keep = StagedMmaEmitter.register_blocking
    StagedMmaEmitter.register_blocking = blocking
    try:
        return generate_module(g, options=options).source
    finally:
        StagedMmaEmitter.register_blocking = keep


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dumps", default=",".join(map(str, DUMPS)), help="suite_bench --dump files (comma-separated)")
    ap.add_argument("--top", type=int, default=3, help="fastest measured variants per dump")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp())
    print(torch.cuda.get_device_name(), flush=True)
    print("| program | cand | threads | options | dump µs | blocking | rel err | call µs | graph µs |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, r, g, opts, row in dump_lowerings(a.dumps, a.top):
        off, on = source(g, opts, False), source(g, opts, True)
        for label, text in (("off", off), ("on", on)):
            if label == "on" and text == off:
                print(f"{row} on: the same source | | | |", flush=True)
                continue
            tag = f"{name}_{r['candidate']}_{r['threads']}_{r['options'].replace('-', '_')}_{label}"
            print_timed(row, label, tag, text, g, tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
