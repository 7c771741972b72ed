"""The kernel-graph builder API, exercised with the seed programs exactly as the seeds write them."""
from __future__ import annotations

import pytest
import torch

import mirage_lab as mi
from mirage_lab import examples as ex


def test_readme_rmsnorm_program_from_seed():
    # ../shared/seeds/000 and 004, verbatim (batch_size=16, output_dim=6144).
    graph = mi.new_kernel_graph()
    X = graph.new_input(dims=(16, 4096), dtype=mi.float16)
    Wqkv = graph.new_input(dims=(4096, 6144), dtype=mi.float16)
    Y = graph.rms_norm(X, normalized_shape=(4096,))
    Z = graph.matmul(Y, Wqkv)
    graph.mark_output(Y)
    assert Y.dims == (16, 4096) and Z.dims == (16, 6144)
    assert [t.dims for t in graph.inputs] == [(16, 4096), (4096, 6144)]
    assert graph.outputs == [Y]
    assert [op.op_type for op in graph.ops] == ["input", "input", "rms_norm", "matmul"]
    assert all(t.dtype is mi.float16 for t in graph.tensors)


def test_readme_gqa_program_from_seed():
    # ../shared/seeds/001, verbatim; the seed never marks O, so the test does.
    graph = mi.new_kernel_graph()
    Q = graph.new_input(dims=(2, 256, 64), dtype=mi.float16)
    K = graph.new_input(dims=(2, 64, 4096), dtype=mi.float16)
    V = graph.new_input(dims=(2, 4096, 64), dtype=mi.float16)
    A = graph.matmul(Q, K)
    E = graph.exp(A)
    S = graph.reduction(E, 2)
    D = graph.div(E, S)
    O = graph.matmul(D, V)
    graph.mark_output(O)
    assert A.dims == (2, 256, 4096)
    assert S.dims == (2, 256, 1)  # reduction keeps the reduced dim with size 1
    assert D.dims == (2, 256, 4096)  # [2,256,4096] / [2,256,1] broadcasts
    assert O.dims == (2, 256, 64)
    assert graph.ops[5].attrs == {"dim": 2}


def test_readme_rmsnorm_matmul_without_normalized_shape():
    # seeds/001's second example calls rms_norm(X) with no shape; with the right W it builds.
    graph = mi.new_kernel_graph()
    X = graph.new_input(dims=(16, 4096), dtype=mi.float16)
    W = graph.new_input(dims=(4096, 4096), dtype=mi.float16)
    O = graph.matmul(graph.rms_norm(X), W)
    graph.mark_output(O)
    assert O.dims == (16, 4096)


def test_readme_typo_406_raises_clear_error():
    # seeds/001 literally writes W = new_input(dims=(406, 4096)): the matmul cannot work.
    graph = mi.new_kernel_graph()
    X = graph.new_input(dims=(16, 4096), dtype=mi.float16)
    W = graph.new_input(dims=(406, 4096), dtype=mi.float16)
    with pytest.raises(mi.GraphBuildError) as info:
        graph.matmul(graph.rms_norm(X), W)
    msg = str(info.value)
    assert msg.startswith("matmul:")
    assert "[16,4096]" in msg and "[406,4096]" in msg
    assert "4096 == 406" in msg
    assert "[4096,406]" in msg  # the suggested fix: the operand looks transposed
    assert isinstance(info.value, mi.MirageLabError) and isinstance(info.value, ValueError)


def test_tutorial_rms_norm_with_weight_tensor():
    # seeds/003 writes rms_norm(X, G) with G of shape (1, 4096): a weighted RMSNorm.
    graph = mi.new_kernel_graph()
    X = graph.new_input(dims=(16, 4096), dtype=mi.float16)
    G = graph.new_input(dims=(1, 4096), dtype=mi.float16)
    W = graph.new_input(dims=(4096, 4096), dtype=mi.float16)  # the tutorial's 406 fixed
    O = graph.matmul(graph.rms_norm(X, G), W)
    graph.mark_output(O)
    assert O.dims == (16, 4096)
    assert [op.op_type for op in graph.ops] == ["input", "input", "input", "rms_norm", "mul", "matmul"]
    # and it computes x / rms(x) * g
    x, g, w = torch.randn(16, 4096), torch.rand(1, 4096) + 0.5, torch.randn(4096, 4096)
    (out,) = mi.run_reference(graph, [x, g, w])  # float32 tensors are computed in float32
    ref = (x / x.pow(2).mean(-1, keepdim=True).sqrt() * g) @ w
    assert torch.allclose(out, ref, rtol=1e-4, atol=1e-3)


def test_tutorial_typo_406_with_weight_raises():
    graph = mi.new_kernel_graph()
    X = graph.new_input(dims=(16, 4096), dtype=mi.float16)
    G = graph.new_input(dims=(1, 4096), dtype=mi.float16)
    W = graph.new_input(dims=(406, 4096), dtype=mi.float16)
    with pytest.raises(mi.GraphBuildError, match=r"matmul: inner dimensions differ: \[16,4096\] x \[406,4096\]"):
        graph.matmul(graph.rms_norm(X, G), W)


@pytest.mark.parametrize("value, expected", [
    (mi.float16, mi.float16), (mi.bfloat16, mi.bfloat16), (mi.float32, mi.float32),
    ("float16", mi.float16), ("fp32", mi.float32), ("bf16", mi.bfloat16),
    (torch.float16, mi.float16), (torch.bfloat16, mi.bfloat16), (torch.float32, mi.float32),
])
def test_dtype_spellings(value, expected):
    g = mi.new_kernel_graph()
    assert g.new_input((2, 3), dtype=value).dtype is expected


def test_default_dtype_is_float16_and_strides_kept():
    g = mi.new_kernel_graph()
    t = g.new_input((4, 8), strides=(1, 4))
    assert t.dtype is mi.float16
    assert g.ops[0].attrs["strides"] == (1, 4)
    assert t.nbytes() == 64


@pytest.mark.parametrize("a, b, out", [
    ((16, 1), (16, 4096), (16, 4096)),
    ((1, 4096), (16, 1), (16, 4096)),
    ((2, 256, 4096), (2, 256, 1), (2, 256, 4096)),
])
def test_broadcasting_rule(a, b, out):
    g = mi.new_kernel_graph()
    A, B = g.new_input(a), g.new_input(b)
    for op in (g.add, g.mul, g.div, g.pow):
        assert op(A, B).dims == out


def test_unary_ops_keep_shape_and_clamp_records_bounds():
    g = mi.new_kernel_graph()
    x = g.new_input((8, 64), dtype=mi.float32)
    for name in ("exp", "silu", "gelu", "relu", "sqrt", "square"):
        assert getattr(g, name)(x).dims == (8, 64)
    c = g.clamp(x, -1, 2.5)
    assert c.op.attrs == {"lo": -1.0, "hi": 2.5}


def test_batched_matmul_and_reduction_negative_dim():
    g = mi.new_kernel_graph()
    a, b = g.new_input((3, 5, 7)), g.new_input((3, 7, 2))
    assert g.matmul(a, b).dims == (3, 5, 2)
    r = g.reduction(a, -1)
    assert r.dims == (3, 5, 1) and r.op.attrs["dim"] == 2


def test_block_graph_docstring_example_builds():
    g = mi.new_kernel_graph()
    X = g.new_input((16, 4096)); W = g.new_input((4096, 4096))
    bg = mi.new_threadblock_graph(grid_dim=(64, 1, 1), block_dim=(128, 1, 1), forloop_range=64, reduction_dimx=64)
    x = bg.new_input(X, input_map=(-1, -1, -1), forloop_dim=1)
    w = bg.new_input(W, input_map=(1, -1, -1), forloop_dim=0)
    assert x.dims == (16, 64) and w.dims == (64, 64)
    r = bg.forloop_accum(x, "rms")
    m = bg.forloop_accum(bg.matmul(x, w))
    assert r.dims == (16, 1) and r.after_accum and m.dims == (16, 64)
    bg.new_output(bg.div(m, r), output_map=(1, -1, -1))
    (O,) = g.customized([X, W], bg)
    assert O.dims == (16, 4096)
    assert g.customized_ops[0].block_graph is bg


def test_input_tile_rules_of_spec_section_7():
    # MIRAGE_SPEC §7, GQA kernel 1: grid (2,8,16), frange 4.
    f = ex.gqa_flashdecoding()
    k1, k2 = (op.block_graph for op in f.customized_ops)
    assert k1.grid_dim == (2, 8, 16) and k1.forloop_range == 4
    assert [op.outputs[0].dims for op in k1.input_ops] == [(1, 16, 64), (1, 64, 128), (1, 128, 64)]
    assert [t.dims for t in f.customized_ops[0].outputs] == [(2, 256, 1024), (2, 256, 512)]
    assert k2.grid_dim == (2, 16, 1) and k2.forloop_range == 1
    assert f.outputs[0].dims == (2, 256, 64)
    # RMSNorm+Linear (rmsnorm_bs1 graph 0): grid 256, frange 32, X tile (2,128), W tile (128,24).
    r = ex.rms_norm_linear_fused(2, 4096, 6144)
    bg = r.customized_ops[0].block_graph
    assert bg.grid_dim == (256, 1, 1) and bg.forloop_range == 32
    assert [op.outputs[0].dims for op in bg.input_ops] == [(2, 128), (128, 24)]


def test_axis_of_size_one_is_ignored_in_maps():
    g = mi.new_kernel_graph()
    X = g.new_input((8, 64))
    bg = mi.new_threadblock_graph((4, 1, 1), forloop_range=1)
    x = bg.new_input(X, input_map=(1, 0, -1))  # y has size 1: its mapping splits nothing
    assert x.dims == (8, 16)
    assert bg.input_ops[0].attrs["input_map"] == (1, -1, -1)


def test_graph_prints_readably():
    text = repr(ex.rms_norm_linear_fused(16, 4096, 4096))
    assert "customized(t0, t1)" in text
    assert "BlockGraph(grid=(256, 1, 1), block=(128, 1, 1), forloop_range=32)" in text
    assert "load(in0, imap={x->φ}, fmap=1)" in text
    assert "accum(s0, 'rms')" in text
    assert "save(s5, omap={x->1})" in text
    assert "[after loop]" in text
