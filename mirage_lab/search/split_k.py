"""Split-K rules of the search (``SearchConfig.split_reduction``, opt-in): which grids split a summed
axis into partial sums, and the extra customized op (the combine) such a split allows.

A mixin of :class:`.generator.Generator`: it uses the generator's ``cfg``, ``t`` (the target) and
``_ax`` (``_axis_info()``: logical-axis classes by expression). docs/search.md, "Split-K".
"""
from __future__ import annotations

from .axes import split_axes
from .state import Node


class SplitKRules:
    """The generator's split-K questions, asked on its hot path (the split axes are computed once)."""

    def _split_axes(self) -> frozenset[int]:
        """:func:`.axes.split_axes` of the program when split-K is on (computed once: the hot path asks)."""
        if getattr(self, "_split", None) is None:
            self._split = split_axes(self.t.graph) if self.cfg.split_reduction else frozenset()
        return self._split

    def _customized_left(self, nodes: list[Node], ops: list[tuple] | None) -> int:
        """How many more customized ops the state may add: ``max_customized_ops`` less those it
        has, plus split-K's combine kernel once a customized op has split a :func:`.axes.split_axes`
        axis (its partial sums must be added up by a later one)."""
        customs = [op for op in ops or () if op[0] == "customized"]
        left = self.cfg.max_customized_ops - len(customs)
        if self.cfg.split_reduction and customs:
            if self._ax is None:
                self._ax = self._axis_info()
            split = self._split_axes()
            for op in customs:
                cls = [self._ax[0].get((nodes[i].expr, nodes[i].dims)) for i in op[1]]
                a = dict(op[2])
                if all(c is not None for c in cls) and self._combinable_split(cls, a["grid"], a["imaps"], split):
                    return left + 1
        return left

    def _combinable_split(self, classes: list, grid: tuple, imaps: tuple, axes: frozenset[int]) -> bool:
        """Does the grid split ``axes`` into partial sums a combine kernel's loop can add up
        (as many as one of :meth:`.config.SearchConfig.split_factors`)?"""
        parts = split_parts(classes, grid, imaps, axes)
        return bool(parts) and parts <= set(self.cfg.split_factors())

    def _split_dims(self, nodes: list[Node]) -> list[frozenset[int]]:
        """Per tensor of the state, the dims on a :func:`.axes.split_axes` axis (none for a
        tensor the program lacks: its axes are unknown)."""
        if self._ax is None:
            self._ax = self._axis_info()
        axes = self._split_axes()
        out = []
        for n in nodes:
            cls = self._ax[0].get((n.expr, n.dims))
            out.append(frozenset(k for k, c in enumerate(cls) if c in axes) if cls else frozenset())
        return out


def split_parts(classes: list, grid: tuple, imaps: tuple, axes: frozenset[int]) -> set[int]:
    """Into how many parts the grid splits ``axes`` (logical-axis ids) in the inputs it reads
    (empty: it splits none). ``classes``: the axis ids of each input's dims, in the order of ``imaps``."""
    return {grid[a] for c, m in zip(classes, imaps) for a in range(3) if grid[a] > 1 and m[a] >= 0 and c[m[a]] in axes}


__all__ = ["SplitKRules", "split_parts"]
