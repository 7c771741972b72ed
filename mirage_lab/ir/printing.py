"""Readable text forms of μGraphs (in the spirit of a jaxpr)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .shapes import fmt

if TYPE_CHECKING:  # pragma: no cover
    from .block_graph import BlockGraph
    from .kernel_graph import KernelGraph

AXES = "xyz"


def map_str(m: Any, grid: Any = None) -> str:
    """``(1,-1,-1)`` -> ``{x->1}``; all -1 -> ``{}`` (every block sees everything).

    With ``grid``, an axis of size > 1 that is not mapped shows as ``φ`` (replicated), as
    Mirage's visualizer draws it: ``map_str((-1,-1,-1), (64,1,1))`` -> ``{x->φ}``.
    """
    parts = []
    for a, d in enumerate(m):
        if d >= 0:
            parts.append(f"{AXES[a]}->{d}")
        elif grid is not None and grid[a] > 1:
            parts.append(f"{AXES[a]}->φ")
    return "{" + ",".join(parts) + "}"


def _attrs(op: Any) -> str:
    a = op.attrs
    if op.op_type == "reduction":
        return f", dim={a['dim']}"
    if op.op_type == "clamp":
        return f", lo={a['lo']}, hi={a['hi']}"
    if op.op_type == "mul_scalar":
        return f", {a['scalar']}"
    if op.op_type == "concat":
        return f", dim={a['dim']}"
    if op.op_type == "forloop_accum":
        return f", {a['acc']!r}" if a["acc"] else ""
    return ""


def format_block_graph(bg: "BlockGraph", indent: str = "") -> str:
    lines = [f"{indent}BlockGraph(grid={bg.grid_dim}, block={bg.block_dim}, forloop_range={bg.forloop_range}) {{"]
    for op in bg.ops:
        if op.op_type == "input":
            t = op.outputs[0]
            lines.append(f"{indent}  {t.name}: {t.dtype.name}{fmt(t.dims)} = load(in{bg.input_ops.index(op)}, "
                         f"imap={map_str(op.attrs['input_map'], bg.grid_dim)}, fmap={op.attrs['forloop_dim']})")
        elif op.op_type == "output":
            lines.append(f"{indent}  out{bg.output_ops.index(op)}{fmt(op.attrs['out_dims'])} = save({op.inputs[0].name}, "
                         f"omap={map_str(op.attrs['output_map'])})")
        else:
            t = op.outputs[0]
            phase = " [after loop]" if t.after_accum and op.op_type != "forloop_accum" else ""
            args = ", ".join(x.name for x in op.inputs)
            name = "accum" if op.op_type == "forloop_accum" else op.op_type
            lines.append(f"{indent}  {t.name}: {t.dtype.name}{fmt(t.dims)} = {name}({args}{_attrs(op)}){phase}")
    lines.append(indent + "}")
    return "\n".join(lines)


def format_kernel_graph(g: "KernelGraph") -> str:
    lines = ["KernelGraph {"]
    for op in g.ops:
        outs = ", ".join(f"{t.name}: {t.dtype.name}{fmt(t.dims)}" for t in op.outputs)
        args = ", ".join(t.name for t in op.inputs)
        if op.op_type == "customized":
            lines.append(f"  {outs} = customized({args}) with")
            lines.append(format_block_graph(op.block_graph, indent="    "))
        else:
            lines.append(f"  {outs} = {op.op_type}({args}{_attrs(op)})")
    lines.append("  outputs: " + (", ".join(t.name for t in g.outputs) or "(none marked)"))
    lines.append("}")
    return "\n".join(lines)
