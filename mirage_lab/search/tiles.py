"""Fingerprint arrays of block-level tiles in the search's broadcast layout.

The search evaluates a block graph for every block and iteration at once. A tile tensor
is held as ``[k, gx, gy, gz, R, *tile]`` before the loop's accumulation and
``[k, gx, gy, gz, *tile]`` after it (``k`` random tests, ``R`` iterations). Axes along which
a tile does not vary (a replicated grid axis, an input not split by the loop) keep size
1 and broadcast, so a tile that every block shares is computed once, and loaders are
views, not copies. Results are exactly those of the interpreter's per-block rules.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Callable, Sequence

import numpy as np

from ..ir.tiling import gather_plan, omap_order
from ..verify import field as F
from . import layout_copy

LEAD = 5   # k, gx, gy, gz, R before accumulation
LEAD_POST = 4


@lru_cache(maxsize=4096)
def _tile_geometry(dims: tuple, grid: tuple, imap: tuple, fmap: int, frange: int) -> tuple[list[int], list[int]]:
    """Shape and element strides of the tile view (size 1 on grid axes that do not split the tensor)."""
    shape, strides, _ = gather_plan(dims, grid, imap, fmap, frange)
    return [1 if (a < 3 and strides[a] == 0) else n for a, n in enumerate(shape)], strides


def load_view(fp: np.ndarray, grid: Sequence[int], imap: Sequence[int], fmap: int, frange: int) -> np.ndarray:
    """A DTensor fingerprint ``[k, *dims]`` seen as tiles ``[k, gx|1, gy|1, gz|1, R|1, *tile]`` (no copy).

    The view of :func:`mirage_lab.ir.tiling.gather_plan`, with size 1 (not a stride-0
    broadcast) on the grid axes that do not split this tensor.
    """
    fp = np.ascontiguousarray(fp)
    shape, strides = _tile_geometry(fp.shape[1:], tuple(grid), tuple(imap), fmap, frange)
    isz = fp.itemsize
    return np.ndarray([fp.shape[0]] + shape, fp.dtype, fp, 0, [fp.strides[0]] + [s * isz for s in strides])


def save_full(tile: np.ndarray, grid: Sequence[int], omap: Sequence[int], out_dims: Sequence[int]) -> np.ndarray:
    """Post-loop tiles ``[k, gx, gy, gz, *tile]`` (maybe broadcast) -> the output DTensor ``[k, *out_dims]``."""
    v = save_view(tile, grid, omap)
    return layout_copy.contiguous(v).reshape((tile.shape[0],) + tuple(out_dims))


def save_full_digest(tile: np.ndarray, grid: Sequence[int], omap: Sequence[int],
                     out_dims: Sequence[int]) -> tuple[np.ndarray, bytes]:
    """:func:`save_full` and the output's digest (``layout_copy.digest``), copied and hashed in one pass."""
    out, d = layout_copy.contiguous_digest(save_view(tile, grid, omap))
    return out.reshape((tile.shape[0],) + tuple(out_dims)), d


@lru_cache(maxsize=4096)
def _save_axes(grid: tuple, omap: tuple, rank: int) -> tuple[tuple[int, ...], int]:
    """The transpose of ``[k, gx, gy, gz, *tile]`` to the output's order, and how many axes lead it.

    The grid axes of size 1 lead (dropped after the transpose), then ``k`` and the axes in
    :func:`mirage_lab.ir.tiling.omap_order`.
    """
    order = [1 + ax for ax in omap_order(grid, omap, rank)]
    lead = [1 + a for a in range(3) if 1 + a not in order]
    return tuple(lead + [0] + order), len(lead)


def save_view(tile: np.ndarray, grid: Sequence[int], omap: Sequence[int]) -> np.ndarray:
    """The view of ``tile`` (no copy; broadcast axes have stride 0) whose C-order is the output's."""
    k = tile.shape[0]
    full = np.broadcast_to(tile, (k, grid[0], grid[1], grid[2]) + tile.shape[LEAD_POST:])
    axes, lead = _save_axes(tuple(grid), tuple(omap), tile.ndim - LEAD_POST)
    v = full.transpose(axes)
    return v.reshape(v.shape[lead:])   # the leading grid axes have size 1: still a view


def matmul(a: np.ndarray, b: np.ndarray, mm: Callable[[np.ndarray, np.ndarray], np.ndarray] = F.matmul) -> np.ndarray:
    """Batched ``a @ b`` over broadcast leading axes, in Z_pq.

    A batch axis where one operand has size 1 and the other does not is folded into that
    other operand's row (or column) dimension, so one large product replaces many small
    ones: e.g. a tile of X shared by 256 blocks times 256 different tiles of W becomes one
    ``[m,k] x [k, 256 n]`` product.
    """
    nb = max(a.ndim, b.ndim) - 2
    a = a.reshape((1,) * (nb - (a.ndim - 2)) + a.shape)
    b = b.reshape((1,) * (nb - (b.ndim - 2)) + b.shape)
    fold_b = [i for i in range(nb) if a.shape[i] == 1 and b.shape[i] > 1]   # b varies, a shared
    fold_a = [i for i in range(nb) if b.shape[i] == 1 and a.shape[i] > 1]   # a varies, b shared
    keep = [i for i in range(nb) if i not in fold_a and i not in fold_b]
    m, kk, n = a.shape[-2], a.shape[-1], b.shape[-1]
    # a: [keep..., fold_a..., m, k] -> [keep..., FA*m, k]
    at = a.transpose(keep + fold_b + fold_a + [nb, nb + 1])
    fa = int(np.prod([a.shape[i] for i in fold_a])) if fold_a else 1
    at = at.reshape(at.shape[: len(keep)] + (fa * m, kk))   # fold_b axes have size 1 in a
    # b: [keep..., fold_b..., k, n] -> [keep..., k, FB*n]
    bt = b.transpose(keep + fold_a + [nb] + fold_b + [nb + 1])
    fb = int(np.prod([b.shape[i] for i in fold_b])) if fold_b else 1
    bt = bt.reshape(bt.shape[: len(keep)] + (kk, fb * n))
    r = mm(at, bt)                                     # [keep..., FA*m, FB*n]
    keep_shape = r.shape[: len(keep)]
    r = r.reshape(keep_shape + tuple(a.shape[i] for i in fold_a) + (m,) + tuple(b.shape[i] for i in fold_b) + (n,))
    # back to [batch axes in original order..., m, n]
    cur = keep + fold_a + [nb] + fold_b + [nb + 1]
    inv = [cur.index(i) for i in range(nb)] + [cur.index(nb), cur.index(nb + 1)]
    return r.transpose(inv)
