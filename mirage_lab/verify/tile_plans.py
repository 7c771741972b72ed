"""Where each block's tile lies in a tensor: the strided views behind gather and scatter.

Pure index arithmetic (element strides, no arrays), defined once in :mod:`mirage_lab.ir.tiling`
and shared by both fingerprint backends:
:meth:`.numpy_backend.FieldOps.gather_tiles` / ``scatter_tiles`` turn a plan into one
strided copy, on the CPU or on the device.

    >>> gather_plan([8, 64], grid=(4, 1, 1), imap=(1, -1, -1), fmap=0, frange=2)
    ([4, 1, 1, 2, 4, 16], [16, 0, 0, 256, 64, 1], [4, 2, 4, 16])
"""
from __future__ import annotations

from typing import Sequence

from ..ir.tiling import TilingError, contiguous_strides, gather_plan  # the one tiling rule
from ..ir.tiling import scatter_plan as _scatter_plan
from .field import FieldError


def scatter_plan(tile: Sequence[int], grid: Sequence[int], omap: Sequence[int], out_dims: Sequence[int]):
    """:func:`mirage_lab.ir.tiling.scatter_plan`, its error as a :class:`.field.FieldError`."""
    try:
        return _scatter_plan(tile, grid, omap, out_dims)
    except TilingError as e:
        raise FieldError(f"scatter_tiles: {e}") from None


__all__ = ["contiguous_strides", "gather_plan", "scatter_plan"]
