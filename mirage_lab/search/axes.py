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


def _axis_union(graph: KernelGraph) -> _UnionFind:
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
    return uf


def _class_ids(graph: KernelGraph, uf: _UnionFind) -> dict:
    ids: dict = {}
    for t in graph.inputs:
        for k in range(len(t.dims)):
            ids.setdefault(uf.find((t.guid, k)), len(ids))
    return ids


def tensor_axis_classes(graph: KernelGraph) -> dict[int, tuple[int, ...]]:
    """For each tensor of ``graph`` (by guid), the logical-axis id of each of its dims
    (the ids of :func:`input_axis_classes`; an axis no input has gets a negative id)."""
    uf = _axis_union(graph)
    ids = _class_ids(graph, uf)
    out = {}
    for op in graph.ops:
        for t in list(op.inputs) + list(op.outputs):
            out[t.guid] = tuple(ids.get(uf.find((t.guid, k)), -1 - k) for k in range(len(t.dims)))
    return out


def input_axis_classes(graph: KernelGraph) -> list[tuple[int, ...]]:
    """For each input of ``graph``, the logical-axis id of each of its dims."""
    uf = _axis_union(graph)
    ids = _class_ids(graph, uf)
    return [tuple(ids[uf.find((t.guid, k))] for k in range(len(t.dims))) for t in graph.inputs]


# Ops after which partial sums no longer combine by addition (division does: (Σa)/b).
_NONLINEAR = frozenset({"exp", "silu", "gelu", "relu", "sqrt", "square", "clamp", "pow", "rms_norm"})


def _classes_and_users(graph: KernelGraph) -> tuple[_UnionFind, dict, dict[int, list]]:
    """The axis union, its class ids, and each tensor's consumer ops (by guid)."""
    uf = _axis_union(graph)
    users: dict[int, list] = {}
    for op in graph.ops:
        for t in op.inputs:
            users.setdefault(t.guid, []).append(op)
    return uf, _class_ids(graph, uf), users


def combinable_axes(graph: KernelGraph) -> frozenset[int]:
    """Logical axes (ids as :func:`input_axis_classes`) that the program sums over and whose
    sums meet no non-linear op on the way to the outputs.

    A grid that splits such an axis leaves each block a partial sum that a second kernel
    can add up: FlashDecoding's KV split (``exp`` acts before the sum over the keys, the
    division after it). An axis summed before a non-linearity (attention's head dim, under
    ``exp(QK)``; RMSNorm's hidden dim, under its square root) does not combine that way.
    """
    uf, ids, users = _classes_and_users(graph)

    def reaches_nonlinear(guid: int) -> bool:
        todo, seen = [guid], set()
        while todo:
            g = todo.pop()
            for op in users.get(g, ()):
                if op.op_type in _NONLINEAR:
                    return True
                for o in op.outputs:
                    if o.guid not in seen:
                        seen.add(o.guid)
                        todo.append(o.guid)
        return False

    summed: dict[int, bool] = {}   # axis id -> combinable so far
    for op in graph.ops:
        if op.op_type == "matmul":
            a = op.inputs[0]
            axis = (a.guid, len(a.dims) - 1)
        elif op.op_type in ("reduction", "rms_norm"):
            x = op.inputs[0]
            axis = (x.guid, int(op.attrs.get("dim", len(x.dims) - 1)) if op.op_type == "reduction" else len(x.dims) - 1)
        else:
            continue
        c = ids.get(uf.find(axis))
        if c is None:
            continue
        ok = op.op_type != "rms_norm" and not reaches_nonlinear(op.outputs[0].guid)
        summed[c] = summed.get(c, True) and ok
    return frozenset(c for c, ok in summed.items() if ok)


def _summed_axis(op) -> tuple[int, int] | None:
    """The (tensor guid, dim) an op sums over: a matmul's contracted dim, a reduced one, a norm's last."""
    if op.op_type == "matmul":
        a = op.inputs[0]
        return a.guid, len(a.dims) - 1
    if op.op_type == "reduction":
        return op.inputs[0].guid, int(op.attrs.get("dim", len(op.inputs[0].dims) - 1))
    if op.op_type == "rms_norm":
        return op.inputs[0].guid, len(op.inputs[0].dims) - 1
    return None


def split_axes(graph: KernelGraph) -> frozenset[int]:
    """Summed logical axes (ids as :func:`input_axis_classes`) that a grid may split into partial
    sums for a second customized op to add up and finish: split-K.

    An axis qualifies when no sum over it is followed, past a non-linear op, by a sum over
    another axis. Then every non-linear op after its sums (RMSNorm's square root, a gated
    MLP's silu) can wait for the combine kernel, and the sums over the same axis that come
    after one (the matmul after a norm's statistic) split the same way. Attention's head dim
    fails (``exp(QK)`` feeds the sum over the keys); a norm's hidden dim before a linear passes.

        >>> import mirage_lab as mi
        >>> g = mi.new_kernel_graph()
        >>> X = g.new_input((16, 64)); W = g.new_input((64, 32))
        >>> g.mark_output(g.matmul(g.rms_norm(X, normalized_shape=(64,)), W))
        >>> split_axes(g) == {input_axis_classes(g)[0][1]}
        True
    """
    uf, ids, users = _classes_and_users(graph)
    out: dict[int, bool] = {}
    for op in graph.ops:
        ax = _summed_axis(op)
        c = None if ax is None else ids.get(uf.find(ax))
        if c is None:
            continue
        ok = True
        # walk forward; ``bent``: a non-linear op lies between the sum and this tensor
        todo = [(o.guid, op.op_type in _NONLINEAR) for o in op.outputs]
        seen: set = set()
        while todo and ok:
            g, bent = todo.pop()
            for user in users.get(g, ()):
                uax = _summed_axis(user)
                if bent and uax is not None and ids.get(uf.find(uax)) != c:
                    ok = False
                    break
                b = bent or user.op_type in _NONLINEAR
                for o in user.outputs:
                    if (o.guid, b) not in seen:
                        seen.add((o.guid, b))
                        todo.append((o.guid, b))
        out[c] = out.get(c, True) and ok
    return frozenset(c for c, ok in out.items() if ok)


def is_coherent(classes: Sequence[Sequence[int]], grid: Sequence[int], imaps: Sequence[Sequence[int]],
                fmaps: Sequence[int], summed: frozenset[int] | None = None) -> bool:
    """Does each grid axis, and the loop, walk one logical axis in every input it touches?

    With ``summed`` (:func:`summed_axes`), a loop may also walk several axes the program sums
    over, each in at least two inputs: the operands of two products, each summed over its own
    axis and added in one accumulator (LoRA's ``X·W + (X·A)·B``: ``X`` and ``W`` walk the hidden
    axis while ``X·A`` and ``B`` walk the rank in the same iterations).
    """
    for a in range(3):
        if grid[a] <= 1:
            continue
        if len({cls[m[a]] for cls, m in zip(classes, imaps) if m[a] >= 0}) > 1:
            return False
    walked = [cls[f] for cls, f in zip(classes, fmaps) if f >= 0]
    if len(set(walked)) <= 1:
        return True
    # every input that has a walked axis walks it (else its tiles cannot meet the others')
    return summed is not None and all(c in summed and walked.count(c) >= 2 for c in walked) and \
        all(f >= 0 and cls[f] == c for cls, f in zip(classes, fmaps) for c in set(walked) if c in cls)


def is_consistent(classes: Sequence[Sequence[int]], grid: Sequence[int], imaps: Sequence[Sequence[int]],
                  fmaps: Sequence[int]) -> bool:
    """Is each logical axis split by the same grid axes, and walked by the loop or not, in every
    input that has it? (Then the blocks' tiles of different inputs line up along it.)"""
    split: dict[int, frozenset] = {}
    looped: dict[int, bool] = {}
    for cls, m, f in zip(classes, imaps, fmaps):
        for c in set(cls):
            s = frozenset(a for a in range(3) if grid[a] > 1 and m[a] >= 0 and cls[m[a]] == c)
            lp = f >= 0 and cls[f] == c
            if split.setdefault(c, s) != s or looped.setdefault(c, lp) != lp:
                return False
    return True


def program_input_sets(graph: KernelGraph) -> frozenset[frozenset[int]]:
    """For each tensor an op of the program computes, the set of input indices it depends on."""
    index = {t.guid: i for i, t in enumerate(graph.inputs)}
    deps: dict[int, frozenset[int]] = {t.guid: frozenset({i}) for t, i in zip(graph.inputs, range(len(index)))}
    computed = set()
    for op in graph.ops:
        if op.op_type == "input":
            continue
        d = frozenset().union(*(deps.get(t.guid, frozenset()) for t in op.inputs))
        for t in op.outputs:
            deps.setdefault(t.guid, d)
            computed.add(d)
    return frozenset(computed)


def summed_axes(graph: KernelGraph) -> frozenset[int]:
    """Logical axes of the inputs that no output has: the program sums them away (a matmul's
    contracted dim, a reduced one). A grid that splits one leaves each block a partial sum,
    which only a later customized op can add up (the search has no kernel-level reduction)."""
    uf = _axis_union(graph)
    ids = _class_ids(graph, uf)
    kept = {ids.get(uf.find((t.guid, k))) for t in graph.outputs for k in range(len(t.dims)) if t.dims[k] > 1}
    return frozenset(c for c in ids.values() if c not in kept)


def root_tier(classes: Sequence[Sequence[int]], grid: Sequence[int], imaps: Sequence[Sequence[int]],
              fmaps: Sequence[int], combinable: frozenset[int] = frozenset(),
              unsplittable: frozenset[int] = frozenset(), summed: frozenset[int] | None = None) -> int:
    """Where a customized op's tiling goes in the search's order (never whether it is searched).

    With ``combinable`` (:func:`combinable_axes`; pass it only when a second customized op
    may add up the splits), coherent and consistent tilings whose grid splits such an axis
    come first: 0 when the loop walks the split axis too (FlashDecoding: the KV length split
    across the grid, each block looping over its KV chunks), 1 otherwise. 2: the other
    coherent and consistent tilings (each block's tiles of different inputs line up: LoRA's
    W and B split along the same output columns). 3: the other coherent ones, and those whose
    grid splits an ``unsplittable`` axis (:func:`summed_axes`, passed when no later customized op
    could add up the blocks' partial sums) or whose loop walks an axis not in ``summed`` (an
    accumulator adds up the iterations: the loop must walk an axis the program sums over).
    4: the rest.
    """
    if not is_coherent(classes, grid, imaps, fmaps, summed):
        return INCOHERENT
    split_all = {cls[m[a]] for cls, m in zip(classes, imaps) for a in range(3) if grid[a] > 1 and m[a] >= 0}
    looped_not_summed = summed is not None and any(f >= 0 and cls[f] not in summed for cls, f in zip(classes, fmaps))
    if split_all & unsplittable or looped_not_summed or not is_consistent(classes, grid, imaps, fmaps):
        return 3
    if not combinable:
        return 2
    split = split_all & combinable
    if not split:
        return 2
    return 0 if any(f >= 0 and cls[f] in split for cls, f in zip(classes, fmaps)) else 1


INCOHERENT = 4


def op_axis_classes(typ: str, operands: Sequence[tuple[Sequence[int], Sequence[int]]],
                    out_dims: Sequence[int]) -> tuple[int, ...]:
    """The logical axes of a kernel op's output, from its operands' ``(dims, classes)``.

    A matmul's rows are A's, its columns B's, its batch dims both; an element-wise op's dim
    is that of the first operand with the same size there (a broadcast dim of 1 takes the
    other's). With these, a customized op after a kernel op is tiered like a first one.
    """
    if typ == "matmul":
        (ad, ac), (_, bc) = operands
        return tuple(ac[:-1]) + (bc[-1],)
    out = []
    for k, d in enumerate(out_dims):
        cls = next((c[k] for dims, c in operands if len(dims) == len(out_dims) and dims[k] == d), None)
        out.append(operands[0][1][k] if cls is None else cls)
    return tuple(out)
