"""Where each block's tile lies in a tensor: the strided views behind gather and scatter.

Pure index arithmetic (element strides, no arrays), shared by both fingerprint backends:
:meth:`.numpy_backend.FieldOps.gather_tiles` / ``scatter_tiles`` turn a plan into one
strided copy, on the CPU or on the device.

    >>> gather_plan([8, 64], grid=(4, 1, 1), imap=(1, -1, -1), fmap=0, frange=2)
    ([4, 1, 1, 2, 4, 16], [16, 0, 0, 256, 64, 1], [4, 2, 4, 16])
"""
from __future__ import annotations

from typing import Sequence

from .field import FieldError


def contiguous_strides(shape: Sequence[int]) -> list[int]:
    """Element strides of a C-ordered (row-major) array of ``shape``.

    >>> contiguous_strides([2, 3, 4])
    [12, 4, 1]
    """
    st = [1] * len(shape)
    for d in range(len(shape) - 2, -1, -1):
        st[d] = st[d + 1] * int(shape[d + 1])
    return st


def _axis_of(imap: Sequence[int], grid: Sequence[int], k: int) -> int | None:
    for a in range(3):
        if grid[a] > 1 and imap[a] == k:
            return a
    return None


def gather_plan(dims: Sequence[int], grid: Sequence[int], imap: Sequence[int], fmap: int, frange: int):
    """The strided view that gathers every block's tile of a ``dims``-shaped tensor.

    Returns ``(shape, strides, out_shape)``: ``shape``/``strides`` (in elements, without the
    leading test axis) describe the view ``[gx, gy, gz, R, *tile]`` of the contiguous
    source; ``out_shape = [B, R, *tile]`` with ``B = 1`` when no grid axis splits the tensor
    (every block sees the same tiles), ``R = 1`` when it is not looped. The tile index
    along a dim that is grid-mapped (axis a) and looped is ``b_a·frange + i`` (spec §1.3).
    """
    dims = [int(d) for d in dims]
    n = len(dims)
    sstride = contiguous_strides(dims)
    tile = list(dims)
    gstride = [0, 0, 0]
    mapped = False
    for k in range(n):
        a = _axis_of(imap, grid, k)
        if a is not None:
            tile[k] //= grid[a]
            mapped = True
    looped = 0 <= fmap < n
    if looped:
        tile[fmap] //= frange
    for k in range(n):
        a = _axis_of(imap, grid, k)
        if a is not None:
            gstride[a] = tile[k] * (frange if looped and fmap == k else 1) * sstride[k]
    r = frange if looped else 1
    rstride = tile[fmap] * sstride[fmap] if looped else 0
    g = list(grid) if mapped else [1, 1, 1]
    shape = g + [r] + tile
    strides = [gstride[a] if g[a] > 1 else 0 for a in range(3)] + [rstride] + sstride
    out_shape = [g[0] * g[1] * g[2], r] + tile
    return shape, strides, out_shape


def scatter_plan(tile: Sequence[int], grid: Sequence[int], omap: Sequence[int], out_dims: Sequence[int]):
    """The strided view of an output tensor that block tiles are written through.

    Returns ``(shape, strides)`` (elements, no test axis) of the view ``[gx, gy, gz, *tile]``
    of the contiguous ``out_dims`` tensor: block ``b`` writes at ``b_a·tile[k]`` of dim
    ``k`` when ``omap[a] = k``.
    """
    n = len(out_dims)
    dstride = contiguous_strides(out_dims)
    gstr = [0, 0, 0]
    for a in range(3):
        if grid[a] > 1:
            k = omap[a]
            if not 0 <= k < n:
                raise FieldError(f"scatter_tiles: grid axis {a} (size {grid[a]}) is not mapped by output_map {tuple(omap)}")
            gstr[a] = int(tile[k]) * dstride[k]
    return list(grid) + list(tile), gstr + dstride
