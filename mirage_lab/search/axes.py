"""Logical axes of a program, to order the search's first customized ops (never to prune).

Two tensor dims are the same *logical axis* when the program ties them: a matmul ties
A's contracted dim to B's, its rows to A's and its columns to B's; an elementwise op ties
each output dim to the operand dims of the same size; a reduction ties every dim but the
reduced one. In GQA, say, K's dim 2 and V's dim 1 are one axis (the 4096 keys).

A customized op whose grid axes each split one logical axis in all the inputs they split,
and whose loop walks one logical axis in all the inputs it walks, is *coherent*: its
blocks see matching slices of every input. The fused μGraphs people write (RMSNorm +
Linear, FlashAttention/FlashDecoding, gated MLP) are coherent; a tiling that pairs rows
of Q with unrelated columns of K is not, and it almost never leads anywhere. The search
explores coherent roots first, so candidates come out sooner; the set of candidates it
finds is the same, since incoherent roots are still explored afterwards.

    >>> import mirage_lab as mi
    >>> g = mi.new_kernel_graph()
    >>> X = g.new_input((16, 64)); W = g.new_input((64, 32))
    >>> g.mark_output(g.matmul(X, W))
    >>> cls = input_axis_classes(g)
    >>> cls[0][1] == cls[1][0]          # X's columns are W's rows
    True
"""
from __future__ import annotations

from typing import Sequence

from ..ir.kernel_graph import KernelGraph


class _UnionFind:
    def __init__(self) -> None:
        self.parent: dict = {}

    def find(self, x):
        self.parent.setdefault(x, x)
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a, b) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


def input_axis_classes(graph: KernelGraph) -> list[tuple[int, ...]]:
    """For each input of ``graph``, the logical-axis id of each of its dims."""
    uf = _UnionFind()
    for op in graph.ops:
        ins = [t for t in op.inputs]
        if op.op_type in ("input", "customized") or not op.outputs:
            continue
        out = op.outputs[0]
        if op.op_type == "matmul":
            a, b = ins
            r = len(out.dims)
            for k in range(r - 2):
                uf.union((a.guid, k), (out.guid, k))
                uf.union((b.guid, k), (out.guid, k))
            uf.union((a.guid, r - 1), (b.guid, r - 2))
            uf.union((a.guid, r - 2), (out.guid, r - 2))
            uf.union((b.guid, r - 1), (out.guid, r - 1))
        elif op.op_type == "reduction":
            for k in range(len(out.dims)):
                if k != op.attrs.get("dim"):
                    uf.union((ins[0].guid, k), (out.guid, k))
        else:  # elementwise (unary, binary with broadcasting, clamp, rms_norm)
            for t in ins:
                if len(t.dims) != len(out.dims):
                    continue
                for k, (d, o) in enumerate(zip(t.dims, out.dims)):
                    if d == o:
                        uf.union((t.guid, k), (out.guid, k))
    ids: dict = {}
    out_cls = []
    for t in graph.inputs:
        out_cls.append(tuple(ids.setdefault(uf.find((t.guid, k)), len(ids)) for k in range(len(t.dims))))
    return out_cls


def is_coherent(classes: Sequence[Sequence[int]], grid: Sequence[int], imaps: Sequence[Sequence[int]],
                fmaps: Sequence[int]) -> bool:
    """Does each grid axis, and the loop, walk one logical axis in every input it touches?"""
    for a in range(3):
        if grid[a] <= 1:
            continue
        if len({cls[m[a]] for cls, m in zip(classes, imaps) if m[a] >= 0}) > 1:
            return False
    return len({cls[f] for cls, f in zip(classes, fmaps) if f >= 0}) <= 1
