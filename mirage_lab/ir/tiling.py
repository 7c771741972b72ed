"""The one tiling rule: which part of a kernel-level tensor each block sees in each iteration.

A block graph's input loader has an input map (``imap[a] = k``: grid axis ``a`` splits data
dim ``k``; -1 replicates) and a for-loop dim ``fmap`` (split across the iterations; -1: the
same tile every iteration). Along a dim that is both grid-mapped and looped, the tile index
is ``b_a * forloop_range + it`` (MIRAGE_SPEC §1.3). A saver's output map places each block's
tile the same way. Everything here is index arithmetic on plain ints, so the IR, the
reference interpreter (torch views), the verifier (numpy / CUDA strided copies) and the
search (numpy views) read one definition.

    >>> tile_dims([8, 64], grid=(4, 1, 1), imap=(1, -1, -1), fmap=0, frange=2)
    (4, 16)
    >>> gather_plan([8, 64], grid=(4, 1, 1), imap=(1, -1, -1), fmap=0, frange=2)
    ([4, 1, 1, 2, 4, 16], [16, 0, 0, 256, 64, 1], [4, 2, 4, 16])
    >>> tile_slices([8, 64], grid=(4, 1, 1), imap=(1, -1, -1), fmap=0, frange=2, block=(3, 0, 0), it=1)
    (slice(4, 8, None), slice(48, 64, None))
"""
from __future__ import annotations

from math import prod
from typing import Sequence

from ..errors import MirageLabError


class TilingError(MirageLabError, ValueError):
    """A map that does not tile its tensor (an unmapped grid axis where one must be mapped)."""


def contiguous_strides(shape: Sequence[int]) -> list[int]:
    """Element strides of a C-ordered (row-major) array of ``shape``.

    >>> contiguous_strides([2, 3, 4])
    [12, 4, 1]
    """
    st = [1] * len(shape)
    for d in range(len(shape) - 2, -1, -1):
        st[d] = st[d + 1] * int(shape[d + 1])
    return st


def axis_of(imap: Sequence[int], grid: Sequence[int], k: int) -> int | None:
    """The grid axis that splits dim ``k`` (axes of size 1 split nothing), or None."""
    for a in range(3):
        if grid[a] > 1 and imap[a] == k:
            return a
    return None


def tile_dims(dims: Sequence[int], grid: Sequence[int], imap: Sequence[int], fmap: int, frange: int) -> tuple[int, ...]:
    """The tile one block sees in one iteration (divisibility is the IR builder's to check)."""
    tile = [int(d) for d in dims]
    for k in range(len(tile)):
        a = axis_of(imap, grid, k)
        if a is not None:
            tile[k] //= grid[a]
    if 0 <= fmap < len(tile):
        tile[fmap] //= frange
    return tuple(tile)


def gather_plan(dims: Sequence[int], grid: Sequence[int], imap: Sequence[int], fmap: int, frange: int):
    """The strided view that gathers every block's tile of a contiguous ``dims``-shaped tensor.

    Returns ``(shape, strides, out_shape)``: ``shape`` / ``strides`` (in elements) describe
    the view ``[gx, gy, gz, R, *tile]``; a grid axis that does not split this tensor has
    stride 0 (every block sees the same tiles), and all three are 1 when none splits it;
    ``out_shape = [B, R, *tile]`` with ``B`` the number of distinct block tiles and ``R = 1``
    when the loader is not looped.
    """
    dims = [int(d) for d in dims]
    n = len(dims)
    sstride = contiguous_strides(dims)
    tile = list(tile_dims(dims, grid, imap, fmap, frange))
    looped = 0 <= fmap < n
    gstride = [0, 0, 0]
    mapped = False
    for k in range(n):
        a = axis_of(imap, grid, k)
        if a is not None:
            mapped = True
            gstride[a] = tile[k] * (frange if looped and fmap == k else 1) * sstride[k]
    r = frange if looped else 1
    rstride = tile[fmap] * sstride[fmap] if looped else 0
    g = list(grid) if mapped else [1, 1, 1]
    shape = g + [r] + tile
    strides = [gstride[a] if g[a] > 1 else 0 for a in range(3)] + [rstride] + sstride
    return shape, strides, [g[0] * g[1] * g[2], r] + tile


def omap_order(grid: Sequence[int], omap: Sequence[int], rank: int) -> tuple[int, ...]:
    """The axes of the view ``[gx, gy, gz, *tile]`` in the output's row-major order.

    Each tile dim ``k`` comes right after the grid axis that places it (``omap[a] = k``);
    grid axes of size 1 place nothing and are left out. A grid axis larger than 1 that maps
    no dim of a rank-``rank`` tile raises :class:`TilingError`. Transposing the tiles to this
    order and merging each axis pair gives the output (the search's ``save_view``);
    :func:`scatter_plan` gives the strides of the same layout.

    >>> omap_order(grid=(4, 2, 1), omap=(1, 0, -1), rank=2)
    (1, 3, 0, 4)
    """
    for a in range(3):
        if grid[a] > 1 and not 0 <= omap[a] < rank:
            raise TilingError(f"grid axis {a} (size {grid[a]}) is not mapped by output_map {tuple(omap)}")
    order: list[int] = []
    for k in range(rank):
        order += [a for a in range(3) if grid[a] > 1 and omap[a] == k]
        order.append(3 + k)
    return tuple(order)


def scatter_plan(tile: Sequence[int], grid: Sequence[int], omap: Sequence[int], out_dims: Sequence[int]):
    """The strided view ``[gx, gy, gz, *tile]`` of a contiguous ``out_dims`` output that tiles are written through.

    Block ``b`` writes at ``b_a * tile[k]`` of dim ``k`` when ``omap[a] = k``: the output is
    the tiles in :func:`omap_order`, so each axis' stride is that of a contiguous array of
    the sizes in that order (grid axes of size 1 have stride 0).

    >>> scatter_plan([2, 8], grid=(4, 1, 1), omap=(1, -1, -1), out_dims=[2, 32])
    ([4, 1, 1, 2, 8], [8, 0, 0, 32, 1])
    """
    sizes = [int(g) for g in grid] + [int(t) for t in tile]
    order = omap_order(grid, omap, len(out_dims))
    placed = [sizes[3 + k] * prod(sizes[a] for a in order if a < 3 and omap[a] == k)
              for k in range(len(out_dims))]
    if placed != [int(d) for d in out_dims]:
        raise TilingError(f"tiles {list(tile)} placed by output_map {tuple(omap)} on grid {tuple(grid)} "
                          f"make {placed}, not {list(out_dims)}")
    strides = [0] * len(sizes)
    for ax, st in zip(order, contiguous_strides([sizes[ax] for ax in order])):
        strides[ax] = st
    return list(grid) + list(tile), strides


def tile_slices(dims: Sequence[int], grid: Sequence[int], imap: Sequence[int], fmap: int, frange: int,
                block: Sequence[int], it: int) -> tuple[slice, ...]:
    """The slices of the tile block ``block`` loads in iteration ``it`` (the spec's formula, one block)."""
    tile = tile_dims(dims, grid, imap, fmap, frange)
    out = []
    for k in range(len(dims)):
        a = axis_of(imap, grid, k)
        idx = (block[a] if a is not None else 0) * (frange if fmap == k else 1) + (it if fmap == k else 0)
        out.append(slice(idx * tile[k], (idx + 1) * tile[k]))
    return tuple(out)


def output_slices(tile: Sequence[int], grid: Sequence[int], omap: Sequence[int], block: Sequence[int]) -> tuple[slice, ...]:
    """The slices of the output that block ``block`` writes its ``tile``-shaped result to."""
    out = []
    for k in range(len(tile)):
        idx = sum(block[a] for a in range(3) if grid[a] > 1 and omap[a] == k)
        out.append(slice(idx * tile[k], (idx + 1) * tile[k]))
    return tuple(out)


__all__ = ["TilingError", "contiguous_strides", "axis_of", "tile_dims", "gather_plan", "omap_order",
           "scatter_plan", "tile_slices", "output_slices"]
