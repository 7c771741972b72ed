"""The literal interpreter (one block at a time, the spec's tile-index formulas) and the
batched one (all blocks stacked) compute the same thing, and both match torch references
written independently of the block-graph machinery."""
from __future__ import annotations

from typing import Callable

import pytest
import torch

import mirage_lab as mi
from mirage_lab import examples as ex

F64 = torch.float64


def _rand(*shape: int, lo: float = 0.0) -> torch.Tensor:
    return torch.rand(*shape, dtype=F64) + lo if lo else torch.randn(*shape, dtype=F64)


# --------------------------------------------------------------------------- small graphs
def grid_and_loop_on_same_dim():
    """2-D grid; dim 2 split by grid axis y AND the loop (tile index b_y*frange + i); mean and
    plain accumulators; exp and mul_scalar after the loop."""
    g = mi.new_kernel_graph()
    X = g.new_input((4, 8, 128), dtype=mi.float32)
    bg = mi.new_threadblock_graph((2, 4, 1), forloop_range=4)
    x = bg.new_input(X, input_map=(0, 2, -1), forloop_dim=2)          # tile [2,8,8]
    assert x.dims == (2, 8, 8)
    m = bg.forloop_accum(x, "mean")                                     # [2,8,1]
    s = bg.forloop_accum(x)                                             # [2,8,8]
    bg.new_output(bg.mul_scalar(bg.exp(m), 2.0), output_map=(0, 2, -1))
    bg.new_output(s, output_map=(0, 2, -1))
    mean_o, sum_o = g.customized([X], bg)
    g.mark_output(mean_o); g.mark_output(sum_o)

    def ref(x):
        return [x.reshape(4, 8, 4, 32).mean(-1).exp() * 2,
                x.reshape(4, 8, 4, 4, 8).sum(3).reshape(4, 8, 32)]
    return g, [_rand(4, 8, 128)], ref


def every_accumulator_3d_grid_replicated_axis():
    """3-D grid (2,2,2) whose z axis is replicated on the input; all five accumulator kinds;
    ops after the loop. Blocks along z compute the same tiles and write them side by side."""
    g = mi.new_kernel_graph()
    X = g.new_input((4, 16, 256), dtype=mi.float32)
    bg = mi.new_threadblock_graph((2, 2, 2), forloop_range=4, reduction_dimx=16)
    x = bg.new_input(X, input_map=(0, 1, -1), forloop_dim=2)            # tile [2,8,64]
    a_none = bg.forloop_accum(x, None)
    a_sum = bg.forloop_accum(x, "sum")
    a_mean = bg.forloop_accum(x, "mean")
    a_rms = bg.forloop_accum(x, "rms")
    a_dimx = bg.forloop_accum(x, "sum_todimx")
    assert [t.dims for t in (a_none, a_sum, a_mean, a_rms, a_dimx)] == [(2, 8, 64), (2, 8, 1), (2, 8, 1), (2, 8, 1), (2, 8, 16)]
    after = bg.sub(bg.div(a_dimx, a_rms), a_mean)                       # after-loop ops, broadcast [2,8,16]-[2,8,1]
    for t in (a_none, a_sum, a_mean, a_rms, a_dimx, after):
        bg.new_output(t, output_map=(0, 1, 2))
    for t in g.customized([X], bg):
        g.mark_output(t)

    def ref(x):
        two = lambda t: torch.cat([t, t], dim=-1)   # the replicated z axis writes two copies
        none = x.reshape(4, 16, 4, 64).sum(2)
        s = x.sum(-1, keepdim=True)
        mean = x.mean(-1, keepdim=True)
        rms = x.pow(2).mean(-1, keepdim=True).sqrt()
        dimx = x.reshape(4, 16, -1, 16).sum(2)      # out[.., j] = sum_k x[.., j + 16k]
        return [two(none), two(s), two(mean), two(rms), two(dimx), two(dimx / rms - mean)]
    return g, [_rand(4, 16, 256, lo=0.1)], ref


def every_block_op():
    """Every block op type on a 1-D grid, with kernel ops before and after the customized op."""
    g = mi.new_kernel_graph()
    X0 = g.new_input((8, 128), dtype=mi.float32)
    Y = g.new_input((8, 128), dtype=mi.float32)
    X = g.sqrt(g.square(X0))                                            # kernel ops feeding the block graph
    bg = mi.new_threadblock_graph((2, 1, 1), forloop_range=2, reduction_dimx=16)
    x = bg.new_input(X, input_map=(0, -1, -1), forloop_dim=1)           # [4,64]
    y = bg.new_input(Y, input_map=(0, -1, -1), forloop_dim=1)
    a = bg.sub(bg.mul(bg.add(x, y), bg.div(y, bg.exp(x))), bg.pow(x, bg.square(y)))
    b = bg.clamp(bg.mul_scalar(bg.gelu(bg.silu(bg.relu(a))), 0.5), -3, 3)
    c = bg.concat(bg.sqrt(x), b, 1)                                     # [4,128]
    r = bg.rms_norm(c)
    red = bg.reduction(r, 1)                                            # [4,1]
    acc1, acc2 = bg.forloop_accum(r), bg.forloop_accum(red)
    bg.new_output(bg.mul(acc1, acc2), output_map=(0, -1, -1))
    (O,) = g.customized([X, Y], bg)
    g.mark_output(g.clamp(g.div(g.exp(g.reduction(O, 1)), g.add(O, O)), -50.0, 50.0))

    def ref(x0, y):
        x = x0.abs()
        out_r, out_red = 0, 0
        for i in range(2):
            xs, ys = x[:, i * 64:(i + 1) * 64], y[:, i * 64:(i + 1) * 64]
            a = (xs + ys) * (ys / xs.exp()) - xs.pow(ys.square())
            b = (torch.nn.functional.gelu(torch.nn.functional.silu(a.relu())) * 0.5).clamp(-3, 3)
            c = torch.cat([xs.sqrt(), b], dim=1)
            rn = c / c.pow(2).mean(-1, keepdim=True).sqrt()
            out_r = out_r + rn
            out_red = out_red + rn.sum(1, keepdim=True)
        o = out_r * out_red
        return [(o.sum(1, keepdim=True).exp() / (o + o)).clamp(-50, 50)]
    return g, [_rand(8, 128, lo=0.5), _rand(8, 128, lo=0.5)], ref


def rmsnorm_linear_small():
    g = ex.rms_norm_linear_fused(8, 256, 128, grid=8, forloop_range=4, dtype=mi.float32)

    def ref(x, w):
        return [x / x.pow(2).mean(-1, keepdim=True).sqrt() @ w]
    return g, [_rand(8, 256), _rand(256, 128)], ref


def gqa_small():
    g = ex.gqa_flashdecoding(batch=2, q_len=32, head_dim=16, kv_len=256, kv_splits=4, q_blocks=4, forloop_range=2,
                             dtype=mi.float32)
    assert [op.block_graph.grid_dim for op in g.customized_ops] == [(2, 4, 4), (2, 4, 1)]

    def ref(q, k, v):
        return [torch.softmax(q @ k, dim=-1) @ v]
    return g, [_rand(2, 32, 16) / 4, _rand(2, 16, 256), _rand(2, 256, 16)], ref


def gated_mlp_small():
    g = ex.gated_mlp_fused(4, 128, 64, grid=4, forloop_range=8, dtype=mi.float32)

    def ref(x, w1, w2):
        return [torch.nn.functional.silu(x @ w1) * (x @ w2)]
    return g, [_rand(4, 128), _rand(128, 64) / 8, _rand(128, 64) / 8], ref


def loop_only_no_grid_split():
    """Grid (1,1,1): one block walks the whole tensor through the loop; matmul with both operands looped."""
    g = mi.new_kernel_graph()
    A = g.new_input((1, 8, 64), dtype=mi.float32)
    B = g.new_input((1, 64, 16), dtype=mi.float32)
    bg = mi.new_threadblock_graph((1, 1, 1), forloop_range=8)
    a = bg.new_input(A, forloop_dim=2)
    b = bg.new_input(B, forloop_dim=1)
    bg.new_output(bg.relu(bg.forloop_accum(bg.matmul(a, b))), output_map=(-1, -1, -1))
    (O,) = g.customized([A, B], bg)
    g.mark_output(O)
    return g, [_rand(1, 8, 64), _rand(1, 64, 16)], lambda a, b: [(a @ b).relu()]


GRAPHS: dict[str, Callable] = {
    "grid_and_loop_on_same_dim": grid_and_loop_on_same_dim,
    "every_accumulator_3d_grid_replicated_axis": every_accumulator_3d_grid_replicated_axis,
    "every_block_op": every_block_op,
    "rmsnorm_linear_small": rmsnorm_linear_small,
    "gqa_small_3d_grid": gqa_small,
    "gated_mlp_small": gated_mlp_small,
    "loop_only_no_grid_split": loop_only_no_grid_split,
}


@pytest.mark.parametrize("name", list(GRAPHS))
def test_per_block_equals_batched(name):
    g, inputs, _ = GRAPHS[name]()
    batched = mi.run_reference(g, inputs)
    literal = mi.run_reference(g, inputs, per_block=True)
    assert len(batched) == len(literal) == len(g.outputs)
    for b, l, t in zip(batched, literal, g.outputs):
        assert tuple(l.shape) == t.dims
        assert not torch.isnan(l).any(), "some output element was written by no block"
        torch.testing.assert_close(b, l, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", list(GRAPHS))
def test_matches_independent_torch_reference(name, rel):
    g, inputs, ref = GRAPHS[name]()
    for mode in (False, True):
        outs = mi.run_reference(g, inputs, per_block=mode)
        refs = ref(*inputs)
        assert len(outs) == len(refs)
        for o, r in zip(outs, refs):
            assert o.shape == r.shape
            assert rel(o, r) < 1e-10


def test_literal_tile_indices_of_spec():
    """Block (bx, by) at iteration i reads the tile at b_y*frange + i along a dim that is both
    grid-mapped and looped: check it on an arange input where every element names itself."""
    from mirage_lab.interp.reference import gather_tiles
    from mirage_lab.ir.tiling import tile_dims, tile_slices

    x = torch.arange(4 * 8 * 128, dtype=F64).reshape(4, 8, 128)
    grid, imap, fmap, frange, tile = (2, 4, 1), (0, 2, -1), 2, 4, (2, 8, 8)
    tiles = gather_tiles(x, grid, imap, fmap, frange)
    assert tiles.shape == (8, 4, 2, 8, 8) and tile_dims(x.shape, grid, imap, fmap, frange) == tile
    for bz in range(1):
        for by in range(4):
            for bx in range(2):
                flat = (bx * 4 + by) * 1 + bz      # the batched mode stacks blocks row-major over (x, y, z)
                for i in range(frange):
                    sl = tile_slices(x.shape, grid, imap, fmap, frange, (bx, by, bz), i)
                    assert sl[0] == slice(bx * 2, bx * 2 + 2)
                    assert sl[2] == slice((by * frange + i) * 8, (by * frange + i + 1) * 8)
                    assert torch.equal(tiles[flat, i], x[sl])


def test_per_block_mode_leaves_unwritten_elements_nan():
    """The literal mode starts outputs at NaN, so coverage gaps cannot hide."""
    g, inputs, _ = every_accumulator_3d_grid_replicated_axis()
    outs = mi.run_reference(g, inputs, per_block=True)
    assert all(torch.isfinite(o).all() for o in outs)


def test_replicated_operands_are_copied_one_iteration_at_a_time(monkeypatch):
    """X of a row x column grid is read by every column block. The batched interpreter copies each
    iteration's tiles when it needs them (all iterations at once took frange times the memory: gigabytes
    at prefill shapes, which killed search workers confirming a candidate) and gives the per-block result."""
    from mirage_lab.interp import reference as R

    g = mi.new_kernel_graph()
    X, W = g.new_input((64, 256)), g.new_input((256, 128))
    bg = mi.new_threadblock_graph(grid_dim=(2, 16, 1), block_dim=(128, 1, 1), forloop_range=8, reduction_dimx=64)
    x = bg.new_input(X, input_map=(0, -1, -1), forloop_dim=1)    # [32, 32] per block, the same for all 16 columns
    w = bg.new_input(W, input_map=(-1, 1, -1), forloop_dim=0)    # [32, 8]
    bg.new_output(bg.forloop_accum(bg.matmul(x, w)), output_map=(0, 1, -1))
    (O,) = g.customized([X, W], bg)
    g.mark_output(O)
    sizes = []
    real = R.blocks_of
    monkeypatch.setattr(R, "blocks_of", lambda v, grid: sizes.append(real(v, grid).numel()) or real(v, grid))
    xs = [torch.randn(64, 256, dtype=torch.float64), torch.randn(256, 128, dtype=torch.float64)]
    batched = R.run_block_graph(bg, xs)[0]
    assert max(sizes) == 32 * 32 * 32                                  # 32 blocks x one [32, 32] tile of X
    assert torch.allclose(batched, R.run_block_graph_per_block(bg, xs)[0])
    assert torch.allclose(batched, xs[0] @ xs[1])
