"""The order of a search's tasks: tilings taken in turn, two kinds of roots taking turns.

The order never changes the set of tasks, so a complete search finds the same candidates; it
decides what a search cut short by ``search_seconds`` has reached.
"""
from __future__ import annotations

import itertools
from typing import Any, Sequence

from .state import BlockRoot, Task, Then


def tiling_of(task: Task) -> tuple | None:
    """The (grid, loop range) of a task's customized op; ``None`` for a kernel-op task."""
    root = task.op if task.kind == "block" else task.child
    root = root.child if isinstance(root, Then) else root
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


def alternate(*lists: list) -> list:
    """The lists taking turns, one item each, the longer ones' rest at the end."""
    out = []
    for items in itertools.zip_longest(*lists):
        out += [t for t in items if t is not None]
    return out


def task_order(first_full: list[list[Task]], first_split: list[Task], later_full: list[list[Task]],
               partial: list[list[Task]], partial_other: list[list[Task]], rest: list[Task],
               own_chains: Sequence[Task] = ()) -> list[Task]:
    """The search's tasks in order, from its lists by tier (:meth:`.generator.Generator.tasks`).

    ``first_full[tier]``: first customized ops reading every needed input; ``first_split``: split-K's;
    ``later_full[2 * tier + other]``: customized ops after a kernel op (``other`` 0 where that op
    computes one of the program's own tensors); ``partial`` / ``partial_other``: first ones reading
    fewer inputs; ``rest``: the kernel-op subtrees and incoherent roots, last; ``own_chains``: coherent
    customized ops after two of the program's own kernel ops (QK-norm's ``rms_norm(Q)·Gq`` as plain ops,
    then attention), one task each, so that many workers share them.

    Three kinds of fused tilings take turns at tier 2: one kernel reading everything, split-K's, and
    a fused op after one of the program's own kernel ops (LoRA's ``X·A``, then ``X·W`` and
    ``(X·A)·B`` summed in one loop: W read once, the rank-r product not redone by every block;
    residual's add, then the fused norm + linear). Which is fastest depends on the program, and a
    search cut short by ``search_seconds`` must reach all three.
    """
    later_own, later_other = later_full[0::2], later_full[1::2]
    out = [t for tier in first_full[:2] for t in interleave_tilings(tier)]
    after_own = alternate([t for tier in later_own[:3] for t in interleave_tilings(tier)],
                          interleave_tilings(own_chains))
    out += alternate(interleave_tilings(first_full[2]), interleave_tilings(first_split), after_own)
    out += [t for tiers in (first_full[3:], later_own[3:], partial, later_other, partial_other) for tier in tiers
            for t in interleave_tilings(tier)]
    return out + rest


__all__ = ["tiling_of", "interleave_tilings", "alternate", "task_order"]
