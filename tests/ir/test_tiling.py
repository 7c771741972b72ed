"""ir/tiling.py: the one rule for maps -> tiles, checked against hand-computed tiles and by every user."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from mirage_lab.ir.tiling import (TilingError, gather_plan, output_slices, scatter_plan, tile_dims, tile_slices)


def gathered(x: np.ndarray, grid, imap, fmap, frange) -> np.ndarray:
    shape, strides, _ = gather_plan(x.shape, grid, imap, fmap, frange)
    return np.lib.stride_tricks.as_strided(x, shape, [s * x.itemsize for s in strides])


@pytest.mark.parametrize("dims,grid,imap,fmap,frange", [
    ((8, 64), (4, 1, 1), (1, -1, -1), 0, 2),          # columns over blocks, rows over iterations
    ((8, 64), (4, 1, 1), (1, -1, -1), 1, 2),          # a dim both grid-mapped and looped: b * R + it
    ((2, 16, 32), (2, 4, 1), (0, 2, -1), 1, 4),       # two grid axes, a third dim looped
    ((16, 32), (1, 1, 1), (-1, -1, -1), -1, 3),       # one block, no loop: the whole tensor
    ((4, 6, 8), (2, 3, 2), (-1, 1, 2), 0, 2),         # grid axis x replicates (-1)
])
def test_every_block_and_iteration_sees_the_spec_tile(dims, grid, imap, fmap, frange):
    x = np.arange(int(np.prod(dims)), dtype=np.int64).reshape(dims)
    view = gathered(x, grid, imap, fmap, frange)
    tile = tile_dims(dims, grid, imap, fmap, frange)
    assert tuple(view.shape[4:]) == tile
    for bz in range(grid[2]):
        for by in range(grid[1]):
            for bx in range(grid[0]):
                for it in range(frange if fmap >= 0 else 1):
                    # the spec's formula, by hand: tile index b_a * R + it along a mapped, looped dim
                    want = []
                    for k, n in enumerate(dims):
                        a = next((a for a in range(3) if grid[a] > 1 and imap[a] == k), None)
                        b = (bx, by, bz)[a] if a is not None else 0
                        idx = b * (frange if fmap == k else 1) + (it if fmap == k else 0)
                        want.append(slice(idx * tile[k], (idx + 1) * tile[k]))
                    assert tile_slices(dims, grid, imap, fmap, frange, (bx, by, bz), it) == tuple(want)
                    g = [bx if view.shape[0] > 1 else 0, by if view.shape[1] > 1 else 0, bz if view.shape[2] > 1 else 0]
                    got = view[g[0], g[1], g[2], it if view.shape[3] > 1 else 0]
                    assert np.array_equal(got, x[tuple(want)])


def test_tiles_of_a_reference_run_and_a_search_view_agree():
    from mirage_lab.interp.reference import gather_tiles
    from mirage_lab.search.tiles import load_view

    dims, grid, imap, fmap, frange = (8, 64), (4, 2, 1), (1, -1, -1), 0, 2
    x = np.arange(512, dtype=np.int64).reshape(dims)
    t = gather_tiles(torch.from_numpy(x), grid, imap, fmap, frange).numpy()   # [8 blocks, R, *tile]
    v = load_view(x[None], grid, imap, fmap, frange)[0]                          # [gx, 1, 1, R, *tile]
    assert v.shape == (4, 1, 1, 2, 4, 16)
    for b in range(8):  # blocks in C order of (gx, gy, gz): y replicates this tensor
        bx = b // 2
        assert np.array_equal(t[b], v[bx, 0, 0])


def test_outputs_are_placed_by_the_output_map():
    shape, strides = scatter_plan([2, 8], (4, 1, 1), (1, -1, -1), [2, 32])
    out = np.zeros((2, 32), dtype=np.int64)
    view = np.lib.stride_tricks.as_strided(out, shape, [s * 8 for s in strides])
    for bx in range(4):
        view[bx, 0, 0] = bx + 1
        assert output_slices([2, 8], (4, 1, 1), (1, -1, -1), (bx, 0, 0)) == (slice(0, 2), slice(8 * bx, 8 * bx + 8))
    assert (out[:, 8:16] == 2).all() and (out[:, 24:] == 4).all()


def test_an_unmapped_grid_axis_cannot_place_an_output():
    with pytest.raises(TilingError, match=r"grid axis 1 \(size 2\) is not mapped by output_map \(1, -1, -1\)"):
        scatter_plan([2, 8], (4, 2, 1), (1, -1, -1), [2, 32])


def test_output_order_places_each_dim_after_its_grid_axis():
    from mirage_lab.ir.tiling import omap_order

    assert omap_order((4, 2, 1), (1, 0, -1), 2) == (1, 3, 0, 4)     # y splits dim 0, x dim 1
    assert omap_order((1, 1, 1), (-1, -1, -1), 3) == (3, 4, 5)      # one block: the tile is the output
    with pytest.raises(TilingError, match="grid axis 2"):
        omap_order((1, 1, 2), (-1, -1, 5), 2)


def test_out_dims_the_tiles_do_not_make_are_refused():
    with pytest.raises(TilingError, match=r"make \[2, 32\], not \[2, 64\]"):
        scatter_plan([2, 8], (4, 1, 1), (1, -1, -1), [2, 64])
