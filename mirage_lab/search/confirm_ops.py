"""Confirming a hit in the search's tile layout: the verifier's field ops, with block graphs run
as the search runs them.

A hit is confirmed on fresh random tests at the program's full shape (``worker._confirm``:
what ``mi.verify.equivalent`` decides). The verifier's numpy path materialises every block's
tiles for every iteration (``[k, B, R, *tile]``) and multiplies them afresh for each candidate,
so at full shapes a confirmation cost as much as a few hundred states (RESULTS.md, "Search
profile"). :class:`TileLayoutOps` keeps the tiles as the search holds them
(``[k, gx, gy, gz, R, *tile]`` views, :mod:`.tiles`) and multiplies them through the search's
product memo (:class:`.arrays.NumpyArrays`): the candidates of one program mostly tile the
same products (X·W cut by other grids and loop ranges), which the memo folds to one product
and derives the coarser chunkings of by sums. The values are the verifier's exactly (field
arithmetic either way; ``tests/search/test_confirm_ops.py``).

    >>> from mirage_lab import examples as ex
    >>> from mirage_lab.verify.fingerprint import fingerprint_graph, random_inputs
    >>> g = ex.rms_norm_linear_fused(4, 64, 64)
    >>> xs = random_inputs(g, 2, seed=1)
    >>> a, = fingerprint_graph(g, xs, ops=TileLayoutOps())
    >>> b, = fingerprint_graph(g, xs)
    >>> bool((a == b).all())
    True
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from . import tiles
from .arrays import NumpyArrays
from .cpu_ops import SearchFieldOps


class ConfirmArrays(NumpyArrays):
    """The search's CPU arrays with their own product memo (the confirmations' tests are not the
    search's: sharing one memo would evict the search's products)."""

    MEMO_BYTES = 384 << 20   # two tests of W [4096, 4096] as float64: 256 MiB, kept across candidates


class TileLayoutOps(SearchFieldOps):
    """:class:`SearchFieldOps` whose block-level primitives take and give the search's tile layout.

    ``gather_tiles`` returns the loader's view ``[k, gx|1, gy|1, gz|1, R|1, *tile]``, the
    accumulators reduce its iteration axis, ``scatter_tiles`` writes the output from
    ``[k, gx|1, gy|1, gz|1, *tile]`` and every product goes through the memo of ``arrays``.
    Elementwise ops broadcast over the size-1 axes, which the verifier's layout materialises.
    """

    def __init__(self, arrays: NumpyArrays | None = None) -> None:
        super().__init__()
        self.arrays = arrays if arrays is not None else ConfirmArrays()

    def gather_tiles(self, x: Any, grid: Sequence[int], imap: Sequence[int], fmap: int, frange: int) -> Any:
        return self.arrays.load_view(np.asarray(x), grid, imap, fmap, frange)

    def scatter_tiles(self, t: Any, grid: Sequence[int], omap: Sequence[int], out_dims: Sequence[int]) -> Any:
        return self.arrays.save_full(np.asarray(t), grid, omap, out_dims)

    def accum(self, kind: str | None, x: Any, axis: int = 2, frange: int | None = None, w: int | None = None,
              dimx: int = 64) -> Any:
        # the verifier's iteration axis (2 of [k, B, R, *tile]) is the search layout's R
        return super().accum(kind, x, tiles.LEAD - 1 if axis == 2 else axis, frange, w, dimx)

    def matmul(self, a: Any, b: Any) -> Any:
        return self.arrays.matmul(np.asarray(a), np.asarray(b))


__all__ = ["TileLayoutOps", "ConfirmArrays"]
