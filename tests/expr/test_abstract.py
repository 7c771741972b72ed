"""The op → abstract expression mapping (MIRAGE_SPEC §3 table), per op and per graph."""
from __future__ import annotations

import pytest

import mirage_lab as mi
from mirage_lab import examples
from mirage_lab.errors import MirageLabError
from mirage_lab.expr import abstract, abstract_graph, for_block_op, for_kernel_op
from mirage_lab.expr import terms as T

x, w, v = T.var(0), T.var(1), T.var(2)


def test_kernel_ops():
    assert for_kernel_op("matmul", {}, [x, w], [(16, 4096), (4096, 64)]) is T.red(4096, T.mul(x, w))
    assert for_kernel_op("reduction", {"dim": 2}, [x], [(2, 256, 4096)]) is T.red(4096, x)
    assert for_kernel_op("reduction", {"dim": 0}, [x], [(1, 8)]) is x  # Red(1, e) = e
    assert for_kernel_op("rms_norm", {}, [x], [(16, 4096)]) is T.div(x, T.rms(4096, x))
    assert for_kernel_op("clamp", {"lo": 0, "hi": 1}, [x], [(2,)]) is T.clamp(0, 1, x)
    for op in ("exp", "silu", "gelu", "relu", "sqrt", "square"):
        assert for_kernel_op(op, {}, [x], [(2,)]).op == op
    for op in ("add", "mul", "div", "pow"):
        assert for_kernel_op(op, {}, [x, w], [(2,), (2,)]).args == (x, w)
    with pytest.raises(MirageLabError, match="no abstract expression"):
        for_kernel_op("customized", {}, [x], [(2,)])


def test_block_ops_and_accumulators():
    tile = [(16, 128)]
    assert for_block_op("input", {}, [x], tile) is x
    assert for_block_op("output", {}, [x], tile) is x
    assert for_block_op("mul_scalar", {"scalar": 0.5}, [x], tile) is T.scale(0.5, x)
    assert for_block_op("matmul", {}, [x, w], [(16, 128), (128, 24)]) is T.red(128, T.mul(x, w))  # the tile's k
    fr = 32
    acc = lambda kind: for_block_op("forloop_accum", {"acc": kind}, [x], tile, forloop_range=fr, reduction_dimx=64)
    assert acc(None) is T.red(32, x)
    assert acc("sum") is T.red(4096, x) and acc("mean") is T.scale(1 / 4096, T.red(4096, x))
    assert acc("sum_todimx") is T.red(4096 // 64, x)
    assert acc("rms") is T.rms(4096, x)
    assert for_block_op("rms_norm", {}, [x], tile) is T.div(x, T.rms(128, x))
    assert for_block_op("sub", {}, [x, w], tile * 2) is T.add(x, T.neg(w))
    assert for_block_op("reduction", {"dim": 1}, [x], tile) is T.red(128, x)


def test_constants_move_out_of_sums_and_products_but_stay_under_exp():
    s = for_block_op("mul_scalar", {"scalar": 0.125}, [x], [(16, 128)])
    m = for_block_op("matmul", {}, [s, w], [(16, 128), (128, 24)])
    assert m is T.scale(0.125, T.red(128, T.mul(x, w)))
    assert T.exp(m) is not T.exp(T.red(128, T.mul(x, w)))
    assert str(T.exp(m)) == "exp(scale(0.125, sum(128, mul(x0, x1))))"
    # two scalings of 2**-0.5 are one of 0.5 (to 12 digits), as in the reals
    assert T.scale(2 ** -0.5, T.scale(2 ** -0.5, x)) is T.scale(0.5, x)
    assert T.square(T.scale(3, x)) is T.scale(9, T.square(x))
    assert T.rms(8, T.scale(-2, x)) is T.scale(2, T.rms(8, x))
    # a mean then exp is the same expression as a sum scaled by 1/n then exp
    mean = for_block_op("forloop_accum", {"acc": "mean"}, [x], [(16, 128)], forloop_range=2)
    summed = for_block_op("forloop_accum", {"acc": "sum"}, [x], [(16, 128)], forloop_range=2)
    assert T.exp(mean) is T.exp(for_block_op("mul_scalar", {"scalar": 1 / 256}, [summed], [(16, 1)]))


def test_concat_then_matmul_splits_into_two_products():
    a = for_block_op("concat", {"dim": 1}, [x, v], [(8, 64), (8, 4)])
    b = for_block_op("concat", {"dim": 0}, [w, T.var(3)], [(64, 32), (4, 32)])
    m = for_block_op("matmul", {}, [a, b], [(8, 68), (68, 32)])
    assert m is T.add(T.red(64, T.mul(x, w)), T.red(4, T.mul(v, T.var(3))))


def test_whole_graphs():
    g = examples.rms_norm_linear_program(16, 4096, 4096)
    target = abstract(g.outputs[0])
    assert str(target) == "sum(4096, mul(div(x0, rms(4096, x0)), x1))"
    f = examples.rms_norm_linear_fused(16, 4096, 4096)
    assert str(abstract(f.outputs[0])) == "div(sum(4096, mul(x0, x1)), rms(4096, x0))"
    q = examples.gqa_flashdecoding()
    assert str(abstract(q.outputs[0])) == ("div(sum(4096, mul(exp(sum(64, mul(x0, x1))), x2)), "
                                           "sum(4096, exp(sum(64, mul(x0, x1)))))")
    env = abstract_graph(q)
    assert len(env) == len(q.tensors)
    # a block tensor of a bound block graph: the partial exp sums of kernel 1
    bg = q.customized_ops[0].block_graph
    s = [op for op in bg.ops if op.op_type == "forloop_accum"][0].outputs[0]
    assert abstract(s) is T.red(4, T.exp(T.red(64, T.mul(x, w))))


def test_abstract_rejects_other_objects():
    with pytest.raises(MirageLabError, match="DTensor or STensor"):
        abstract("t0")
    with pytest.raises(MirageLabError, match="KernelGraph"):
        abstract_graph(None)
