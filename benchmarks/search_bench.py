"""Search benchmark: how fast the μGraph search finds the seed programs' fused kernels.

For each program and worker count it runs ``mi.search.search`` from scratch (default
settings, plus the preset each program needs), stopping at ``--time-limit`` seconds, and
prints: states visited, pruned by expression and by dedup, fingerprint tests, candidates,
time to the first candidate, time to the expected fused μGraph, total time, and whether
the search completed. Every expected-kind candidate is checked against the reference
interpreter on random float inputs. The top candidates are saved (``mi.save``) under
``--out`` so ``gpu_bench.py --candidates NAME=FILE`` can time them.

    python benchmarks/search_bench.py --small                  # CPU-sized shapes, minutes on 2 cores
    python benchmarks/search_bench.py --workers 1,16 --time-limit 300 --fingerprints numpy,cuda
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

import mirage_lab as mi  # noqa: E402
from mirage_lab import examples as ex  # noqa: E402
from mirage_lab.search import CancelToken, CandidateFound, Finished, Progress, search, static_cost  # noqa: E402
from mirage_lab.search.events import SearchError  # noqa: E402


def is_fused_rms(c: mi.KernelGraph) -> bool:
    if len(c.customized_ops) != 1 or static_cost(c).kernels != 1:
        return False
    bg = c.customized_ops[0].block_graph
    return any(o.op_type == "div" and o.outputs[0].after_accum for o in bg.ops) and \
        any(o.op_type == "forloop_accum" and o.attrs["acc"] == "rms" for o in bg.ops)


def is_flashdecoding(c: mi.KernelGraph) -> bool:
    """Split-KV attention: two kernels; the first computes exp and splits K's KV dim across the grid
    (the second adds up the splits: sum_todimx, or a loop over the split dim)."""
    if len(c.customized_ops) != 2 or static_cost(c).kernels != 2:
        return False
    k1 = c.customized_ops[0].block_graph
    k = [o for o in k1.ops if o.op_type == "input" and tuple(o.attrs["dtensor_dims"]) == tuple(c.inputs[1].dims)]
    return any(o.op_type == "exp" for o in k1.ops) and bool(k) and \
        any(k1.grid_dim[a] > 1 and k[0].attrs["input_map"][a] == 2 for a in range(3))


def is_one_kernel(c: mi.KernelGraph) -> bool:
    return static_cost(c).kernels == 1 and len(c.customized_ops) == 1


def programs(small: bool) -> dict[str, tuple]:
    if small:
        return {
            "rmsnorm_linear_4x256x256": (lambda: ex.rms_norm_linear_program(4, 256, 256), None, {}, is_fused_rms, 1.0),
            "gated_mlp_4x64x64": (lambda: ex.gated_mlp_program(4, 64, 64), None, {}, is_one_kernel, 1.0),
            "gqa_2x32x64x256": (lambda: ex.gqa_program(2, 32, 64, 256), "attention", {}, is_flashdecoding, 0.1),
            "gqa_decode_4x1x16x256": (lambda: ex.gqa_program(4, 1, 16, 256), "attention", {}, is_flashdecoding, 0.1),
        }
    return {
        "rmsnorm_linear_16x4096x4096": (lambda: ex.rms_norm_linear_program(16, 4096, 4096), None, {}, is_fused_rms, 1.0),
        "rmsnorm_linear_2x4096x6144": (lambda: ex.rms_norm_linear_program(2, 4096, 6144), None, {}, is_fused_rms, 1.0),
        "gated_mlp_8x4096x4096": (lambda: ex.gated_mlp_program(8, 4096, 4096), None, {}, is_one_kernel, 1.0),
        "gqa_2x256x64x4096": (lambda: ex.gqa_program(2, 256, 64, 4096), "attention", {}, is_flashdecoding, 0.1),
        "gqa_decode_64x1x128x4096": (lambda: ex.gqa_program(64, 1, 128, 4096), "attention", {}, is_flashdecoding,
                                     0.1),
    }


def check_float(program: mi.KernelGraph, cand: mi.KernelGraph, scale: float) -> float:
    ins = [torch.randn(t.dims, dtype=torch.float32) * scale for t in program.inputs]
    want = mi.run_reference(program, ins)
    got = mi.run_reference(cand, ins)
    return max(float((g - w).norm() / w.norm()) for g, w in zip(got, want))


def run_one(name: str, spec: tuple, workers: int, limit: float, out: Path | None, extra: dict) -> dict:
    make, config, kw, expected, scale = spec
    program = make()
    token = CancelToken()
    t0 = time.monotonic()
    first = first_expected = None
    states = states_expected = 0
    final = None
    cands = []
    errors = []
    for ev in search(program, config, workers=workers, cancel=token, **{**kw, **extra}):
        now = time.monotonic() - t0
        if isinstance(ev, Progress):
            states = ev.stats.states
        if isinstance(ev, CandidateFound):
            cands.append(ev.graph)
            first = first if first is not None else now
            if first_expected is None and expected(ev.graph):
                first_expected, states_expected = now, states
        elif isinstance(ev, Finished):
            final = ev
        elif isinstance(ev, SearchError):
            errors.append(ev.message)
            print("search error:", ev.message, file=sys.stderr, flush=True)
        if now > limit and not token.is_set():
            token.cancel()
    total = time.monotonic() - t0
    s = final.stats
    good = [c for c in cands if expected(c)]
    errs = [check_float(program, c, scale) for c in good[:3]]
    if out is not None:
        ranked = sorted(range(len(cands)), key=lambda i: (static_cost(cands[i]), i))
        for r, i in enumerate(ranked[:4]):
            mi.save(cands[i], out / f"{name}__cand{r}.json")
    return {"program": name, "workers": workers, "fingerprints": ",".join(final.fingerprint_backends) or "—",
            "states": s.states, "pruned_expr": s.pruned_expr,
            "pruned_dedup": s.pruned_dedup, "reused": s.reused, "fingerprint_tests": s.fingerprint_tests,
            "candidates": len(cands), "expected_found": len(good), "first_s": first, "first_expected_s": first_expected,
            "states_at_expected": states_expected if first_expected is not None else None,
            "total_s": total, "completed": final.complete and not errors, "errors": len(errors),
            "subtrees": f"{s.subtrees_done}/{s.subtrees_total}",
            "max_rel_err": max(errs) if errs else None}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--small", action="store_true", help="CPU-sized shapes")
    ap.add_argument("--programs", default="", help="comma-separated names (default: all)")
    ap.add_argument("--workers", default=f"1,{os.cpu_count()}", help="comma-separated worker counts")
    ap.add_argument("--time-limit", type=float, default=300.0, help="seconds per search before it is stopped")
    ap.add_argument("--fingerprints", default="auto",
                    help="comma-separated fingerprint backends to compare: numpy, cuda, auto")
    ap.add_argument("--no-dedup", action="store_true", help="also run once without dedup (what dedup saves)")
    ap.add_argument("--out", default="", help="folder for search_bench.json and the top candidates")
    args = ap.parse_args()
    progs = programs(args.small)
    names = [n for n in (args.programs.split(",") if args.programs else progs)]
    out = Path(args.out) if args.out else None
    if out:
        out.mkdir(parents=True, exist_ok=True)
    rows = []
    for n in names:
        for fb in args.fingerprints.split(","):
            for w in [int(x) for x in args.workers.split(",")]:
                r = run_one(n, progs[n], w, args.time_limit, out, {"fingerprint_backend": fb})
                rows.append(r)
                print(json.dumps(r), flush=True)
        if args.no_dedup:
            r = run_one(n, progs[n], max(int(x) for x in args.workers.split(",")), args.time_limit, None, {"dedup": False})
            r["program"] += " (no dedup)"
            rows.append(r)
            print(json.dumps(r), flush=True)
    hdr = ("program", "workers", "fingerprints", "states", "pruned_expr", "pruned_dedup", "reused", "fingerprint_tests", "candidates",
           "expected_found", "first_s", "first_expected_s", "states_at_expected", "total_s", "completed", "max_rel_err")
    print("\n| " + " | ".join(hdr) + " |\n|" + "---|" * len(hdr))
    for r in rows:
        cells = []
        for h in hdr:
            v = r[h]
            cells.append(f"{v:.1f}" if isinstance(v, float) and h.endswith("_s") else
                         f"{v:.1e}" if isinstance(v, float) else "—" if v is None else str(v))
        print("| " + " | ".join(cells) + " |")
    if out:
        (out / "search_bench.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
