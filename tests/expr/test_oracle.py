"""The z3 subexpression oracle: the spec's examples, every hand-built μGraph's tensors, the
cache and its counters."""
from __future__ import annotations

import pickle
import sys
from pathlib import Path

import pytest

import mirage_lab as mi
from mirage_lab import examples
from mirage_lab.errors import MirageLabError
from mirage_lab.expr import SubexprOracle, abstract, abstract_block_graph, abstract_graph, is_subexpression
from mirage_lab.expr import terms as T

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "verify"))
import verify_graphs as vg  # noqa: E402

x0, x1, x2 = T.var(0), T.var(1), T.var(2)


def _all_exprs(g):
    env = abstract_graph(g)
    out = list(env.values())
    for op in g.customized_ops:
        vals = abstract_block_graph(op.block_graph, [env[t.guid] for t in op.inputs])
        out += list(vals.values())
    return out


def test_rms_norm_linear_partial_sums_are_subexpressions():
    target = abstract(examples.rms_norm_linear_program(16, 4096, 4096).outputs[0])
    o = SubexprOracle([target])
    assert o.check(T.red(128, T.mul(x0, x1)))                 # the in-loop tile matmul
    assert o.check(T.red(32, T.red(128, T.mul(x0, x1))))      # after the plain accumulator
    assert o.check(T.red(128, T.mul(x1, x0)))                 # commuted
    assert o.check(T.rms(4096, x0))                           # the rms accumulator
    assert o.check(T.div(T.red(4096, T.mul(x0, x1)), T.rms(4096, x0)))  # the division moved past the matmul
    for e in _all_exprs(examples.rms_norm_linear_fused(16, 4096, 4096)):
        assert o.check(e), str(e)
    assert o.z3_unknown == 0


def test_wrong_expressions_are_not_subexpressions():
    target = abstract(examples.rms_norm_linear_program(16, 4096, 4096).outputs[0])
    o = SubexprOracle([target])
    assert not o.check(T.exp(x0))                             # a symbol the target lacks
    assert not o.check(T.div(x0, x1))
    assert not o.check(T.red(4096, T.mul(x0, x0)))
    assert not o.check(T.mul(T.var(2), x0))                   # an input the target lacks
    gqa = abstract(examples.gqa_program().outputs[0])
    q = SubexprOracle([gqa])
    assert not q.check(T.exp(x1))                             # exp of the wrong operand
    assert not q.check(T.exp(T.red(64, T.mul(x0, x2))))
    assert not q.check(T.red(4096, T.mul(T.exp(T.red(64, T.mul(x0, x1))), x0)))
    e = T.exp(T.red(64, T.mul(x0, x1)))
    assert not q.check(T.div(e, T.red(64, e)))                # normalised by the wrong sum


def test_gqa_partial_sums_are_subexpressions():
    target = abstract(examples.gqa_program().outputs[0])
    o = SubexprOracle([target])
    e = T.exp(T.red(64, T.mul(x0, x1)))
    assert o.check(T.red(4, e)) and o.check(T.red(512, T.mul(e, x2)))
    assert o.check(T.exp(T.red(64, T.mul(x1, x0))))
    for g in (examples.gqa_flashdecoding(), vg.attention_onekernel(2, 256, 64, 4096, 16, 64)):
        for ex in _all_exprs(g):
            assert o.check(ex), str(ex)


# The hand-built μGraphs written in the spec's vocabulary (rms accumulators, not mean+sqrt).
SPEC_VOCABULARY = ["rms_norm_linear", "rms_linear_block_rmsnorm", "gqa_flashdecoding", "attention_onekernel",
                   "gated_mlp", "lora_3_matmuls", "lora_concat", "softmax", "splitk_2d_grid",
                   "two_linear_kernel_add", "two_linear_distributed", "epilogue", "pow_sqrt", "two_outputs_swapped"]


@pytest.mark.parametrize("name", SPEC_VOCABULARY)
def test_every_tensor_of_a_valid_mugraph_survives_pruning(name):
    prog, fused = (f() for f in vg.pairs("small")[name])
    env = abstract_graph(prog)
    o = SubexprOracle([env[t.guid] for t in prog.outputs])
    for e in _all_exprs(fused):
        assert o.check(e), f"{name}: {e} pruned"


def test_mean_sqrt_rms_is_outside_the_abstraction():
    """rms is its own symbol: computing it from square/mean/sqrt is pruned (as in Mirage)."""
    prog, fused = (f() for f in vg.pairs("small")["rms_linear_mean_sqrt"])
    o = SubexprOracle([abstract(prog.outputs[0])])
    assert not o.check(abstract(fused.outputs[0]))


def test_cache_counters_and_pickling():
    target = abstract(examples.gqa_program(2, 32, 16, 256).outputs[0])
    o = SubexprOracle([target])
    e = T.red(4, T.exp(T.red(16, T.mul(x0, x1))))
    assert o.check(e) and o.misses == 1 and o.hits == 0
    assert o(e) and o.hits == 1
    st = o.stats()
    assert st["cached"] == 1 and st["z3_calls"] == 1
    o2 = pickle.loads(pickle.dumps(o))
    assert o2.check(e) and o2.hits == 2 and o2.z3_calls == 1         # answered from the shipped cache
    assert not o2.check(T.exp(x2)) and o2.check(T.red(8, T.exp(T.red(16, T.mul(x0, x1)))))


def test_multiple_targets_and_module_function():
    p = vg.two_outputs_program(4, 64, 32)
    ts = [abstract(t) for t in p.outputs]
    m = T.red(64, T.mul(x0, x1))
    assert is_subexpression(T.exp(m), ts) and is_subexpression(T.silu(m), ts)
    assert not is_subexpression(T.gelu(m), ts)
    assert is_subexpression(T.red(8, T.mul(x0, x1)), ts[0])


def test_bad_arguments():
    with pytest.raises(MirageLabError, match="non-empty"):
        SubexprOracle([])
    o = SubexprOracle([x0])
    with pytest.raises(MirageLabError, match="expected an Expr"):
        o.check("x0")


def _rewrites(e):
    """One-step rewrites of ``e`` at its root by the spec's equivalence axioms (both ways)."""
    out = []
    a = e.args
    if e.op in ("add", "mul"):
        f = T.add if e.op == "add" else T.mul
        out.append(f(a[1], a[0]))
        if a[1].op == e.op:
            out.append(f(f(a[0], a[1].args[0]), a[1].args[1]))
    if e.op == "add" and a[0].op == "mul" and a[1].op == "mul" and a[0].args[1] is a[1].args[1]:
        out.append(T.mul(T.add(a[0].args[0], a[1].args[0]), a[0].args[1]))
    if e.op == "mul" and a[0].op == "add":
        out.append(T.add(T.mul(a[0].args[0], a[1]), T.mul(a[0].args[1], a[1])))
    if e.op == "add" and a[0].op == "div" and a[1].op == "div" and a[0].args[1] is a[1].args[1]:
        out.append(T.div(T.add(a[0].args[0], a[1].args[0]), a[0].args[1]))
    if e.op == "mul" and a[1].op == "div":
        out.append(T.div(T.mul(a[0], a[1].args[0]), a[1].args[1]))
    if e.op == "sum" and a[0].op == "mul":
        out.append(T.mul(T.red(e.n, a[0].args[0]), a[0].args[1]))
    if e.op == "sum" and a[0].op == "div":
        out.append(T.div(T.red(e.n, a[0].args[0]), a[0].args[1]))
    return out


def _rewrite_anywhere(e, rng):
    if e.args and rng.random() < 0.6:
        i = rng.randrange(len(e.args))
        args = list(e.args)
        args[i] = _rewrite_anywhere(args[i], rng)
        return T._make(e.op, tuple(args), e.n)
    rs = _rewrites(e)
    return rng.choice(rs) if rs else e


def test_signatures_are_invariant_under_the_equivalence_axioms():
    import random

    rng = random.Random(0)
    targets = [abstract(examples.rms_norm_linear_program(16, 4096, 4096).outputs[0]),
               abstract(examples.gqa_program().outputs[0]),
               abstract(vg.lora_program(8, 64, 32, 8).outputs[0]),
               abstract(vg.two_linear_program(4, 64, 32).outputs[0])]
    changed = 0
    for t in targets:
        e = t
        for _ in range(200):
            e2 = _rewrite_anywhere(e, rng)
            changed += e2 is not e
            assert T.signatures(e2) == T.signatures(t)
            e = e2
    assert changed > 100


def test_exp_sees_its_constant():
    """exp(c·y) is not exp(y): the oracle, its shortcuts and the search's prefilter all tell them apart."""
    from mirage_lab.search.prefilter import may_be_subexpression

    y = T.red(64, T.mul(T.var(0), T.var(1)))
    for c in (1.113, 0.887, 114.0, 1 / 114):
        target = T.exp(T.scale(c, y))
        o = SubexprOracle([target])
        assert o.check(T.exp(T.scale(c, y))) and o.check(T.scale(c, y)) and o.check(y)
        assert not o.check(T.exp(y)) and not o.check(T.exp(T.scale(2 * c, y)))
        assert not may_be_subexpression(T.exp(y), [target])
        assert may_be_subexpression(T.exp(T.scale(c, T.red(8, T.mul(T.var(0), T.var(1))))), [target])
    # inside a larger term too
    t = T.add(T.exp(T.scale(0.5, T.var(0))), T.var(1))
    o = SubexprOracle([t])
    assert not o._decide(T.add(T.exp(T.var(0)), T.var(1)))
    assert o._decide(T.add(T.var(1), T.exp(T.scale(0.5, T.var(0)))))
