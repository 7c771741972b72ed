"""Which FlashDecoding schedule of GQA 2x256 runs fastest: KV splits, query blocks, loop range.

The search's attention preset builds split-KV μGraphs on Mirage's grids; for GQA 2x256x64x4096
it returns grid (2,16,4) with 16 iterations of 16 keys (51 µs on an H100, benchmarks/RESULTS.md).
This times hand-built μGraphs of the same form (``mirage_lab.examples.gqa_flashdecoding``) over
a range of schedules through the pipeline's own autotuner (every lowering variant, compiled in
parallel, checked against the float64 reference, timed in CUDA graphs with inputs rotated), and
prints the best variant of each schedule beside torch.

    python benchmarks/attention_schedule_bench.py [--seconds 240] [--shape 2,256,64,4096]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mirage_lab.errors import MirageLabError  # noqa: E402
from mirage_lab.examples import gqa_flashdecoding, gqa_program  # noqa: E402
from mirage_lab.pipeline.autotune import autotune  # noqa: E402

# (kv splits, query blocks, loop range)
SCHEDULES = [(16, 4, 16), (16, 4, 8), (16, 8, 4), (32, 4, 8), (32, 4, 4), (32, 8, 2), (32, 8, 4),
             (64, 4, 4), (64, 4, 2), (64, 8, 2), (64, 8, 1), (64, 16, 1), (128, 4, 2), (128, 8, 1), (8, 16, 4)]


def build(shape: tuple[int, int, int, int], schedules: list[tuple[int, int, int]] = SCHEDULES) -> tuple[list, list]:
    b, q, d, kv = shape
    cands, names = [], []
    for s, qb, fr in schedules:
        try:
            g = gqa_flashdecoding(b, q, d, kv, kv_splits=s, q_blocks=qb, forloop_range=fr, combine_blocks=q // 2)
        except MirageLabError as e:
            print(f"skip splits {s} qblocks {qb} frange {fr}: {e}")
            continue
        cands.append(g)
        names.append(f"splits {s}, {q // qb} queries/block, {kv // s // fr} keys/iteration")
    return cands, names


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=240.0)
    ap.add_argument("--shape", default="2,256,64,4096")
    ap.add_argument("--schedules", default="", help="'splits,qblocks,frange;...' (default: the list above)")
    a = ap.parse_args()
    shape = tuple(int(v) for v in a.shape.split(","))
    chosen = [tuple(int(v) for v in x.split(",")) for x in a.schedules.split(";") if x] or SCHEDULES
    cands, names = build(shape, chosen)  # type: ignore[arg-type]
    rep = autotune(gqa_program(*shape), cands, tune_seconds=a.seconds, baselines="all")
    print(f"{rep.device}; {len(rep.results)} variants, {rep.untried} untried, {rep.seconds:.0f} s")
    best: dict[int, object] = {}
    for r in rep.results:
        c = r.variant.candidate
        if r.ok and r.timings and (c not in best or r.median_us < best[c].median_us):
            best[c] = r
    print("| schedule | best variant | µs | estimate µs |")
    print("|---|---|---|---|")
    for c, r in sorted(best.items(), key=lambda kv: kv[1].median_us):
        print(f"| {names[c]} | t{r.variant.threads} {r.variant.options.tag()} | {r.median_us:.1f} | {r.estimate.us:.1f} |")
    errs = [r for r in rep.results if r.error]
    for r in errs[:8]:
        print(f"error {names[r.variant.candidate]} {r.variant.tag}: {r.error[:160]}")
    for k, v in rep.baselines.items():
        print(f"baseline {k}: {getattr(v, 'median_us', v)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
