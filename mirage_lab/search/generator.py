"""The μGraph generator: a depth-first search over kernel- and block-level ops (MIRAGE_SPEC §2.3).

The search works on compact states, not IR objects (:mod:`.state`): a tensor of a partial
μGraph is a :class:`Node`, ops are plain tuples, and IR graphs are built only for
candidates (:mod:`.build`).

Each step adds one op whose ``(input indices, op type)`` key is strictly greater than the
last op's (Mirage's canonical order), after three checks: shapes, the abstract-expression
oracle (the new tensor must be a subexpression of a target output), and deduplication
(a tensor equal to one the state already has, or a state already visited in this
subtree, is dropped). Every kernel-level state whose unused tensors number as many as the
target's outputs is compared with the target by fingerprints; a match is a candidate, and
its subtree is not expanded further.

This module holds the kernel level and the tasks; the ops inside a customized op are
searched by :class:`~.block_search.BlockSearch` (the generator's base class), over the
tilings that :mod:`.tilings` enumerates.

The search is split into independent subtrees (:class:`Task`): one per first choice at the
root. A task is deterministic, so the union of results does not depend on how tasks are
spread over workers.
"""
from __future__ import annotations

import itertools
import time
from typing import Any, Callable, Iterator

from ..expr import abstract_graph, for_kernel_op
from .arrays import digest_any, get_arrays
from .axes import (INCOHERENT, combinable_axes, input_axis_classes, program_input_sets, root_tier, summed_axes,
                   tensor_axis_classes)
from .block_search import BlockSearch
from .kernel_tasks import KernelTasks
from .split_k import SplitKRules
from .config import SearchConfig
from .events import SearchStats
from .prefilter import may_be_subexpression
from .shapes import MAX_FP_ELEMENTS, numel, op_out_dims
from .state import BINARY, TYPE_RANK, UNARY, BlockRoot, Cancelled, Hit, Node, Task, Then, order_key
from .target import Target
from .task_order import task_order, tiling_of  # noqa: F401  (tiling_of: its old home)
from .tilings import tilings

__all__ = ["Generator", "Target", "Task", "BlockRoot", "Hit", "Node", "Cancelled", "order_key", "MAX_FP_ELEMENTS",
           "UNARY", "BINARY", "TYPE_RANK"]


class Generator(KernelTasks, SplitKRules, BlockSearch):
    """Runs tasks of one search. ``on_hit`` is called with each candidate as it is found."""

    def __init__(self, target: Target, cfg: SearchConfig, *, should_stop: Callable[[], bool] | None = None,
                 on_hit: Callable[[Hit], None] | None = None, on_progress: Callable[[SearchStats], None] | None = None,
                 fingerprint_backend: str | None = None):
        self.t = target
        self.cfg = cfg = cfg.resolved(target.graph)
        self.should_stop = should_stop or (lambda: False)
        self.on_hit = on_hit or (lambda h: None)
        self.on_progress = on_progress or (lambda s: None)
        self.stats = SearchStats()
        self._last_poll = time.monotonic()
        self._expr_memo: dict[Any, bool] = {}
        self._ax: tuple | None = None
        self._restrict: tuple | None = None
        self.cont_memo: dict[tuple, list] = {}
        self.hits: list[Hit] = []
        self.seen_kernel: set = set()
        self._block_expr_memo: dict[tuple, Any] = {}
        self.arrays = get_arrays(fingerprint_backend or cfg.fingerprint_backend)
        # Kernel tensors far larger than any the program has (e.g. a [3M, 2] x [2, 4096] product)
        # are not explored: their fingerprints alone would fill the memory.
        biggest = max(t.numel() for t in target.graph.tensors)
        self.max_kernel_elements = max(MAX_FP_ELEMENTS, 2 * biggest)
        self._inputs = [self.arrays.put(fp) for fp in target.inputs_fp]
        self._input_keys = [Node(d, fp, None).key() for d, fp in zip(target.input_dims, self._inputs)]  # not per task
        # The outputs as Node keys name them (dims, phase, fingerprint shape, digest).
        self._out_keys = [(d, False, tuple(fp.shape), digest_any(self.arrays.put(fp)))
                          for d, fp in zip(target.output_dims, target.outputs_fp)]

    # ----------------------------------------------------------------- tasks
    def root_nodes(self) -> list[Node]:
        return [Node(d, fp, e, is_input=True, _key=k)
                for d, fp, e, k in zip(self.t.input_dims, self._inputs, self.t.input_exprs, self._input_keys)]

    def tasks(self) -> list[Task]:
        """Independent subtrees, in a fixed order that does not depend on the workers.

        Customized-op roots, first ones and those after one kernel op, are tiered by
        :func:`.axes.root_tier`; each first kernel op is split by its second choice so that
        the deep kernel-level subtrees spread over workers too (``child=None``: the state
        after the first op itself). The order (it never changes the set searched):

        1. coherent customized ops that read every input the outputs need: first ones (split-K's
           and the consistent ones after one or two of the program's own kernel ops taking turns
           with tier 2's: :func:`.task_order.task_order`, :mod:`.kernel_tasks`), then the other ones
           after the program's own kernel ops (residual's ``add``, then a fused norm + linear);
        2. coherent first customized ops that read exactly the inputs some tensor of the
           program depends on (QK-norm's Q and its weight: they can compute that tensor);
        3. coherent customized ops after another kernel op that read every needed input, then
           the other coherent first customized ops;
        4. the kernel-op subtrees left, in the generator's order;
        5. incoherent first customized ops.
        Within each group by tier (fused tilings live in the first: FlashDecoding, RMSNorm +
        Linear, the gated MLP, LoRA).
        """
        nodes = self.root_nodes()
        n_in = len(nodes)
        needed = set(self.t.needed_inputs)
        custom = self.cfg.max_customized_ops > 0
        classes = input_axis_classes(self.t.graph)
        combinable = combinable_axes(self.t.graph) if self.cfg.max_customized_ops > 1 else frozenset()
        # with one customized op, no later one can add up partial sums of a split summed axis (split-K's
        # combine kernel can: its first customized ops get their own list, every other root keeps its tier)
        summed = summed_axes(self.t.graph)
        split = self._split_axes()
        unsplittable = summed if self.cfg.max_customized_ops == 1 else frozenset()
        first_split: list[Task] = []
        coherent = range(INCOHERENT)
        first_full: list[list[Task]] = [[] for _ in coherent]
        program_exprs = set(abstract_graph(self.t.graph).values())
        # first customized ops reading fewer inputs: those reading exactly the inputs some tensor of
        # the program depends on (QK-norm's Q and its weight) first: they can compute that tensor
        partial: list[list[Task]] = [[] for _ in coherent]
        partial_other: list[list[Task]] = [[] for _ in coherent]
        input_sets = program_input_sets(self.t.graph)
        incoherent: list[Task] = []
        if custom and n_in < self.cfg.max_kernel_ops:
            for root in self._block_roots(nodes, None):
                tier = root_tier([classes[i] for i in root.inputs], root.grid, root.imaps, root.fmaps, combinable,
                                 unsplittable, summed)
                task = Task(0, "block", root)
                rc = [classes[i] for i in root.inputs]
                if tier == INCOHERENT:
                    incoherent.append(task)
                elif needed <= set(root.inputs) and self._combinable_split(rc, root.grid, root.imaps, split) and \
                        root_tier(rc, root.grid, root.imaps, root.fmaps, combinable, unsplittable - split, summed) == 2:
                    first_split.append(task)
                elif needed <= set(root.inputs):
                    first_full[tier].append(task)
                else:
                    (partial if frozenset(root.inputs) in input_sets else partial_other)[tier].append(task)
        kernel, later_full, own_chains = self._kernel_op_tasks(nodes, classes, needed, program_exprs,
                                                               (combinable, unsplittable, summed))
        out = task_order(first_full, first_split, later_full, partial, partial_other, kernel + incoherent, own_chains)
        for i, task in enumerate(out):
            task.index = i
        return out

    def all_tasks(self) -> list[Task]:
        """:meth:`tasks`, computed once per generator (workers look tasks up by index)."""
        if getattr(self, "_tasks", None) is None:
            self._tasks = self.tasks()
        return self._tasks

    def run_task(self, task: Task) -> list[Hit]:
        """Explore one subtree; returns its candidates (also passed to ``on_hit`` as found)."""
        self.hits: list[Hit] = []
        self.seen_kernel: set = set()
        nodes = self.root_nodes()
        kops: list[tuple] = []
        if task.kind == "kernel":
            self._restrict = (task.child,)
            self._try_kernel_op(nodes, kops, task.op)
            self._restrict = None
        else:
            self._start_block(nodes, kops, task.op)
        return self.hits

    def _poll(self) -> None:
        now = time.monotonic()
        if now - self._last_poll > 0.2:
            self._last_poll = now
            self.on_progress(self.stats)
            if self.should_stop():
                raise Cancelled()

    # ----------------------------------------------------------------- oracle
    def _expr_ok(self, expr: Any) -> bool:
        # The degree test is exact-negative and costs microseconds; the oracle memoizes, and
        # answers at once for symbols or inputs the target lacks; z3 decides the rest.
        ok = self._expr_memo.get(expr)
        if ok is None:
            ok = may_be_subexpression(expr, self.t.output_exprs) and self.t.oracle.check(expr)
            self._expr_memo[expr] = ok
        if not ok:
            self.stats.pruned_expr += 1
        return ok

    # ----------------------------------------------------------------- kernel level
    def _leaves(self, nodes: list[Node], ops: list[tuple]) -> list[int]:
        used = set()
        for op in ops:
            used.update(op[1])
        return [i for i, n in enumerate(nodes) if not n.is_input and i not in used]

    def _kernel_state(self, nodes: list[Node], ops: list[tuple]) -> None:
        self.stats.states += 1
        self._poll()
        restrict, self._restrict = self._restrict, None
        if restrict is not None and restrict[0] is not None:
            # A split kernel task: its sibling with child=None records this state's match
            # (and then nothing below it is explored); otherwise explore only this child.
            if self._verify_state(nodes, ops, record=False):
                return
            child = restrict[0]
            if isinstance(child, BlockRoot):
                self._start_block(nodes, ops, child)
            elif isinstance(child, Then):   # a path: this kernel op, then only its own choice
                self._restrict = (child.child,)
                self._try_kernel_op(nodes, ops, child.op)
                self._restrict = None
            else:
                self._try_kernel_op(nodes, ops, child)
            return
        if restrict is not None:
            self._verify_state(nodes, ops)
            return
        if self._verify_state(nodes, ops):
            return
        # Below a kernel state, the search depends only on the state's tensors, which of them
        # are still unused, which inputs were read, the last op's canonical key and the ops
        # (and customized ops) used: a state reached again (often from another customized op
        # that computes the same tensors) replays the continuations found the first time.
        # Dedup is scoped to the expansion, so what is memoized does not depend on which task
        # got there first.
        n_in = len(self.t.input_dims)
        used_inputs = frozenset(i for op in ops for i in op[1] if i < n_in)
        mkey = (tuple(n.key() for n in nodes[n_in:]), tuple(self._leaves(nodes, ops)), used_inputs,
                self._last_key(ops), len(ops), sum(1 for op in ops if op[0] == "customized"))
        memo = self.cont_memo.get(mkey)
        if memo is not None:
            self.stats.reused += 1
            for suffix, perm, leaves in memo:
                self._record(Hit(list(ops) + list(suffix), perm, leaves))
            return
        start = len(self.hits)
        saved_seen, self.seen_kernel = self.seen_kernel, set()
        self._expand_kernel_state(nodes, ops)
        self.seen_kernel = saved_seen
        self.cont_memo[mkey] = [(tuple(h.ops[len(ops):]), h.output_perm, h.leaves) for h in self.hits[start:]]

    def _expand_kernel_state(self, nodes: list[Node], ops: list[tuple]) -> None:
        left = self.cfg.max_kernel_ops - len(self.t.input_dims) - len(ops)
        if left <= 0:
            return
        # Can the ops left still bring the unused tensors to the number of outputs? A binary
        # op merges two into one; a customized op at most max_block_inputs into one.
        n_leaves = len(self._leaves(nodes, ops))
        n_out = len(self.t.output_dims)
        custom_left = self._customized_left(nodes, ops)
        merge = max(1, self.cfg.max_block_inputs - 1) if custom_left > 0 else 1
        if n_leaves - left * merge > n_out or n_out - n_leaves > left:
            self.stats.pruned_other += 1
            return
        # after a split-K kernel, its combine (a customized op) first: the order only
        combine_first = custom_left > self.cfg.max_customized_ops - sum(1 for op in ops if op[0] == "customized")
        if not combine_first:
            for op in self._kernel_op_choices(nodes, ops):
                self._try_kernel_op(nodes, ops, op)
        if custom_left > 0:
            leaves = set(self._leaves(nodes, ops))
            for root in self._tiered_roots(nodes, ops):
                # split-K's extra customized op is its combine only: it reads the partial sums (the
                # tensors left unused) and nothing else. (Letting it re-read program inputs too, for
                # RMSNorm's statistic, made each wrong first kernel's subtree several times larger:
                # no split-K candidate of l2 norm + matmul 8x256x512 in 240 s, against 8 s.)
                if combine_first and custom_left == 1 and set(root.inputs) != leaves:
                    continue
                self._start_block(nodes, ops, root)
        if combine_first:
            for op in self._kernel_op_choices(nodes, ops):
                self._try_kernel_op(nodes, ops, op)

    def _tiered_roots(self, nodes: list[Node], ops: list[tuple]) -> list[BlockRoot]:
        """The customized-op roots of a kernel state, by :func:`.axes.root_tier` (stable).

        The tensors' logical axes are those of the program tensor with the same expression;
        a root reading a tensor the program lacks keeps its place after the tiered ones. (A
        second customized op, attention's after QK-norm's, then starts with FlashAttention's
        tilings, not with the raw order's first grid.)
        """
        roots = list(self._block_roots(nodes, ops))
        if len(roots) < 2:
            return roots
        if self._ax is None:
            self._ax = self._axis_info()
        by_expr, combinable, unsplittable, summed = self._ax
        customs_left = self._customized_left(nodes, ops)
        cls = [by_expr.get((n.expr, n.dims)) for n in nodes]

        leaves = set(self._leaves(nodes, ops))
        read = {i for op in ops for i in op[1]}

        def tier(r: BlockRoot) -> tuple[int, int]:
            # A root that takes up every tensor left unused, and nothing an earlier op already
            # read, continues the earlier customized op (split-K's or FlashDecoding's combine of
            # the partial sums, whose tensors the program lacks); the others re-read what the
            # earlier op consumed, so they come after.
            follows = 0 if leaves and leaves <= set(r.inputs) and not read & set(r.inputs) else 1
            rc = [cls[i] for i in r.inputs]
            if any(c is None for c in rc):
                return follows, INCOHERENT + 1
            return follows, root_tier(rc, r.grid, r.imaps, r.fmaps, combinable if customs_left > 1 else frozenset(),
                                      unsplittable if customs_left == 1 else frozenset(), summed)

        return sorted(roots, key=tier)

    def _axis_info(self) -> tuple:
        graph = self.t.graph
        exprs = abstract_graph(graph)
        by_guid = tensor_axis_classes(graph)
        by_expr = {}
        for t in graph.tensors:
            if t.guid in by_guid and t.guid in exprs:
                by_expr.setdefault((exprs[t.guid], tuple(t.dims)), by_guid[t.guid])
        combinable = combinable_axes(graph) if self.cfg.max_customized_ops > 1 else frozenset()
        summed = summed_axes(graph)
        return by_expr, combinable, summed, summed

    def _verify_state(self, nodes: list[Node], ops: list[tuple], record: bool = True) -> bool:
        """Compare the state's unused tensors with the target's outputs; record a match."""
        if not ops:
            return False
        leaves = self._leaves(nodes, ops)
        if len(leaves) != len(self.t.output_dims):
            return False
        self.stats.fingerprint_tests += 1
        perm = self._match([nodes[i] for i in leaves])
        if perm is None:
            return False
        if not record:
            return True
        self._record(Hit(list(ops), perm, tuple(leaves)))
        return True

    def _match(self, leaves: list[Node]) -> tuple[int, ...] | None:
        """The permutation mapping the target's outputs to ``leaves`` with equal keys, if any."""
        n = len(self._out_keys)
        for perm in itertools.permutations(range(n)):
            if all(leaves[perm[i]].key() == self._out_keys[i] for i in range(n)):
                return perm
        return None

    def _record(self, hit: Hit) -> None:
        self.stats.candidates += 1
        self.hits.append(hit)
        self.on_hit(hit)

    def _last_key(self, ops: list[tuple] | None) -> tuple | None:
        if not ops:
            return None
        op = ops[-1]
        return order_key(op[1], op[0])

    def _min_leaf_use(self, nodes: list[Node], ops: list[tuple] | None) -> tuple[set[int], int]:
        """The unused tensors, and how many of them the next op must consume.

        After the next op (at least one output) the ops left must still be able to merge
        the unused tensors down to the target's outputs; the last op, say, must consume all
        but those. This is what keeps a second customized op from starting on anything but
        the first one's outputs.
        """
        ops = ops or []
        leaves = set(self._leaves(nodes, ops))
        left = self.cfg.max_kernel_ops - len(self.t.input_dims) - len(ops)
        if left == 1:
            # The last op must also read every input the outputs depend on that is still unread.
            used = {i for op in ops for i in op[1]}
            leaves |= {i for i in self.t.needed_inputs if i not in used}
        merge = max(1, self.cfg.max_block_inputs - 1) if self._customized_left(nodes, ops) > 0 else 1
        need = len(leaves) + 1 - len(self.t.output_dims) - (left - 1) * merge
        if left == 1:
            need = max(need, len(leaves) - len(self.t.output_dims) + 1, len(leaves - set(self._leaves(nodes, ops))))
        return leaves, max(0, need)

    def _kernel_op_choices(self, nodes: list[Node], ops: list[tuple] | None) -> Iterator[tuple]:
        last = self._last_key(ops)
        n = len(nodes)
        leaves, need = self._min_leaf_use(nodes, ops)
        for typ in self.cfg.kernel_ops:
            if typ in UNARY or typ == "rms_norm":
                cands: Iterator[tuple[int, ...]] = ((i,) for i in range(n))
            else:
                cands = itertools.product(range(n), repeat=2)
            for ins in cands:
                if last is not None and order_key(ins, typ) <= last:
                    continue
                if need and len(leaves.intersection(ins)) < need:
                    continue
                yield from self._with_attrs(typ, ins)

    def _with_attrs(self, typ: str, ins: tuple[int, ...]) -> Iterator[tuple]:
        """The op tuples for ``typ`` on ``ins``: clamp once per bound pair the program uses."""
        if typ == "clamp":
            for lo, hi in self.t.clamp_bounds:
                yield (typ, ins, (("hi", hi), ("lo", lo)))
        else:
            yield (typ, ins, ())

    def _kernel_node(self, nodes: list[Node], op: tuple, fingerprint: bool = True) -> Node | None:
        """The tensor a kernel op would add, or None if shapes or the oracle refuse it.

        ``fingerprint=False``: without its fingerprint (listing tasks needs only the shape and the
        expression; at a layer's full size a product such as LoRA's A·B takes seconds)."""
        typ, ins, attrs = op
        a = nodes[ins[0]]
        b = nodes[ins[1]] if len(ins) > 1 else None
        dims = op_out_dims(typ, a.dims, b.dims if b else None, batch_one=False)
        if dims is None:
            self.stats.pruned_other += 1
            return None
        if numel(dims) > self.max_kernel_elements:
            self.stats.pruned_other += 1
            return None
        expr = for_kernel_op(typ, dict(attrs), [a.expr] + ([b.expr] if b else []), [a.dims] + ([b.dims] if b else []))
        if not self._expr_ok(expr):
            return None
        fp = self._fp_op(typ, a.fp, b.fp if b else None, dict(attrs)) if fingerprint else None
        return Node(dims, fp, expr)

    def _try_kernel_op(self, nodes: list[Node], ops: list[tuple], op: tuple) -> None:
        node = self._kernel_node(nodes, op)
        if node is None or not self._push_kernel(nodes, ops, [node], op):
            return
        self._kernel_state(nodes, ops)
        del nodes[-1]
        ops.pop()

    def _push_kernel(self, nodes: list[Node], ops: list[tuple], new: list[Node], op: tuple) -> bool:
        if self.cfg.dedup:
            keys = {n.key() for n in nodes}
            if any(n.key() in keys for n in new):
                self.stats.pruned_dedup += 1
                return False
            state_key = frozenset(keys | {n.key() for n in new})
            if state_key in self.seen_kernel:
                self.stats.pruned_dedup += 1
                return False
            self.seen_kernel.add(state_key)
        nodes.extend(new)
        ops.append(op)
        return True

    # ----------------------------------------------------------------- customized-op roots
    def _block_roots(self, nodes: list[Node], ops: list[tuple] | None) -> Iterator[BlockRoot]:
        cfg = self.cfg
        last = self._last_key(ops)
        n = len(nodes)
        leaves, need = self._min_leaf_use(nodes, ops)
        last_op = cfg.max_kernel_ops - len(self.t.input_dims) - len(ops or []) == 1
        final = self.t.output_dims if last_op else None
        split = self._split_dims(nodes) if cfg.split_reduction else None
        # Larger input sets first: fusing more of the program in one kernel is where the
        # fast candidates are, so they come out early (the order does not change the set).
        for size in range(min(cfg.max_block_inputs, n), 0, -1):
            for ins in itertools.combinations(range(n), size):
                if last is not None and order_key(ins, "customized") <= last:
                    continue
                if need and len(leaves.intersection(ins)) < need:
                    continue
                if last_op and len(set(ins) - leaves) > cfg.max_extra_final_inputs:
                    continue
                dims = [nodes[i].dims for i in ins]
                split_dims = [split[i] for i in ins] if split else None
                for grid, imaps, fmaps, fr in tilings(cfg, dims, self.t.dtype.itemsize, final, self._count_pruned,
                                                      split_dims):
                    yield BlockRoot(ins, grid, imaps, fmaps, fr)

    def _count_pruned(self) -> None:
        self.stats.pruned_other += 1

    def _fp_op(self, typ: str, a: Any, b: Any, attrs: dict) -> Any:
        xp = self.arrays
        if typ == "matmul":
            return xp.matmul(a, b)
        if typ == "rms_norm":
            return xp.rms_norm(a)
        if b is None:
            return xp.unary(typ, a, attrs)
        return xp.binary(typ, a, b)
