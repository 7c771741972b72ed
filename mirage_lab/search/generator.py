"""The μGraph generator: a depth-first search over kernel- and block-level ops (MIRAGE_SPEC §2.3).

The search works on compact states, not IR objects. A tensor of a partial μGraph is a
:class:`Node`: its shape, its fingerprint array (computed once, when the op is pushed) and
its abstract expression. Ops are plain tuples. IR graphs are built only for candidates
(:mod:`.build`).

Each step adds one op whose ``(input indices, op type)`` key is strictly greater than the
last op's (Mirage's canonical order), after three checks: shapes, the abstract-expression
oracle (the new tensor must be a subexpression of a target output), and deduplication
(a tensor equal to one the state already has, or a state already visited in this
subtree, is dropped). Every kernel-level state whose unused tensors number as many as the
target's outputs is compared with the target by fingerprints; a match is a candidate, and
its subtree is not expanded further.

The search is split into independent subtrees (:class:`Task`): one per first choice at the
root. A task is deterministic, so the union of results does not depend on how tasks are
spread over workers.
"""
from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from ..expr import for_block_op, for_kernel_op
from ..ir.kernel_graph import KernelGraph
from . import tiles
from .arrays import digest_any, get_arrays
from .axes import input_axis_classes, is_coherent
from .config import SearchConfig, normalize_map
from .prefilter import may_be_subexpression
from .events import SearchStats

UNARY = ("exp", "square", "sqrt", "silu", "gelu", "relu", "clamp")
BINARY = ("add", "mul", "div", "pow")
TYPE_RANK = {t: i for i, t in enumerate(("matmul", "exp", "square", "sqrt", "silu", "gelu", "relu", "clamp", "add",
                                          "mul", "div", "pow", "rms_norm", "accum", "customized"))}


# --------------------------------------------------------------------------- state
@dataclass
class Node:
    """A tensor of a partial μGraph: kernel-level (``dims`` = full shape) or a block tile."""

    dims: tuple[int, ...]
    fp: np.ndarray
    expr: Any
    after_accum: bool = False
    is_input: bool = False
    _key: tuple | None = None

    def key(self) -> tuple:
        """Shape, phase and a digest of the fingerprint: equal keys mean the same tensor."""
        if self._key is None:
            self._key = (self.dims, self.after_accum, tuple(self.fp.shape), digest_any(self.fp))
        return self._key


def order_key(inputs: Sequence[int], op_type: str) -> tuple:
    """Mirage's Order(input indices, op type): lexicographic on indices, then the type."""
    return (tuple(inputs), TYPE_RANK[op_type])


@dataclass
class BlockRoot:
    """The first choice of a customized op: its inputs and how they are tiled."""

    inputs: tuple[int, ...]
    grid: tuple[int, int, int]
    imaps: tuple[tuple[int, int, int], ...]
    fmaps: tuple[int, ...]
    frange: int


@dataclass
class Task:
    """An independent subtree: the root's first op (a kernel op tuple, or a :class:`BlockRoot`)."""

    index: int
    kind: str                      # "kernel" | "block"
    op: Any
    child: Any = None              # kernel tasks: the second choice (None: the first op's state alone)

    @property
    def task_id(self) -> str:
        return f"{self.index}:{self.kind}:{self.op!r}:{self.child!r}"


@dataclass
class Hit:
    """A candidate as plain data: the kernel ops after the inputs (see :mod:`.build`)."""

    ops: list[tuple]
    output_perm: tuple[int, ...]
    leaves: tuple[int, ...]


# --------------------------------------------------------------------------- the target
class Target:
    """What the search must reproduce: input shapes, output fingerprints and expressions."""

    def __init__(self, graph: KernelGraph, cfg: SearchConfig, oracle: Any | None = None):
        from ..expr import SubexprOracle, abstract_graph
        from ..verify.fingerprint import fingerprint_graph, random_inputs

        self.graph = graph
        self.cfg = cfg
        self.input_dims = [t.dims for t in graph.inputs]
        self.dtype = graph.inputs[0].dtype
        self.inputs_fp = random_inputs(graph, tests=cfg.search_tests, seed=cfg.seed)
        self.outputs_fp = fingerprint_graph(graph, self.inputs_fp)
        self.output_dims = [t.dims for t in graph.outputs]
        exprs = abstract_graph(graph)
        self.input_exprs = [exprs[t.guid] for t in graph.inputs]
        self.output_exprs = [exprs[t.guid] for t in graph.outputs]
        self.oracle = oracle or SubexprOracle(self.output_exprs)
        from ..expr.terms import variables

        self.needed_inputs = sorted(set().union(*(variables(e) for e in self.output_exprs)))
        self.clamp_bounds = sorted({(op.attrs["lo"], op.attrs["hi"]) for op in graph.ops if op.op_type == "clamp"})


# --------------------------------------------------------------------------- the search
class Cancelled(Exception):
    pass


class Generator:
    """Runs tasks of one search. ``on_hit`` is called with each candidate as it is found."""

    def __init__(self, target: Target, cfg: SearchConfig, *, should_stop: Callable[[], bool] | None = None,
                 on_hit: Callable[[Hit], None] | None = None, on_progress: Callable[[SearchStats], None] | None = None,
                 fingerprint_backend: str | None = None):
        self.t = target
        self.cfg = cfg
        self.should_stop = should_stop or (lambda: False)
        self.on_hit = on_hit or (lambda h: None)
        self.on_progress = on_progress or (lambda s: None)
        self.stats = SearchStats()
        self._last_poll = time.monotonic()
        self._expr_memo: dict[Any, bool] = {}
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
        # The outputs as Node keys name them (dims, phase, fingerprint shape, digest).
        self._out_keys = [(d, False, tuple(fp.shape), digest_any(self.arrays.put(fp)))
                          for d, fp in zip(target.output_dims, target.outputs_fp)]

    # ----------------------------------------------------------------- tasks
    def root_nodes(self) -> list[Node]:
        return [Node(d, fp, e, is_input=True) for d, fp, e in zip(self.t.input_dims, self._inputs, self.t.input_exprs)]

    def tasks(self) -> list[Task]:
        """Independent subtrees, in a fixed order that does not depend on the workers.

        Customized-op roots come first (they hold the fused candidates); then each first
        kernel op, split by its second choice so that the deep kernel-level subtrees spread
        over workers too (``child=None``: the state after the first op itself).
        """
        nodes = self.root_nodes()
        out: list[Task] = []
        later: list[Task] = []
        if self.cfg.max_customized_ops > 0 and len(nodes) < self.cfg.max_kernel_ops:
            # Coherent tilings first (see :mod:`.axes`); the others after the kernel-op subtrees.
            classes = input_axis_classes(self.t.graph)
            for root in self._block_roots(nodes, None):
                coherent = is_coherent([classes[i] for i in root.inputs], root.grid, root.imaps, root.fmaps)
                (out if coherent else later).append(Task(0, "block", root))
        for op in self._kernel_op_choices(nodes, None):
            node = self._kernel_node(nodes, op)
            if node is None:
                continue
            out.append(Task(0, "kernel", op, None))
            after = nodes + [node]
            for child in self._kernel_op_choices(after, [op]):
                out.append(Task(0, "kernel", op, child))
            if self.cfg.max_customized_ops > 0 and len(after) < self.cfg.max_kernel_ops:
                for root in self._block_roots(after, [op]):
                    out.append(Task(0, "kernel", op, root))
        out += later
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
        customs_left = sum(1 for op in ops if op[0] == "customized") < self.cfg.max_customized_ops
        merge = max(1, self.cfg.max_block_inputs - 1) if customs_left else 1
        if n_leaves - left * merge > n_out or n_out - n_leaves > left:
            self.stats.pruned_other += 1
            return
        for op in self._kernel_op_choices(nodes, ops):
            self._try_kernel_op(nodes, ops, op)
        n_custom = sum(1 for op in ops if op[0] == "customized")
        if n_custom < self.cfg.max_customized_ops:
            for root in self._block_roots(nodes, ops):
                self._start_block(nodes, ops, root)

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
        customs = sum(1 for op in ops if op[0] == "customized")
        merge = max(1, self.cfg.max_block_inputs - 1) if customs < self.cfg.max_customized_ops else 1
        need = len(leaves) + 1 - len(self.t.output_dims) - (left - 1) * merge
        if left == 1:
            need = max(need, len(leaves) - len(self.t.output_dims) + 1, len(leaves - set(self._leaves(nodes, ops))))
        return leaves, max(0, need)

    def _kernel_op_choices(self, nodes: list[Node], ops: list[tuple] | None) -> Iterator[tuple]:
        last = self._last_key(ops)
        n = len(nodes)
        leaves, need = self._min_leaf_use(nodes, ops)
        for typ in self.cfg.kernel_ops:
            if typ in UNARY:
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

    def _kernel_node(self, nodes: list[Node], op: tuple) -> Node | None:
        """The tensor a kernel op would add, or None if shapes or the oracle refuse it."""
        typ, ins, attrs = op
        a = nodes[ins[0]]
        b = nodes[ins[1]] if len(ins) > 1 else None
        dims = _out_dims(typ, a.dims, b.dims if b else None, batch_one=False)
        if dims is None:
            self.stats.pruned_other += 1
            return None
        if _numel(dims) > self.max_kernel_elements:
            self.stats.pruned_other += 1
            return None
        expr = for_kernel_op(typ, dict(attrs), [a.expr] + ([b.expr] if b else []), [a.dims] + ([b.dims] if b else []))
        if not self._expr_ok(expr):
            return None
        return Node(dims, self._fp_op(typ, a.fp, b.fp if b else None, dict(attrs)), expr)

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
                for grid in cfg.grid_candidates(dims):
                    for imaps in self._imap_combos(dims, grid):
                        for fmaps in self._fmap_combos(dims, grid, imaps):
                            for fr in self._franges(dims, grid, imaps, fmaps):
                                if self._loader_smem(dims, grid, imaps, fmaps, fr) > cfg.smem_limit:
                                    self.stats.pruned_other += 1
                                    continue
                                if last_op and not self._final_tiles_reachable(dims, grid, imaps, fmaps, fr):
                                    self.stats.pruned_other += 1
                                    continue
                                yield BlockRoot(ins, grid, imaps, fmaps, fr)

    def _final_tiles_reachable(self, dims: list, grid: tuple, imaps: tuple, fmaps: tuple, fr: int) -> bool:
        """For the last kernel op: can some output map give a target output's shape?

        Block ops never make a tile dim larger than the largest loader tile dim at that
        position (matmul takes rows from A and columns from B, broadcasting takes the max),
        except reductions (1) and the fold to ``reduction_dimx`` (last dim). So the tile each
        block must write, the target's output dims divided along the mapped grid axes, has
        to fit under those bounds.
        """
        tiles = [_tile(d, grid, m, f, fr) for d, m, f in zip(dims, imaps, fmaps)]
        for out in self.t.output_dims:
            rank = len(out)
            bound = [max((t[k] for t in tiles if len(t) == rank), default=0) for k in range(rank)]
            for om in self.cfg.omap_candidates():
                om = normalize_map(om, grid)
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
                if ok and all(tile[k] <= bound[k] or tile[k] == 1 or (k == rank - 1 and tile[k] == self.cfg.reduction_dimx)
                              for k in range(rank)):
                    return True
        return False

    def _imap_combos(self, dims: list[tuple[int, ...]], grid: tuple[int, int, int]) -> Iterator[tuple]:
        per_input = []
        for d in dims:
            opts = []
            for m in self.cfg.imap_candidates():
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
            per_input.append(opts)
        for combo in itertools.product(*per_input):
            # Every grid axis > 1 must split at least one input, or its blocks all do the same work.
            if all(grid[a] == 1 or any(m[a] >= 0 for m in combo) for a in range(3)):
                yield combo

    def _fmap_combos(self, dims: list[tuple[int, ...]], grid: tuple, imaps: tuple) -> Iterator[tuple[int, ...]]:
        per_input = []
        for d in dims:
            opts = [f for f in self.cfg.fmap_candidates() if f == -1 or (f < len(d) and d[f] > 1)]
            per_input.append(opts)
        yield from itertools.product(*per_input)

    def _franges(self, dims: list, grid: tuple, imaps: tuple, fmaps: tuple) -> list[int]:
        if all(f == -1 for f in fmaps):
            return [1]
        out = []
        for x in self.cfg.frange_candidates():
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

    def _loader_smem(self, dims: list, grid: tuple, imaps: tuple, fmaps: tuple, fr: int) -> int:
        total = 0
        for d, m, f in zip(dims, imaps, fmaps):
            total += int(np.prod(_tile(d, grid, m, f, fr))) * self.t.dtype.itemsize
        return total

    # ----------------------------------------------------------------- block level
    def _start_block(self, nodes: list[Node], kops: list[tuple], root: BlockRoot) -> None:
        bnodes = []
        for i, m, f in zip(root.inputs, root.imaps, root.fmaps):
            src = nodes[i]
            tile = _tile(src.dims, root.grid, m, f, root.frange)
            fp = self.arrays.load_view(src.fp, root.grid, m, f, root.frange)
            # A loader's tiles are a view of its source: name them by how they were cut
            # instead of hashing a strided copy (a computed tile equal to a loader's is then
            # not recognised as a duplicate, which only costs a few extra states).
            key = ("load", src.key(), root.grid, m, f, root.frange)
            bnodes.append(Node(tile, fp, src.expr, after_accum=False, is_input=True, _key=key))
        self.seen_block: set = set()
        self.fp_memo: dict = {}
        self._block_state(nodes, kops, root, bnodes, [])

    def _block_state(self, nodes: list[Node], kops: list[tuple], root: BlockRoot, bnodes: list[Node],
                     bops: list[tuple]) -> None:
        self.stats.states += 1
        self._poll()
        cfg = self.cfg
        # B1: close the block graph when every unused tile is computed after the loop.
        used = set()
        for op in bops:
            used.update(op[1])
        leaves = [i for i in range(len(bnodes)) if i not in used]
        if bops and all(not bnodes[i].is_input and bnodes[i].after_accum for i in leaves) \
                and len(leaves) <= cfg.max_block_outputs:
            self._close_block(nodes, kops, root, bnodes, bops, leaves)
        # B2: add one more block op, if the ops left can still close the graph: each op turns
        # at most one in-loop leaf into none (a binary op merges two, an accumulator moves one
        # after the loop), and each binary op merges at most two after-loop leaves into one.
        left = cfg.max_block_ops - len(root.inputs) - len(bops)
        pre = sum(1 for i in leaves if not bnodes[i].after_accum)
        post = len(leaves) - pre
        need = pre + max(0, post + (1 if pre else 0) - cfg.max_block_outputs)
        if need > left:
            self.stats.pruned_other += 1
            return
        if left > 0:
            last = order_key(bops[-1][1], bops[-1][0]) if bops else None
            for op in self._block_op_choices(bnodes, last):
                self._try_block_op(nodes, kops, root, bnodes, bops, op)

    def _block_op_choices(self, bnodes: list[Node], last: tuple | None) -> Iterator[tuple]:
        """Block ops in canonical order whose operands fit (shapes, loop phase) — checked here,
        in bulk, because most (op, operands) pairs of a state do not."""
        cfg = self.cfg
        n = len(bnodes)
        dims = [b.dims for b in bnodes]
        phase = [b.after_accum for b in bnodes]
        skipped = 0
        for typ in cfg.block_ops:
            unary = typ in UNARY or typ == "rms_norm"
            cands: Iterator[tuple[int, ...]] = ((i,) for i in range(n)) if unary else itertools.product(range(n), repeat=2)
            for ins in cands:
                if last is not None and order_key(ins, typ) <= last:
                    continue
                if not unary:
                    i, j = ins
                    if phase[i] != phase[j] or _out_dims(typ, dims[i], dims[j], batch_one=True) is None:
                        skipped += 1
                        continue
                yield from self._with_attrs(typ, ins)
        for acc in cfg.block_accums:
            for i in range(n):
                if phase[i] or (last is not None and order_key((i,), "accum") <= last):
                    continue
                yield ("accum", (i,), (("acc", acc),))
        self.stats.pruned_other += skipped

    def _try_block_op(self, nodes: list[Node], kops: list[tuple], root: BlockRoot, bnodes: list[Node],
                      bops: list[tuple], op: tuple) -> None:
        typ, ins, attrs = op
        a = bnodes[ins[0]]
        b = bnodes[ins[1]] if len(ins) > 1 else None
        ad = dict(attrs)
        if b is not None and a.after_accum != b.after_accum:
            self.stats.pruned_other += 1
            return
        if typ == "accum":
            acc = ad["acc"]
            if a.after_accum:
                return
            w = a.dims[-1]
            if acc == "sum_todimx":
                if w % self.cfg.reduction_dimx or w == self.cfg.reduction_dimx:
                    self.stats.pruned_other += 1
                    return
                dims = a.dims[:-1] + (self.cfg.reduction_dimx,)
            elif acc is None:
                dims = a.dims
            else:
                dims = a.dims[:-1] + (1,)
            expr = for_block_op("forloop_accum", {"acc": acc}, [a.expr], [a.dims], root.frange, self.cfg.reduction_dimx)
            if not self._expr_ok(expr):
                return
            node = self._memo_node((typ, attrs, a.key(), None), dims, expr, True,
                                   lambda: self.arrays.accum(acc, a.fp, tiles.LEAD - 1, root.frange, w,
                                                             self.cfg.reduction_dimx))
        else:
            dims = _out_dims(typ, a.dims, b.dims if b else None, batch_one=True)
            if dims is None:
                self.stats.pruned_other += 1
                return
            ekey = (typ, attrs, a.expr, b.expr if b else None, a.dims, b.dims if b else None, root.frange)
            expr = self._block_expr_memo.get(ekey)
            if expr is None:
                expr = for_block_op(typ, ad, [a.expr] + ([b.expr] if b else []), [a.dims] + ([b.dims] if b else []),
                                    root.frange, self.cfg.reduction_dimx)
                self._block_expr_memo[ekey] = expr
            if not self._expr_ok(expr):
                return
            # Shared memory first: it is cheap to check and refuses the tiles that would also
            # make the fingerprint arrays (all blocks x iterations) too large to hold.
            if _tile_bytes(dims, self.t.dtype.itemsize) > self.cfg.smem_limit or \
                    _fp_elements(typ, tuple(a.fp.shape), tuple(b.fp.shape) if b is not None else None) > MAX_FP_ELEMENTS:
                self.stats.pruned_other += 1
                return
            node = self._memo_node((typ, attrs, a.key(), b.key() if b else None), dims, expr, a.after_accum,
                                   lambda: self._fp_op(typ, a.fp, b.fp if b else None, ad))
        if self._smem(bnodes, bops, node, typ, ad) > self.cfg.smem_limit:
            self.stats.pruned_other += 1
            return
        if self.cfg.dedup:
            keys = {n.key() for n in bnodes}
            k = node.key()
            if k in keys:
                self.stats.pruned_dedup += 1
                return
            skey = (root.inputs, frozenset(keys | {k}))
            if skey in self.seen_block:
                self.stats.pruned_dedup += 1
                return
            self.seen_block.add(skey)
        bnodes.append(node)
        bops.append(op)
        self._block_state(nodes, kops, root, bnodes, bops)
        bnodes.pop()
        bops.pop()

    def _memo_node(self, mkey: tuple, dims: tuple, expr: Any, after_accum: bool, compute: Callable[[], Any]) -> Node:
        """A block tensor; its fingerprint and key computed once per (op, operand tensors) in a
        root, since the same op on the same tiles recurs across its branches."""
        hit = self.fp_memo.get(mkey)
        if hit is None:
            node = Node(dims, compute(), expr, after_accum=after_accum)
            self.fp_memo[mkey] = (node.fp, node.key())
            return node
        return Node(dims, hit[0], expr, after_accum=after_accum, _key=hit[1])

    def _fp_op(self, typ: str, a: Any, b: Any, attrs: dict) -> Any:
        xp = self.arrays
        if typ == "matmul":
            return xp.matmul(a, b)
        if typ == "rms_norm":
            return xp.rms_norm(a)
        if b is None:
            return xp.unary(typ, a, attrs)
        return xp.binary(typ, a, b)

    def _smem(self, bnodes: list[Node], bops: list[tuple], new: Node, typ: str, attrs: dict) -> int:
        # Mirage's heuristic: loaders and non-in-place op outputs; unary ops and plain accumulators are free.
        item = self.t.dtype.itemsize
        total = sum(int(np.prod(n.dims)) for n in bnodes if n.is_input) * item
        for n, op in zip(bnodes[len(bnodes) - len(bops):], bops):
            if op[0] in UNARY or (op[0] == "accum" and dict(op[2])["acc"] is None):
                continue
            total += int(np.prod(n.dims)) * item
        if not (typ in UNARY or (typ == "accum" and attrs.get("acc") is None)):
            total += int(np.prod(new.dims)) * item
        return total

    def _close_block(self, nodes: list[Node], kops: list[tuple], root: BlockRoot, bnodes: list[Node],
                     bops: list[tuple], leaves: list[int]) -> None:
        grid = root.grid
        seen: set = set()
        for om in self.cfg.omap_candidates():
            om = normalize_map(om, grid)
            if om in seen:
                continue
            seen.add(om)
            if any(grid[a] > 1 and om[a] < 0 for a in range(3)):
                continue
            used = [k for k in om if k >= 0]
            if len(used) != len(set(used)):
                continue
            if any(om[a] >= len(bnodes[i].dims) for i in leaves for a in range(3)):
                continue
            new = []
            for i in leaves:
                bn = bnodes[i]
                out_dims = list(bn.dims)
                for a in range(3):
                    if om[a] >= 0:
                        out_dims[om[a]] *= grid[a]
                if _numel(out_dims) > self.max_kernel_elements:
                    break
                fp = self.arrays.save_full(bn.fp, grid, om, out_dims)
                new.append(Node(tuple(out_dims), fp, bn.expr))
            if len(new) < len(leaves):
                self.stats.pruned_other += 1
                continue
            op = ("customized", root.inputs, (("bops", tuple(bops)), ("fmaps", root.fmaps), ("frange", root.frange),
                                              ("grid", grid), ("imaps", root.imaps), ("omap", om),
                                              ("outputs", tuple(leaves))))
            if not self._push_kernel(nodes, kops, new, op):
                continue
            saved = self.seen_block, self.fp_memo
            self._kernel_state(nodes, kops)
            self.seen_block, self.fp_memo = saved
            del nodes[len(nodes) - len(new):]
            kops.pop()


# --------------------------------------------------------------------------- shapes and fingerprints
#: The search holds each block tensor for every block and iteration at once; one that would
#: exceed this many elements (128 MiB of uint16) is not explored (counted in pruned_other).
#: With a 96 KB tile this still allows 2**26 / 48K = 1365 (block, iteration) pairs of it.
MAX_FP_ELEMENTS = 1 << 26


def _numel(dims: Sequence[int]) -> int:
    n = 1
    for d in dims:
        n *= d
    return n


def _tile_bytes(dims: Sequence[int], itemsize: int) -> int:
    return itemsize * _numel(dims)


def _fp_elements(typ: str, a: tuple, b: tuple | None) -> int:
    if b is None:
        return _numel(a)
    if typ == "matmul":
        return _numel(np.broadcast_shapes(a[:-2], b[:-2])) * a[-2] * b[-1]
    return _numel(np.broadcast_shapes(a, b))


def _tile(dims: Sequence[int], grid: Sequence[int], imap: Sequence[int], fmap: int, frange: int) -> tuple[int, ...]:
    t = list(dims)
    for a in range(3):
        if grid[a] > 1 and imap[a] >= 0:
            t[imap[a]] //= grid[a]
    if fmap >= 0:
        t[fmap] //= frange
    return tuple(t)


def _out_dims(typ: str, a: tuple, b: tuple | None, batch_one: bool) -> tuple[int, ...] | None:
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
