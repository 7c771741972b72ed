"""The order of a search's tasks: tilings taken in turn, two kinds of roots taking turns.

The order never changes the set of tasks, so a complete search finds the same candidates; it
decides what a search cut short by ``search_seconds`` has reached.
"""
from __future__ import annotations

import itertools
from typing import Any

from .state import BlockRoot, Task


def tiling_of(task: Task) -> tuple | None:
    """The (grid, loop range) of a task's customized op; ``None`` for a kernel-op task."""
    root = task.op if task.kind == "block" else task.child
    return (root.grid, root.frange) if isinstance(root, BlockRoot) else None


def interleave_tilings(tasks: list[Task]) -> list[Task]:
    """``tasks`` round robin over their customized op's (grid, loop range), each tiling's tasks in order.

    A search stopped by ``search_seconds`` (the usual case at full shapes) has searched only a
    prefix of its task list. Taken tiling by tiling, that prefix held the first grids only (the
    most blocks, hence the narrowest tiles: 8 columns a block at LLaMA widths, each block reading
    all of X), and the kernels found there were slower than torch. Round robin, the first tasks
    span every grid and loop range the tier holds, so the tuner gets to time wide tiles and narrow
    ones alike. The set of tasks is unchanged; only their order (so a complete search finds the
    same candidates).
    """
    queues: dict[Any, list[Task]] = {}
    for t in tasks:
        queues.setdefault(tiling_of(t), []).append(t)
    if len(queues) < 2:
        return list(tasks)
    out: list[Task] = []
    lists = list(queues.values())
    for k in range(max(len(q) for q in lists)):
        out.extend(q[k] for q in lists if k < len(q))
    return out


def alternate(a: list, b: list) -> list:
    """``a`` and ``b`` taking turns, the longer one's rest at the end."""
    out = []
    for x, y in itertools.zip_longest(a, b):
        out += [t for t in (x, y) if t is not None]
    return out


__all__ = ["tiling_of", "interleave_tilings", "alternate"]
