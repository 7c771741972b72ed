"""The search's tasks below a first kernel op (:meth:`.generator.Generator.tasks` lists the rest).

Each first kernel op is split by its second choice so that deep kernel-level subtrees spread over
workers: the op's state alone, each second kernel op, and each customized op after it, tiered by
:func:`.axes.root_tier`. Where the first two ops both compute tensors of the program itself (QK-norm's
``rms_norm(Q)`` and ``·Gq`` as plain ops) and room is left for a customized op, that path is split
one level deeper (:class:`.state.Then`): each customized op after the two is a task of its own, so
FlashAttention's tilings after the norm are searched by many workers at once, early.
"""
from __future__ import annotations

from typing import Any

from .axes import INCOHERENT, op_axis_classes, root_tier
from .state import Node, Task, Then


class KernelTasks:
    """Mixin of :class:`.generator.Generator`: the tasks below each first kernel op."""

    def _kernel_op_tasks(self, nodes: list[Node], classes: list, needed: set, program_exprs: set,
                         tiering: tuple) -> tuple[list[Task], list[list[Task]], list[Task]]:
        """``(kernel, later_full, own_chains)``: the untiered subtrees (kept for last); customized ops after
        one kernel op by ``2 * tier + other`` (``other`` 0 where the op computes a program tensor); coherent
        customized ops after two of the program's own ops, by tier."""
        n_in = len(nodes)
        custom = self.cfg.max_customized_ops > 0
        kernel: list[Task] = []
        later_full: list[list[Task]] = [[] for _ in range(INCOHERENT) for _own in (0, 1)]
        own_chains: list[list[Task]] = [[] for _ in range(INCOHERENT + 1)]

        def tier(cls: list, root: Any, reads: set) -> int:
            return root_tier([cls[i] for i in root.inputs], root.grid, root.imaps, root.fmaps, *tiering) \
                if needed <= reads else INCOHERENT

        for op in self._kernel_op_choices(nodes, None):
            node = self._kernel_node(nodes, op, fingerprint=False)
            if node is None:
                continue
            kernel.append(Task(0, "kernel", op, None))
            after = nodes + [node]
            own = 0 if node.expr in program_exprs else 1
            after_cls = classes + [op_axis_classes(op[0], [(nodes[i].dims, classes[i]) for i in op[1]], node.dims)]
            for child in self._kernel_op_choices(after, [op]):
                node2 = self._kernel_node(after, child, fingerprint=False) if own == 0 and custom and \
                    len(after) + 1 < self.cfg.max_kernel_ops else None
                if node2 is None or node2.expr not in program_exprs:
                    kernel.append(Task(0, "kernel", op, child))
                    continue
                after2, ops2 = after + [node2], [op, child]
                cls2 = after_cls + [op_axis_classes(child[0], [(after[i].dims, after_cls[i]) for i in child[1]],
                                                    node2.dims)]
                kernel.append(Task(0, "kernel", op, Then(child)))
                kernel.extend(Task(0, "kernel", op, Then(child, k)) for k in self._kernel_op_choices(after2, ops2))
                for root in self._block_roots(after2, ops2):
                    t = tier(cls2, root, _inputs_read(root.inputs, ops2, n_in))
                    own_chains[t].append(Task(0, "kernel", op, Then(child, root)))
            if custom and len(after) < self.cfg.max_kernel_ops:
                for root in self._block_roots(after, [op]):
                    t = tier(after_cls, root, _inputs_read(root.inputs, [op], n_in))
                    (kernel if t == INCOHERENT else later_full[2 * t + own]).append(Task(0, "kernel", op, root))
        return kernel + own_chains[INCOHERENT], later_full, [t for tier_ in own_chains[:INCOHERENT] for t in tier_]


def _inputs_read(ins: tuple[int, ...], ops: list[tuple], n_in: int) -> set[int]:
    """The program inputs that tensors ``ins`` read, through the kernel ops ``ops`` that made those past ``n_in``."""
    out, todo = set(), list(ins)
    while todo:
        i = todo.pop()
        if i < n_in:
            out.add(i)
        else:
            todo.extend(ops[i - n_in][1])
    return out


__all__ = ["KernelTasks"]
