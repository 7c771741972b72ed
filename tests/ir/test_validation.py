"""Builder validation: one error type, a message naming the op, the shapes and the fix,
and the graph left exactly as it was before the failing call."""
from __future__ import annotations

import re

import pytest

import mirage_lab as mi


def kcounts(g: mi.KernelGraph) -> tuple[int, int, int, int]:
    return len(g.ops), len(g.tensors), len(g.inputs), len(g.outputs)


def bcounts(bg: mi.BlockGraph) -> tuple[int, int, int, int]:
    return len(bg.ops), len(bg.tensors), len(bg.input_ops), len(bg.output_ops)


def raises_clean(fn, graphs, *needles: str) -> str:
    """Call ``fn``; it must raise GraphBuildError whose message contains every needle
    (regexes), and every graph in ``graphs`` must keep its op/tensor counts."""
    before = [kcounts(g) if isinstance(g, mi.KernelGraph) else bcounts(g) for g in graphs]
    with pytest.raises(mi.GraphBuildError) as info:
        fn()
    after = [kcounts(g) if isinstance(g, mi.KernelGraph) else bcounts(g) for g in graphs]
    assert after == before, "a failed builder call changed the graph"
    msg = str(info.value)
    for n in needles:
        assert re.search(n, msg), f"{n!r} not in message: {msg}"
    assert isinstance(info.value, mi.MirageLabError)
    return msg


@pytest.fixture
def kg():
    g = mi.new_kernel_graph()
    X = g.new_input((16, 4096), dtype=mi.float16)
    W = g.new_input((4096, 1024), dtype=mi.float16)
    return g, X, W


# --------------------------------------------------------------------------- kernel level
def test_matmul_wrong_inner_dim(kg):
    g, X, W = kg
    B = g.new_input((1024, 512))
    raises_clean(lambda: g.matmul(X, B), [g], r"^matmul:", r"\[16,4096\] x \[1024,512\]", "4096 == 1024",
                 r"must have 4096 rows, e\.g\. \[4096,512\]")


def test_matmul_rank_and_batch_mismatch(kg):
    g, X, W = kg
    A3 = g.new_input((2, 16, 4096))
    raises_clean(lambda: g.matmul(A3, W), [g], "matmul", "same rank", r"\[2,16,4096\]", r"\[4096,1024\]")
    B3 = g.new_input((3, 4096, 8))
    raises_clean(lambda: g.matmul(A3, B3), [g], "matmul", "batch dims differ", r"\[2,16,4096\] x \[3,4096,8\]")


def test_binary_broadcast_mismatch(kg):
    g, X, W = kg
    raises_clean(lambda: g.add(X, W), [g], r"^add:", r"\[16,4096\]", r"\[4096,1024\]", "neither is 1")
    v = g.new_input((4096,))
    raises_clean(lambda: g.mul(X, v), [g], r"^mul:", "same rank", r"reshape .* \[1,4096\]")


def test_unknown_dtype(kg):
    g, X, W = kg
    raises_clean(lambda: g.new_input((16, 4096), dtype="int8"), [g], r"new_input\(dims=\[16,4096\]\)",
                 "unknown dtype 'int8'", "mi.float16, mi.bfloat16, mi.float32")
    raises_clean(lambda: g.new_input((4, 4), dtype=int), [g], "unknown dtype")


@pytest.mark.parametrize("dims, needle", [
    ((), "1 to 4 dims"), ((1, 2, 3, 4, 5), "1 to 4 dims"), ((16, 0), "positive"), ((16, -2), "positive"),
    ("16x4096", "sequence of ints such as"), ((16, "a"), r"dims\[1\] must be an int"), (None, "sequence"),
])
def test_bad_input_dims(kg, dims, needle):
    g, X, W = kg
    raises_clean(lambda: g.new_input(dims), [g], "new_input", needle)


def test_op_on_tensor_of_another_graph(kg):
    g, X, W = kg
    other = mi.new_kernel_graph()
    Y = other.new_input((4096, 1024))
    msg = raises_clean(lambda: g.matmul(X, Y), [g, other], r"^matmul:", "belongs to another kernel graph",
                       r"\[4096,1024\]", "build every op of a program on the graph its inputs came from")
    assert "t0" in msg
    raises_clean(lambda: g.exp(Y), [g, other], r"^exp:", "another kernel graph")
    raises_clean(lambda: g.mark_output(Y), [g, other], "mark_output", "another kernel graph")
    raises_clean(lambda: g.exp("X"), [g], r"^exp:", "must be a DTensor")


def test_kernel_misc_errors(kg):
    g, X, W = kg
    raises_clean(lambda: g.reduction(X, 2), [g], "reduction", "dim 2 is out of range", r"\[16,4096\]")
    raises_clean(lambda: g.rms_norm(X, normalized_shape=(1024,)), [g], "rms_norm", r"\(4096,\)", "last dim")
    raises_clean(lambda: g.clamp(X, 2, 1), [g], "clamp", "lo=2.0 is greater than hi=1.0")
    raises_clean(lambda: g.clamp(X, "a", 1), [g], "clamp", "lo must be a finite number")
    X32 = g.new_input((16, 4096), dtype=mi.float32)
    raises_clean(lambda: g.add(X, X32), [g], "add", "different dtypes")
    G = g.new_input((1, 1024))
    raises_clean(lambda: g.rms_norm(X, G), [g], r"rms_norm \(weight\)", r"\[16,4096\]", r"\[1,1024\]")
    g.mark_output(X)
    raises_clean(lambda: g.mark_output(X), [g], "mark_output", "already an output")


# --------------------------------------------------------------------------- block level
def test_grid_split_not_divisible(kg):
    g, X, W = kg
    bg = mi.new_threadblock_graph((3, 1, 1), forloop_range=1)
    raises_clean(lambda: bg.new_input(W, input_map=(1, -1, -1)), [bg, g],
                 r"new_input \(block graph\)", r"grid axis x \(size 3\) does not divide dim 1", r"\[4096,1024\]",
                 "1024 % 3 = 1", "pick a grid size that divides 1024")


def test_forloop_split_not_divisible(kg):
    g, X, W = kg
    bg = mi.new_threadblock_graph((64, 1, 1), forloop_range=3)
    raises_clean(lambda: bg.new_input(W, input_map=(1, -1, -1), forloop_dim=0), [bg],
                 r"new_input \(block graph\)", "forloop_range 3 does not divide dim 0", r"\[4096,1024\]",
                 "pick a forloop_range that divides 4096")
    # the check applies after the grid split of the same dim: 1024/64 = 16, and 16 % 3 != 0
    raises_clean(lambda: bg.new_input(W, input_map=(1, -1, -1), forloop_dim=1), [bg],
                 r"after the grid split \(16\)")
    raises_clean(lambda: bg.new_input(W, forloop_dim=2), [bg], "forloop_dim 2 is not a dim")


def test_imap_names_missing_dim(kg):
    g, X, W = kg
    bg = mi.new_threadblock_graph((4, 2, 1), forloop_range=1)
    raises_clean(lambda: bg.new_input(X, input_map=(0, 2, -1)), [bg],
                 r"input_map \(0, 2, -1\) maps grid axis y \(size 2\) to dim 2", r"\[16,4096\]",
                 r"has dims 0\.\.1; use a dim in that range or -1 to replicate")
    raises_clean(lambda: bg.new_input(X, input_map=(1, 1, -1)), [bg], "two grid axes to the same dim",
                 "different dim")
    raises_clean(lambda: bg.new_input(X, input_map=(0, 1)), [bg], "three ints")


def test_output_map_must_cover_grid(kg):
    g, X, W = kg
    bg = mi.new_threadblock_graph((4, 8, 1), forloop_range=1)
    x = bg.new_input(X, input_map=(0, 1, -1))  # tile [4,512]
    a = bg.forloop_accum(x)
    raises_clean(lambda: bg.new_output(a, output_map=(0, -1, -1)), [bg],
                 r"new_output \(block graph\)", r"does not cover grid axis y \(size 8\)",
                 "all 8 blocks along it would write the same tile", r"map it to a dim of \[4,512\]")
    raises_clean(lambda: bg.new_output(a, output_map=(0, 2, -1)), [bg], r"maps grid axis y \(size 8\) to dim 2")
    raises_clean(lambda: bg.new_output(a, output_map=(0, 1, -1), forloop_dim=0), [bg], "forloop_dim must be -1")
    bg.new_output(a, output_map=(0, 1, -1))
    assert bg.output_ops[0].attrs["out_dims"] == (16, 4096)


def test_saving_an_in_loop_tensor(kg):
    g, X, W = kg
    bg = mi.new_threadblock_graph((16, 1, 1), forloop_range=4)
    x = bg.new_input(X, input_map=(0, -1, -1), forloop_dim=1)
    e = bg.exp(x)
    raises_clean(lambda: bg.new_output(e, output_map=(0, -1, -1)), [bg],
                 r"new_output \(block graph\)", r"s1: float16\[1,1024\], in loop", "computed inside the for-loop",
                 r"bg\.forloop_accum")


def test_block_op_mixing_in_loop_and_after_loop(kg):
    g, X, W = kg
    bg = mi.new_threadblock_graph((16, 1, 1), forloop_range=4)
    x = bg.new_input(X, input_map=(0, -1, -1), forloop_dim=1)  # [1,1024] per iteration
    s = bg.forloop_accum(x, "sum")                              # [1,1] after the loop
    raises_clean(lambda: bg.div(x, s), [bg], r"^div \(block graph\)", "mix tensors computed inside the for-loop and after it",
                 r"\[1,1024\], in loop", r"\[1,1\], after loop", "accumulate the in-loop operand with forloop_accum")
    raises_clean(lambda: bg.concat(x, s, 1), [bg], "concat")  # shapes differ too, but some error, nothing added
    raises_clean(lambda: bg.forloop_accum(s), [bg], "forloop_accum", "already computed after the for-loop")
    raises_clean(lambda: bg.forloop_accum(x, "max"), [bg], "unknown accumulator 'max'")


def test_block_op_on_tile_of_another_block_graph(kg):
    g, X, W = kg
    bg1 = mi.new_threadblock_graph((16, 1, 1), forloop_range=1)
    bg2 = mi.new_threadblock_graph((16, 1, 1), forloop_range=1)
    x1 = bg1.new_input(X, input_map=(0, -1, -1))
    x2 = bg2.new_input(X, input_map=(0, -1, -1))
    raises_clean(lambda: bg2.add(x2, x1), [bg1, bg2], r"^add \(block graph\)", "belongs to another block graph",
                 r"\[1,4096\]", r"bg\.new_input")
    raises_clean(lambda: bg2.exp(X), [bg2], "must be an STensor", r"bg\.new_input\(\.\.\.\) first")


def test_block_matmul_needs_unit_batch_dims():
    g = mi.new_kernel_graph()
    A = g.new_input((4, 16, 64)); B = g.new_input((4, 64, 32))
    bg = mi.new_threadblock_graph((2, 1, 1), forloop_range=1)
    a = bg.new_input(A, input_map=(0, -1, -1)); b = bg.new_input(B, input_map=(0, -1, -1))
    raises_clean(lambda: bg.matmul(a, b), [bg], r"matmul \(block graph\)", r"\[2,16,64\] x \[2,64,32\]",
                 "map the batch dim to a grid axis")


def test_sum_todimx_needs_divisible_last_dim(kg):
    g, X, W = kg
    bg = mi.new_threadblock_graph((16, 1, 1), forloop_range=1, reduction_dimx=48)
    x = bg.new_input(X, input_map=(0, -1, -1))
    raises_clean(lambda: bg.forloop_accum(x, "sum_todimx"), [bg], "reduction_dimx=48", "last dim 4096")


@pytest.mark.parametrize("kwargs, needle", [
    (dict(grid_dim=(0, 1, 1)), "grid_dim must be positive"),
    (dict(grid_dim=(1, 2, 3, 4)), "up to three ints"),
    (dict(grid_dim=(4, 1, 1), forloop_range=0), "forloop_range must be between 1 and"),
    (dict(grid_dim=(4, 1, 1), reduction_dimx=0), "reduction_dimx must be between 1 and"),
])
def test_bad_block_graph_parameters(kwargs, needle):
    with pytest.raises(mi.GraphBuildError, match=needle):
        mi.new_threadblock_graph(**kwargs)


def test_block_scalar_arguments_are_checked(kg):
    g, X, W = kg
    bg = mi.new_threadblock_graph((16, 1, 1), forloop_range=1)
    x = bg.new_input(X, input_map=(0, -1, -1))
    raises_clean(lambda: bg.clamp(x, "low", 1), [bg], r"clamp \(block graph\): lo must be a finite number")
    raises_clean(lambda: bg.clamp(x, 3, 1), [bg], "swap them")
    raises_clean(lambda: bg.mul_scalar(x, None), [bg], r"mul_scalar \(block graph\): scalar must be a finite number")


# --------------------------------------------------------------------------- customized()
def _rms_block(X, W, grid=64, frange=16):
    bg = mi.new_threadblock_graph((grid, 1, 1), forloop_range=frange)
    x = bg.new_input(X, input_map=(-1, -1, -1), forloop_dim=1)
    w = bg.new_input(W, input_map=(1, -1, -1), forloop_dim=0)
    bg.new_output(bg.div(bg.forloop_accum(bg.matmul(x, w)), bg.forloop_accum(x, "rms")), output_map=(1, -1, -1))
    return bg


def test_customized_wrong_number_of_inputs(kg):
    g, X, W = kg
    bg = _rms_block(X, W)
    msg = raises_clean(lambda: g.customized([X], bg), [g, bg], r"^customized:", "has 2 inputs",
                       r"float16\[16,4096\], float16\[4096,1024\]", "got 1 tensors", r"one DTensor per bg\.new_input")
    assert "float16[16,4096])" in msg  # what it got
    # the failed call did not freeze the block graph: it can still be extended, then used
    bg.exp(bg.input_ops[0].outputs[0])
    outs = g.customized([X, W], bg)
    assert [t.dims for t in outs] == [(16, 1024)]


def test_customized_inputs_in_wrong_order_or_shape(kg):
    g, X, W = kg
    bg = _rms_block(X, W)
    raises_clean(lambda: g.customized([W, X], bg), [g, bg], r"^customized: input 0 is DTensor\(t1: float16\[4096,1024\]\)",
                 r"built for float16\[16,4096\]", "in the order of the bg.new_input calls")
    X32 = g.new_input((16, 4096), dtype=mi.float32)
    raises_clean(lambda: g.customized([X32, W], bg), [g, bg], "input 0", "float32", r"built for float16\[16,4096\]")


def test_customized_other_bad_calls(kg):
    g, X, W = kg
    bg = _rms_block(X, W)
    raises_clean(lambda: g.customized(X, bg), [g], "inputs must be a list", r"g\.customized\(\[X, W\], bg\)")
    raises_clean(lambda: g.customized([X, W], "bg"), [g], "expected a block graph")
    other = mi.new_kernel_graph()
    Xo, Wo = other.new_input((16, 4096)), other.new_input((4096, 1024))
    raises_clean(lambda: g.customized([Xo, Wo], bg), [g, other], "another kernel graph")
    empty = mi.new_threadblock_graph((4, 1, 1))
    empty.new_input(X, input_map=(0, -1, -1))
    raises_clean(lambda: g.customized([X], empty), [g], "no outputs", r"bg\.new_output")


def test_block_graph_is_frozen_once_used(kg):
    g, X, W = kg
    bg = _rms_block(X, W)
    g.customized([X, W], bg)
    raises_clean(lambda: bg.exp(bg.input_ops[0].outputs[0]), [bg], "already the body of a customized op",
                 "mi.new_threadblock_graph")
    raises_clean(lambda: bg.new_input(X), [bg], "already the body")
