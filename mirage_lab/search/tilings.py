"""Tiling enumeration: the grids, input maps, loop maps and loop ranges of a customized op.

Given the shapes of a customized op's inputs, :func:`tilings` yields every
``(grid, imaps, fmaps, frange)`` the configuration allows whose tiles divide evenly, whose
loaders fit in shared memory, and (for the program's last kernel op) from which some output
map can still give a target output's shape. The generator pairs them with input sets to
make :class:`~.state.BlockRoot` choices.
"""
from __future__ import annotations

import functools
import itertools
import math
from typing import Callable, Iterator, Sequence


from ..ir.tiling import tile_dims
from .config import SearchConfig, normalize_map

Tiling = tuple  # (grid, imaps, fmaps, frange)


@functools.lru_cache(maxsize=1 << 16)
def _tile(dims: tuple[int, ...], grid: tuple, imap: tuple, fmap: int, fr: int) -> tuple[int, ...]:
    # listing a program's tasks asks for the same few thousand tiles a million times (LoRA: 57k roots)
    return tile_dims(dims, grid, imap, fmap, fr)


def tilings(cfg: SearchConfig, dims: list[tuple[int, ...]], itemsize: int,
            final_outputs: Sequence[tuple[int, ...]] | None = None,
            on_pruned: Callable[[], None] = lambda: None,
            split_dims: Sequence[frozenset[int]] | None = None) -> Iterator[Tiling]:
    """The tilings of inputs of shapes ``dims``, in the search's fixed order.

    ``final_outputs``: the target's output shapes when the customized op would be the last
    kernel op (its tiles must then be able to reach them). ``on_pruned`` is called once for
    each tiling refused by shared memory or by that reachability test. ``split_dims``: per
    input, the dims split-K may cut (:meth:`.config.SearchConfig.split_grid_candidates`' grids
    follow the others, their first axis mapped to such dims only).
    """
    grids = [(g, False) for g in cfg.grid_candidates(dims)]
    if split_dims is not None and any(split_dims):
        seen = {g for g, _ in grids}
        grids += [(g, True) for g in cfg.split_grid_candidates(dims) if g not in seen]
    for grid, split in grids:
        for imaps in imap_combos(cfg, dims, grid):
            if split and not all(m[0] < 0 or m[0] in sd for m, sd in zip(imaps, split_dims)):
                continue
            for fmaps in fmap_combos(cfg, dims):
                for fr in franges(cfg, dims, grid, imaps, fmaps):
                    if loader_smem(dims, grid, imaps, fmaps, fr, itemsize) > cfg.smem_limit:
                        on_pruned()
                        continue
                    if final_outputs is not None and \
                            not final_tiles_reachable(cfg, final_outputs, dims, grid, imaps, fmaps, fr):
                        on_pruned()
                        continue
                    yield grid, imaps, fmaps, fr


@functools.lru_cache(maxsize=1024)
def _omaps(cfg: SearchConfig, grid: tuple) -> list[tuple]:
    return [normalize_map(om, grid) for om in cfg.omap_candidates()]


def final_tiles_reachable(cfg: SearchConfig, outputs: Sequence[tuple[int, ...]], dims: list, grid: tuple,
                          imaps: tuple, fmaps: tuple, fr: int) -> bool:
    """For the last kernel op: can some output map give a target output's shape?

    Block ops never make a tile dim larger than the largest loader tile dim at that
    position (matmul takes rows from A and columns from B, broadcasting takes the max),
    except reductions (1) and the fold to ``reduction_dimx`` (last dim). So the tile each
    block must write, the target's output dims divided along the mapped grid axes, has
    to fit under those bounds.
    """
    tiles = [_tile(tuple(d), grid, m, f, fr) for d, m, f in zip(dims, imaps, fmaps)]
    for out in outputs:
        rank = len(out)
        bound = [max((t[k] for t in tiles if len(t) == rank), default=0) for k in range(rank)]
        for om in _omaps(cfg, tuple(grid)):
            if any(grid[a] > 1 and not 0 <= om[a] < rank for a in range(3)):
                continue
            tile = list(out)
            ok = True
            for a in range(3):
                if om[a] >= 0:
                    if tile[om[a]] % grid[a]:
                        ok = False
                        break
                    tile[om[a]] //= grid[a]
            if ok and all(tile[k] <= bound[k] or tile[k] == 1 or (k == rank - 1 and tile[k] == cfg.reduction_dimx)
                          for k in range(rank)):
                return True
    return False


def imap_combos(cfg: SearchConfig, dims: list[tuple[int, ...]], grid: tuple[int, int, int]) -> Iterator[tuple]:
    """One input map per input (normalized, each dividing its dims evenly), every split grid axis used."""
    per_input = []
    for d in dims:
        opts = []
        for m in cfg.imap_candidates():
            if any(m[a] >= len(d) for a in range(3)):
                continue
            if any(grid[a] == 1 and m[a] >= 0 for a in range(3)):
                continue  # maps an axis of size 1 (Mirage skips these)
            used = [k for k in m if k >= 0]
            if len(used) != len(set(used)):
                continue
            if any(m[a] >= 0 and d[m[a]] % grid[a] for a in range(3)):
                continue
            nm = normalize_map(m, grid)
            if nm not in opts:
                opts.append(nm)
        if not opts:
            # No candidate map divides it: a broadcast operand (an RMSNorm weight [1, 1, d] under
            # the attention preset, which has no all-replicate map) is then replicated to every
            # block, as its shape implies. Without this, no customized op could read it.
            opts.append((-1, -1, -1))
        per_input.append(opts)
    for combo in itertools.product(*per_input):
        # Every grid axis > 1 must split at least one input, or its blocks all do the same work.
        if all(grid[a] == 1 or any(m[a] >= 0 for m in combo) for a in range(3)):
            yield combo


def fmap_combos(cfg: SearchConfig, dims: list[tuple[int, ...]]) -> Iterator[tuple[int, ...]]:
    """One loop map per input: a dim longer than 1, or -1 (not split by the loop)."""
    per_input = []
    for d in dims:
        opts = [f for f in cfg.fmap_candidates() if f == -1 or (f < len(d) and d[f] > 1)]
        per_input.append(opts)
    yield from itertools.product(*per_input)


def franges(cfg: SearchConfig, dims: list, grid: tuple, imaps: tuple, fmaps: tuple) -> list[int]:
    """The loop ranges that divide every looped dim (after the grid's split); [1] with no loop."""
    if all(f == -1 for f in fmaps):
        return [1]
    out = []
    for x in cfg.frange_candidates():
        ok = True
        for d, m, f in zip(dims, imaps, fmaps):
            if f < 0:
                continue
            n = d[f]
            for a in range(3):
                if m[a] == f:
                    n //= grid[a]
            if n % x:
                ok = False
                break
        if ok:
            out.append(x)
    return out


def loader_smem(dims: list, grid: tuple, imaps: tuple, fmaps: tuple, fr: int, itemsize: int) -> int:
    """Bytes of shared memory the loaders' tiles take."""
    total = 0
    for d, m, f in zip(dims, imaps, fmaps):
        total += math.prod(_tile(tuple(d), tuple(grid), tuple(m), f, fr)) * itemsize
    return total
