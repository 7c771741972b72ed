"""A random sample of the verifier mutant corpus (the whole corpus: benchmarks/verifier_mutants.py).

Mutants of correct μGraphs — structural edits and scalar ones (mul_scalar constants, clamp
bounds, exp's scale, including constants that share a field element) — must all be rejected
when the float64 ground truth shows they differ, and the equivalent variants (silu as
x·sigmoid(x), a constant split in two irrational halves, scale then unscale, ...) accepted.
``MIRAGE_CORPUS_SEED`` picks another sample.
"""
from __future__ import annotations

import os

import torch

import verify_corpus as vc


def test_a_sample_of_the_corpus_has_no_false_accept():
    seed = int(os.environ.get("MIRAGE_CORPUS_SEED", "0"))
    n = torch.get_num_threads()
    torch.set_num_threads(1)   # tiny float64 graphs: a second thread only costs wake-ups
    try:
        cases = vc.sample(400, seed)
        rep = vc.evaluate(cases, seed=seed, field_k1=False)
    finally:
        torch.set_num_threads(n)
    s = rep.stats
    print(f"\ncorpus sample (seed {seed}): {dict(s)}; field-only accepts of non-equivalent mutants: "
          f"{sum(c['k2'] for c in rep.field_only_accepts.values())}")
    assert s["non-equivalent"] >= 200 and s["variants"] >= 5
    assert {"scalar value", "clamp bound", "exp scale"} <= set(rep.by_class)
    assert not rep.false_accepts, f"seed {seed}: {len(rep.false_accepts)} false accepts: {rep.false_accepts[:5]}"
    variant_classes = {c.cls for c in cases if c.variant}
    assert sum(rep.by_class[c]["false rejects"] for c in variant_classes) == 0, rep.false_rejects
    # float-equivalent mutants the field rejects: only through its stand-in ops (docs/verifier.md)
    assert all("loose ops []" not in r for r in rep.false_rejects), rep.false_rejects
