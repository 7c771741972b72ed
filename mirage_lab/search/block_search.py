"""The block level of the generator: the ops of one customized op, from its loaders to its savers.

A customized op starts from a :class:`~.state.BlockRoot` (its inputs and how they are tiled,
enumerated by :mod:`.tilings`). Block ops are added in canonical order, like kernel ops,
with the same checks (shapes, the abstract-expression oracle, dedup) and two more: shared
memory and the loop phase (an op's operands are both before or both after the loop's
accumulation). A block graph whose unused tiles are all computed after the loop is closed
by an output map, which makes it a kernel op; the search then goes on at the kernel level.
"""
from __future__ import annotations

import itertools
from typing import Any, Callable, Iterator

import numpy as np

from ..expr import for_block_op
from ..ir.tiling import tile_dims
from . import tiles
from .config import normalize_map
from .lazy_digest import block_digest
from .shapes import block_fp_limit, fp_elements, numel, op_out_dims, tile_bytes
from .state import UNARY, BlockRoot, Node, order_key


class BlockSearch:
    """The block-level half of :class:`~.generator.Generator` (its base class).

    It uses the generator's ``cfg``, ``t`` (the target), ``stats``, ``arrays``,
    ``max_kernel_elements``, ``_block_expr_memo``, ``_poll``, ``_expr_ok``, ``_with_attrs``, ``_fp_op``,
    ``_push_kernel`` and ``_kernel_state`` (where a closed customized op goes on).
    """

    def _start_block(self, nodes: list[Node], kops: list[tuple], root: BlockRoot) -> None:
        bnodes = []
        for i, m, f in zip(root.inputs, root.imaps, root.fmaps):
            src = nodes[i]
            tile = tile_dims(src.dims, root.grid, m, f, root.frange)
            fp = self.arrays.load_view(src.fp, root.grid, m, f, root.frange)
            # A loader's tiles are a view of its source: name them by how they were cut
            # instead of hashing a strided copy (a computed tile equal to a loader's is then
            # not recognised as a duplicate, which only costs a few extra states).
            key = ("load", src.key(), root.grid, m, f, root.frange)
            bnodes.append(Node(tile, fp, src.expr, after_accum=False, is_input=True, _key=key))
        self.seen_block: set = set()
        self.fp_memo: dict = {}
        self.block_fp_limit = block_fp_limit(root.frange, max(numel(d) for d in self.t.output_dims))
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
                    if phase[i] != phase[j] or op_out_dims(typ, dims[i], dims[j], batch_one=True) is None:
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
            dims = op_out_dims(typ, a.dims, b.dims if b else None, batch_one=True)
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
            if tile_bytes(dims, self.t.dtype.itemsize) > self.cfg.smem_limit or \
                    fp_elements(typ, tuple(a.fp.shape), tuple(b.fp.shape) if b is not None else None) > self.block_fp_limit:
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
            fp = compute()
            # the digest is lazy: full only when another tensor of the root may equal this one
            node = Node(dims, fp, expr, after_accum=after_accum,
                        _key=(dims, after_accum, tuple(fp.shape), block_digest(fp)))
            self.fp_memo[mkey] = (node.fp, node.key())
            return node
        return Node(dims, hit[0], expr, after_accum=after_accum, _key=hit[1])

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
                if numel(out_dims) > self.max_kernel_elements:
                    break
                fp, d = self.arrays.save_full_digest(bn.fp, grid, om, out_dims)
                # the key Node.key() would compute, its digest taken while copying
                key = None if d is None else (tuple(out_dims), False, tuple(fp.shape), d)
                new.append(Node(tuple(out_dims), fp, bn.expr, _key=key))
            if len(new) < len(leaves):
                self.stats.pruned_other += 1
                continue
            op = ("customized", root.inputs, (("bops", tuple(bops)), ("fmaps", root.fmaps), ("frange", root.frange),
                                              ("grid", grid), ("imaps", root.imaps), ("omap", om),
                                              ("outputs", tuple(leaves))))
            if not self._push_kernel(nodes, kops, new, op):
                continue
            saved = self.seen_block, self.fp_memo, self.block_fp_limit   # a later customized op sets its own
            self._kernel_state(nodes, kops)
            self.seen_block, self.fp_memo, self.block_fp_limit = saved
            del nodes[len(nodes) - len(new):]
            kops.pop()

