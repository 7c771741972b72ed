"""No false positives in practice: mutants of real μGraphs that the float interpreter shows
to compute something else are all rejected by the verifier with the default 2 tests.

Mutants come from every hand-built μGraph of verify_graphs.py and from its program (single
edits plus random double edits, see verify_mutants.py). A mutant counts as "actually
equivalent" when the float64 interpreter agrees with the program on a mixed-sign and a
positive random input (then it is skipped from the false-positive count, and checked for
false negatives instead).
"""
from __future__ import annotations

import itertools
import random
from collections import Counter

import pytest
import torch

import mirage_lab as mi

import verify_graphs as vg
import verify_mutants as vm

# Ops the field models by a stand-in rather than their real function (no notion of sign or
# size in Z_p): a mutant that is equivalent only because relu(exp(x)) = exp(x), gelu(x) ≈ x for
# large x, sqrt(x²) = |x|, ... may be rejected. Anything else rejected is a false negative.
_STAND_INS = ("relu", "gelu", "silu", "clamp", "sqrt", "pow", "square")


def _uses_stand_ins(g: mi.KernelGraph) -> bool:
    types = {op.op_type for op in g.ops}
    for op in g.customized_ops:
        types |= {b.op_type for b in op.block_graph.ops}
    return bool(types & set(_STAND_INS))


def _close(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.shape != b.shape:
        return False
    an, bn = torch.isnan(a), torch.isnan(b)
    if not torch.equal(an, bn):
        return False
    a, b = a[~an], b[~bn]
    ai, bi = torch.isinf(a), torch.isinf(b)
    if not torch.equal(ai, bi) or not torch.equal(a[ai], b[bi]):
        return False
    a, b = a[~ai], b[~bi]
    if a.numel() == 0:
        return True
    scale = a.abs().max().item()
    return bool(((a - b).abs() <= 1e-7 * (a.abs() + b.abs()) + 1e-9 * scale).all())


def _ref_equivalent(prog: mi.KernelGraph, m: mi.KernelGraph, inputs, wants) -> bool:
    n = len(prog.outputs)
    for x, want in zip(inputs, wants):
        got = mi.run_reference(m, x)
        if not any(all(_close(got[p[i]], want[i]) for i in range(n)) for p in itertools.permutations(range(n))):
            return False
    return True


@pytest.fixture
def one_torch_thread():
    # Tiny torch matmuls on a busy 2-core box pay ~20 ms each waking the second thread.
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def test_mutants_are_rejected(one_torch_thread):
    rng = random.Random(0)
    torch.manual_seed(0)
    stats: Counter = Counter()
    false_pos, false_neg = [], []
    seed = 0
    for name, (make_prog, make_fused) in vg.pairs("mut").items():
        prog = make_prog()
        inputs = [[torch.randn(t.dims, dtype=torch.float64) for t in prog.inputs],
                  [torch.rand(t.dims, dtype=torch.float64) + 0.5 for t in prog.inputs]]
        wants = [mi.run_reference(prog, x) for x in inputs]
        out_shapes = sorted(t.dims for t in prog.outputs)
        for base in (make_fused(), prog):
            for desc, m in vm.mutants(base, rng, double=40):
                stats["built"] += 1
                seed += 1
                r = mi.verify.equivalent(prog, m, seed=seed, backend="numpy")  # default tests=2
                if sorted(t.dims for t in m.outputs) != out_shapes or len(m.outputs) != len(prog.outputs):
                    stats["other output shapes"] += 1
                    assert not r, f"{name}: {desc}: outputs of other shapes accepted"
                    continue
                if _ref_equivalent(prog, m, inputs, wants):
                    stats["actually equivalent (skipped)"] += 1
                    if r:
                        stats["  of those, accepted"] += 1
                    elif not _uses_stand_ins(m):
                        false_neg.append(f"{name}: {desc}: {r.reason}")
                    continue
                stats["non-equivalent, same output shapes"] += 1
                if r:
                    false_pos.append(f"{name}: {desc}")
    print("\nverifier mutant corpus:", dict(stats))
    print(f"rejected {stats['non-equivalent, same output shapes'] - len(false_pos)} of "
          f"{stats['non-equivalent, same output shapes']} non-equivalent mutants (same output shapes) with tests=2")
    assert stats["non-equivalent, same output shapes"] >= 1000
    assert not false_pos, f"{len(false_pos)} false positives: {false_pos[:10]}"
    assert not false_neg, f"{len(false_neg)} false negatives: {false_neg[:10]}"
    assert stats["  of those, accepted"] > 0.8 * stats["actually equivalent (skipped)"]


def test_commuted_operands_are_accepted():
    """Swapping the operands of add/mul anywhere is a true equivalence: always accepted."""
    rng = random.Random(1)
    n = 0
    for name, (make_prog, make_fused) in vg.pairs("mut").items():
        prog = make_prog()
        for base in (make_fused(), prog):
            for desc, m in vm.mutants(base, rng):
                if desc.startswith("swap operands") and ("(add)" in desc or "(mul)" in desc):
                    n += 1
                    assert mi.verify.equivalent(prog, m, seed=n), f"{name}: {desc}"
    assert n >= 10
