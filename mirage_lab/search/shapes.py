"""Shapes of the search's tensors: op output dims and the size limits they obey.

Tile dims are :func:`mirage_lab.ir.tiling.tile_dims` (the one tiling rule).
"""
from __future__ import annotations

from functools import lru_cache
from typing import Sequence

import numpy as np

#: The search holds each block tensor for every block and iteration at once; one that would
#: exceed this many elements (128 MiB of uint16) is not explored (counted in pruned_other).
#: With a 96 KB tile this still allows 2**26 / 48K = 1365 (block, iteration) pairs of it.
MAX_FP_ELEMENTS = 1 << 26
#: A loop's partial results (a tile product before its accumulator) are held for every
#: iteration: ``frange`` times the accumulated tensor, which is at most the program's output.
#: At prefill sizes that is more than MAX_FP_ELEMENTS (Phi-3's 128 x 9216 output x 64
#: iterations = 75M), and the guard cut every fused norm + linear / MLP μGraph there. Such a
#: loop may hold up to this many (256 MiB of uint16): see :func:`block_fp_limit`.
MAX_LOOP_FP_ELEMENTS = 1 << 27


def numel(dims: Sequence[int]) -> int:
    n = 1
    for d in dims:
        n *= d
    return n


def tile_bytes(dims: Sequence[int], itemsize: int) -> int:
    return itemsize * numel(dims)


def block_fp_limit(frange: int, out_elements: int) -> int:
    """The most elements a block tensor's fingerprint (all blocks and iterations) may have.

    ``frange`` iterations of a tile as large as the program's output (``out_elements``):
    a loop's partials before their accumulator; never below :data:`MAX_FP_ELEMENTS`, never
    above :data:`MAX_LOOP_FP_ELEMENTS`.

        >>> block_fp_limit(64, 128 * 9216) == 64 * 128 * 9216
        True
        >>> block_fp_limit(1, 16) == MAX_FP_ELEMENTS
        True
    """
    return max(MAX_FP_ELEMENTS, min(MAX_LOOP_FP_ELEMENTS, frange * out_elements))


def fp_elements(typ: str, a: tuple, b: tuple | None) -> int:
    if b is None:
        return numel(a)
    if typ == "matmul":
        return numel(np.broadcast_shapes(a[:-2], b[:-2])) * a[-2] * b[-1]
    return numel(np.broadcast_shapes(a, b))


@lru_cache(maxsize=1 << 16)   # called for every (op, operands) pair of every state: millions of times
def op_out_dims(typ: str, a: tuple, b: tuple | None, batch_one: bool) -> tuple[int, ...] | None:
    if typ == "matmul":
        assert b is not None
        if len(a) < 2 or len(a) != len(b) or a[:-2] != b[:-2] or a[-1] != b[-2]:
            return None
        if batch_one and any(d != 1 for d in a[:-2]):
            return None
        return a[:-1] + (b[-1],)
    if b is None:
        return a
    if len(a) != len(b):
        return None
    out = []
    for x, y in zip(a, b):
        if x != y and x != 1 and y != 1:
            return None
        out.append(max(x, y))
    return tuple(out)
