"""Turn a search hit (plain op tuples) into an IR :class:`KernelGraph`.

The search's states index tensors as the inputs followed by each op's outputs, in order;
replaying the ops through the builder API gives a graph that passed the same validation
as a hand-built one.
"""
from __future__ import annotations

from typing import Sequence

from ..ir.block_graph import new_threadblock_graph
from ..ir.kernel_graph import KernelGraph, new_kernel_graph


def build_graph(target: KernelGraph, ops: Sequence[tuple], leaves: Sequence[int], perm: Sequence[int],
                block_dim: tuple[int, int, int] = (128, 1, 1), reduction_dimx: int = 64) -> KernelGraph:
    """Replay ``ops`` on fresh inputs shaped like ``target``'s; mark outputs in the target's order."""
    g = new_kernel_graph()
    ts = [g.new_input(t.dims, t.dtype, t.op.attrs.get("strides")) for t in target.inputs]
    for typ, ins, attrs in ops:
        a = dict(attrs)
        args = [ts[i] for i in ins]
        if typ == "customized":
            ts.extend(_customized(g, args, a, block_dim, reduction_dimx))
        elif typ == "clamp":
            ts.append(g.clamp(args[0], a["lo"], a["hi"]))
        else:
            ts.append(getattr(g, typ)(*args))
    for i in range(len(target.outputs)):
        g.mark_output(ts[leaves[perm[i]]])
    return g


def _customized(g: KernelGraph, args: list, a: dict, block_dim: tuple, dimx: int) -> list:
    bg = new_threadblock_graph(a["grid"], block_dim, a["frange"], dimx)
    ss = [bg.new_input(t, input_map=m, forloop_dim=f) for t, m, f in zip(args, a["imaps"], a["fmaps"])]
    for typ, ins, attrs in a["bops"]:
        b = dict(attrs)
        xs = [ss[i] for i in ins]
        if typ == "accum":
            ss.append(bg.forloop_accum(xs[0], b["acc"]))
        elif typ == "clamp":
            ss.append(bg.clamp(xs[0], b["lo"], b["hi"]))
        else:
            ss.append(getattr(bg, typ)(*xs))
    for i in a["outputs"]:
        bg.new_output(ss[i], output_map=a["omap"])
    return g.customized(args, bg)
