"""Verifier reliability: the whole mutant corpus (tests/verify/verify_corpus.py), as counts.

    python benchmarks/verifier_mutants.py                 # the whole corpus (~17,000 cases, ~5 min)
    python benchmarks/verifier_mutants.py --sample 500    # a random sample
    python benchmarks/verifier_mutants.py --no-k1         # skip the field-only k = 1 run
    python benchmarks/verifier_mutants.py --cost          # only: the second check's cost at full size

Prints, per mutation class and in total: mutants built, non-equivalent ones (by the float64
ground truth), **false accepts** of ``mi.verify.equivalent`` with its defaults (tests = 2,
float64 second check "auto"), the field's own accepts of non-equivalent mutants (k = 2 and
k = 1, ``float_check="never"``: the blind spots the second check closes), float-equivalent
mutants and equivalent variants accepted and **falsely rejected**, and time: the verifier's
wall time per case and the second check's own cost per case it ran on (time.perf_counter,
one torch and BLAS thread). Exit status 1 if any false accept.

``--cost``: ``equivalent(program, fused)`` with ``float_check="never"`` and ``"auto"`` for a
full-size gated MLP (silu) and GQA (exp), best of 3 after a warm-up that fills the target's
float cache, and once with that cache cold: what the search pays per confirmed candidate.
"""
from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from collections import Counter
from pathlib import Path

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "verify"))

import torch  # noqa: E402

import verify_corpus as vc  # noqa: E402

COLS = ("mutants", "non-equivalent", "false accepts", "field k2", "field k1", "float-equivalent", "accepted",
        "false rejects", "variants")


def second_check_cost() -> None:
    import mirage_lab as mi
    from mirage_lab import examples
    from mirage_lab.verify import float_check

    f32 = mi.float32
    cases = {"gated MLP X[8,4096] W1,W2[4096,4096] (silu)": (
                 examples.gated_mlp_program(8, 4096, 4096, dtype=f32), examples.gated_mlp_fused(8, 4096, 4096, dtype=f32)),
             "GQA Q[2,32,64] K[2,64,1024] V[2,1024,64] (exp)": (
                 examples.gqa_program(2, 32, 64, 1024, dtype=f32),
                 examples.gqa_flashdecoding(2, 32, 64, 1024, kv_splits=4, q_blocks=2, forloop_range=4, dtype=f32))}
    print("| case | field only (ms) | with the second check (ms) | cold target cache (ms) |\n|---|---|---|---|")
    for name, (p, f) in cases.items():
        mi.verify.equivalent(p, f, seed=1, backend="numpy")
        row = []
        for mode in ("never", "auto"):
            ts = []
            for _ in range(3):
                t0 = time.perf_counter()
                r = mi.verify.equivalent(p, f, seed=1, backend="numpy", float_check=mode)
                ts.append(time.perf_counter() - t0)
                assert r, r.reason
            row.append(f"{1e3 * min(ts):.0f}")
        float_check._REF_CACHE.clear()
        t0 = time.perf_counter()
        mi.verify.equivalent(p, f, seed=1, backend="numpy")
        row.append(f"{1e3 * (time.perf_counter() - t0):.0f}")
        print(f"| {name} | " + " | ".join(row) + " |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sample", type=int, default=0, help="verify this many random cases instead of all")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--doubles", type=int, default=360, help="random double edits per base graph")
    ap.add_argument("--no-k1", action="store_true", help="skip the field-only run at k = 1")
    ap.add_argument("--show", type=int, default=10, help="print this many false rejects")
    ap.add_argument("--cost", action="store_true", help="only measure the second check at full size")
    a = ap.parse_args()
    torch.set_num_threads(1)
    if a.cost:
        second_check_cost()
        return 0
    t0 = time.perf_counter()
    cases = vc.sample(a.sample, a.seed, a.doubles) if a.sample else list(vc.corpus(a.doubles, a.seed))
    t_gen = time.perf_counter() - t0
    t0 = time.perf_counter()
    rep = vc.evaluate(cases, seed=a.seed, field_k1=not a.no_k1)
    t_eval = time.perf_counter() - t0
    print(f"# verifier mutant corpus: {len(cases)} cases from {len(vc.bases())} program/μGraph pairs, "
          f"seed {a.seed}, {platform.processor() or platform.machine()}, torch {torch.__version__}")
    print(f"generation {t_gen:.1f} s, evaluation {t_eval:.1f} s\n")
    print("| class | " + " | ".join(COLS) + " |")
    print("|---" * (len(COLS) + 1) + "|")
    total: Counter = Counter()
    for cls in sorted(rep.by_class):
        c = Counter(rep.by_class[cls])
        fo = rep.field_only_accepts.get(cls, Counter())
        c["field k2"], c["field k1"] = fo["k2"], fo["k1"]
        total.update(c)
        print(f"| {cls} | " + " | ".join(str(c[k]) for k in COLS) + " |")
    print("| **total** | " + " | ".join(f"**{total[k]}**" for k in COLS) + " |")
    built = total["mutants"] + total["variants"]
    print(f"\nrefused by the builder (not counted): {total['refused by the builder']}")
    print(f"false accepts: {len(rep.false_accepts)} of {total['non-equivalent']} non-equivalent "
          f"({total['mutants']} mutants built)")
    print(f"false rejects: {len(rep.false_rejects)} of {total['float-equivalent']} float-equivalent "
          f"(equivalent variants: {total['variants']}, of them accepted: "
          f"{sum(rep.by_class[c]['accepted'] for c in rep.by_class if rep.by_class[c]['variants'])})")
    print(f"verifier time: {1e3 * rep.verify_time / max(built, 1):.2f} ms per case (with the second check where it "
          f"ran); second check alone: {rep.float_checks} runs, "
          f"{1e3 * rep.float_check_time / max(rep.float_checks, 1):.2f} ms each")
    print(f"second check outcomes: {dict(rep.second_checks)} (decided: the field could not model an inexact "
          f"scalar and the float64 check alone judged)")
    for s in rep.false_accepts[:20]:
        print("FALSE ACCEPT:", s)
    for s in rep.false_rejects[:a.show]:
        print("false reject:", s)
    return 1 if rep.false_accepts else 0


if __name__ == "__main__":
    sys.exit(main())
