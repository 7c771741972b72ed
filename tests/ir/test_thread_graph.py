"""Thread-level fusion chains (MIRAGE_SPEC §1.4): an elementwise unary op or a plain (NO_RED)
accumulator fuses into its producer when that producer has exactly one consumer and is not an
input loader or a plain accumulator."""
from __future__ import annotations

import mirage_lab as mi
from mirage_lab import examples as ex
from mirage_lab.ir import FusionChain, ThreadGraph


def chains(bg: mi.BlockGraph) -> list[str]:
    return [c.describe() for c in bg.thread_graph().chains]


def _bg(grid=(4, 1, 1), frange=2):
    g = mi.new_kernel_graph()
    A = g.new_input((16, 64), dtype=mi.float32)
    B = g.new_input((64, 32), dtype=mi.float32)
    bg = mi.new_threadblock_graph(grid, forloop_range=frange)
    a = bg.new_input(A, input_map=(-1, -1, -1), forloop_dim=1)   # [16,32]
    b = bg.new_input(B, input_map=(1, -1, -1), forloop_dim=0)    # [32,8]
    return bg, a, b


def test_matmul_exp_chain_with_accumulator_tail():
    bg, a, b = _bg()
    e = bg.exp(bg.matmul(a, b))
    bg.new_output(bg.forloop_accum(e), output_map=(1, -1, -1))
    assert chains(bg) == ["input", "input", "matmul -> exp -> accum(none)", "output"]
    tg = bg.thread_graph()
    chain = tg.chains[2]
    assert chain.lead.op_type == "matmul"
    assert [o.op_type for o in chain.epilogue] == ["exp", "forloop_accum"]
    assert chain.output.dims == (16, 8) and chain.output.after_accum


def test_every_op_is_in_exactly_one_chain():
    for g in (ex.rms_norm_linear_fused(), ex.gqa_flashdecoding(), ex.gated_mlp_fused()):
        for op in g.customized_ops:
            tg = op.block_graph.thread_graph()
            seen = [o.guid for c in tg.chains for o in c.ops]
            assert sorted(seen) == [o.guid for o in op.block_graph.ops]
            for o in op.block_graph.ops:
                assert o in tg.chain_of(o).ops


def test_value_with_two_consumers_does_not_fuse():
    # GQA kernel 1: exp(QK) feeds both the row-sum accumulator and the second matmul.
    k1 = ex.gqa_flashdecoding().customized_ops[0].block_graph
    assert chains(k1) == ["input", "input", "input", "matmul -> exp", "accum(none)", "matmul -> accum(none)",
                          "output", "output"]


def test_two_consumers_break_the_chain_but_the_consumers_may_lead():
    bg, a, b = _bg()
    m = bg.matmul(a, b)
    e1, e2 = bg.exp(m), bg.silu(m)   # m has two consumers: neither fuses into the matmul
    s = bg.square(e1)                # e1 has one consumer: square fuses into exp
    bg.new_output(bg.forloop_accum(bg.add(s, e2)), output_map=(1, -1, -1))
    assert chains(bg) == ["input", "input", "matmul", "exp -> square", "silu", "add -> accum(none)", "output"]


def test_input_loader_never_leads_a_chain():
    bg, a, b = _bg()
    e = bg.exp(a)                    # the loader has one consumer, yet exp does not fuse into it
    s = bg.forloop_accum(e, "sum")
    bg2_out = bg.relu(s)
    assert chains(bg)[:3] == ["input", "input", "exp"]
    # and a plain accumulator directly on a loader stays alone too
    bg3, a3, b3 = _bg()
    acc = bg3.forloop_accum(a3)
    assert chains(bg3) == ["input", "input", "accum(none)"]
    # a reducing accumulator ("sum") may lead: relu fuses after it
    assert chains(bg)[-1] == "accum(sum) -> relu"
    assert bg2_out.after_accum and acc.after_accum


def test_plain_accumulator_does_not_lead():
    bg, a, b = _bg()
    acc = bg.forloop_accum(bg.matmul(a, b))        # matmul -> accum(none) fuse (store-accumulate)
    out = bg.exp(acc)                              # exp after a plain accumulator starts its own chain
    bg.new_output(bg.sqrt(out), output_map=(1, -1, -1))
    assert chains(bg) == ["input", "input", "matmul -> accum(none)", "exp -> sqrt", "output"]


def test_non_elementwise_ops_never_fuse_as_epilogue():
    bg, a, b = _bg()
    r = bg.reduction(bg.exp(bg.matmul(a, b)), 1)   # a reduction is not elementwise: it leads its own chain
    n = bg.rms_norm(r)
    acc = bg.forloop_accum(bg.mul_scalar(bg.clamp(n, -1, 1), 2.0))
    assert acc.after_accum and acc.dims == (16, 1)
    assert chains(bg) == ["input", "input", "matmul -> exp", "reduction", "rms_norm -> clamp -> mul_scalar -> accum(none)"]


def test_rmsnorm_linear_chains_and_json():
    bg = ex.rms_norm_linear_fused().customized_ops[0].block_graph
    assert chains(bg) == ["input", "input", "accum(rms)", "matmul -> accum(none)", "div", "output"]
    tg = bg.thread_graph()
    assert isinstance(tg, ThreadGraph) and all(isinstance(c, FusionChain) for c in tg.chains)
    assert tg.to_dict() == {"chains": [[0], [1], [2], [3, 4], [5], [6]]}
    assert "ThreadGraph(6 chains)" in repr(tg) and "matmul -> accum(none)" in repr(tg)
