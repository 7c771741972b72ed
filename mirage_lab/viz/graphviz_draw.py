"""Graphviz drawings of μGraphs at the kernel, block and thread levels.

Uses the ``graphviz`` Python package (a thin, well-kept wrapper that builds DOT text and
calls the ``dot`` binary) rather than hand-written DOT plumbing.

Levels:

* ``"kernel"``: kernel ops only; a customized op is one node labelled with its grid and loop.
* ``"block"``: each customized op opens into its block graph (loaders with imap/fmap,
  ops, accumulators, savers with omap), drawn as a cluster.
* ``"thread"``: each block graph drawn as its thread-level fusion chains (one node per chain).
* ``"all"``: the block graphs with their fusion chains drawn as nested clusters.

    >>> dot = mi.draw(g, level="all")     # doctest: +SKIP
    >>> svg = render_svg(dot)             # doctest: +SKIP
"""
from __future__ import annotations

from typing import Any

import graphviz

from ..errors import GraphvizMissingError, MirageLabError
from ..ir.kernel_graph import KernelGraph
from ..ir.shapes import fmt

from . import LEVELS  # noqa: E402  (one definition, importable without graphviz)

KERNEL_FILL = "#c8e6c9"   # Mirage draws kernel nodes green
IO_FILL = "#eeeeee"
BLOCK_FILL = "#e3f2fd"    # and customized ops as blue clusters
LOADER_FILL = "#bbdefb"
ACCUM_FILL = "#fff9c4"
CHAIN_FILL = "#fce4ec"


_AXES = "xyz"


def map_label(m: Any) -> str:
    """A grid map as the inspector writes it (extension/src/format.ts ``fmtMap``): grid axis → data dim,
    replicated axes left out, so ``{}`` means every block sees the whole tensor.

        >>> map_label((1, -1, -1)), map_label((0, -1, 1)), map_label((-1, -1, -1))
        ('{x→1}', '{x→0, z→1}', '{}')
    """
    return "{" + ", ".join(f"{_AXES[a]}→{d}" for a, d in enumerate(m) if d >= 0) + "}"


def fmap_label(dim: int) -> str:
    """A for-loop dim as the inspector writes it: ``∅`` for none (the same tile every iteration).

        >>> fmap_label(1), fmap_label(-1)
        ('1', '∅')
    """
    return str(dim) if dim >= 0 else "∅"


def _esc(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _op_label(op: Any) -> str:
    t = op.op_type
    a = op.attrs
    if t == "reduction":
        return f"reduction(dim={a['dim']})"
    if t == "clamp":
        return f"clamp[{a['lo']:g},{a['hi']:g}]"
    if t == "mul_scalar":
        return f"mul_scalar({a['scalar']:g})"
    if t == "concat":
        return f"concat(dim={a['dim']})"
    if t == "forloop_accum":
        # None is Mirage's NO_RED accumulator: acc += x per iteration, no dim reduced.
        return f"accum: {a['acc'] or 'none (acc += x)'}"
    return t


def _shape(t: Any) -> str:
    return f"{t.dtype.name}{fmt(t.dims)}"


_MISSING_DOT = (
    "Graphviz's `dot` program is not installed, so the μGraph cannot be drawn; "
    "install it with `apt-get install graphviz` (Debian/Ubuntu), `brew install graphviz` (macOS) "
    "or `conda install graphviz` (./dev.sh installs it for you). The graph itself is fine: print it, "
    "or save it with graph.to_json()."
)


class MuGraphDrawing(graphviz.Digraph):
    """A ``graphviz.Digraph`` whose rendering raises :class:`GraphvizMissingError` when ``dot`` is missing.

    In a notebook it shows as SVG; without ``dot`` it shows the reason as text instead of a traceback.
    """

    def pipe(self, *args: Any, **kwargs: Any) -> Any:  # noqa: D102 - graphviz's signature
        try:
            return super().pipe(*args, **kwargs)
        except graphviz.ExecutableNotFound as e:
            raise GraphvizMissingError(_MISSING_DOT) from e

    def render(self, *args: Any, **kwargs: Any) -> Any:  # noqa: D102
        try:
            return super().render(*args, **kwargs)
        except graphviz.ExecutableNotFound as e:
            raise GraphvizMissingError(_MISSING_DOT) from e

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None, **kw: Any) -> dict[str, Any]:
        try:
            return super()._repr_mimebundle_(include, exclude, **kw)
        except GraphvizMissingError as e:
            return {"text/plain": f"{e}\n\n{self.source}"}


def draw(graph: KernelGraph, level: str = "all", *, rankdir: str = "TB",
         metrics: dict[str, Any] | None = None) -> MuGraphDrawing:
    """Build a Graphviz drawing of ``graph`` (no rendering yet; ``dot`` is needed only to render).

    ``metrics`` may map kernel op ids (``"op3"``) to a short string shown in the node.

    >>> import mirage_lab as mi
    >>> from mirage_lab.examples import rms_norm_linear_fused
    >>> d = mi.draw(rms_norm_linear_fused(), level="block")
    >>> "forloop_range 32" in d.source
    True
    """
    if not isinstance(graph, KernelGraph):
        raise MirageLabError(f"draw: expected a KernelGraph, got {type(graph).__name__}")
    if level not in LEVELS:
        raise MirageLabError(f"draw: unknown level {level!r}; use one of {LEVELS}")
    dot = MuGraphDrawing("mugraph", graph_attr={"rankdir": rankdir, "fontname": "Helvetica", "fontsize": "11",
                                                  "compound": "true"},
                           node_attr={"fontname": "Helvetica", "fontsize": "10", "style": "filled,rounded",
                                      "shape": "box"},
                           edge_attr={"fontname": "Helvetica", "fontsize": "9"})
    metrics = metrics or {}
    # The node a kernel tensor comes from (a kernel op node, or a saver inside a cluster).
    src: dict[int, str] = {}
    # The node a kernel tensor goes into per consumer: customized ops route into loaders.
    for op in graph.ops:
        oid = f"op{op.guid}"
        note = f"\n{metrics[oid]}" if oid in metrics else ""
        if op.op_type == "input":
            t = op.outputs[0]
            idx = graph.inputs.index(t)
            dot.node(oid, f"input {idx}\n{_shape(t)}{note}", fillcolor=IO_FILL, shape="box")
            src[t.guid] = oid
            continue
        if op.op_type != "customized" or level == "kernel":
            label = _op_label(op)
            if op.op_type == "customized":
                bg = op.block_graph
                label = (f"customized\ngrid {bg.grid_dim}\nforloop {bg.forloop_range}, "
                         f"{len([o for o in bg.ops if o.op_type not in ('input', 'output')])} block ops")
            dot.node(oid, f"{label}\n→ {', '.join(_shape(t) for t in op.outputs)}{note}", fillcolor=KERNEL_FILL)
            for t in op.inputs:
                dot.edge(src[t.guid], oid)
            for t in op.outputs:
                src[t.guid] = oid
            continue
        _draw_block(dot, op, level, src, note)
    for i, t in enumerate(graph.outputs):
        nid = f"out{i}"
        dot.node(nid, f"output {i}\n{_shape(t)}", fillcolor=IO_FILL)
        dot.edge(src[t.guid], nid)
    return dot


def _draw_block(dot: graphviz.Digraph, op: Any, level: str, src: dict[int, str], note: str) -> None:
    bg = op.block_graph
    prefix = f"op{op.guid}_"
    tg = bg.thread_graph()
    title = f"customized op{op.guid}: grid {bg.grid_dim}, block {bg.block_dim}, forloop_range {bg.forloop_range}{note}"
    with dot.subgraph(name=f"cluster_{prefix}") as c:
        c.attr(label=title, style="filled,rounded", fillcolor=BLOCK_FILL, color="#1565c0")
        tnode: dict[int, str] = {}  # STensor guid -> node producing it
        if level == "thread":
            for ci, chain in enumerate(tg.chains):
                lead = chain.lead
                nid = f"{prefix}chain{ci}"
                if lead.op_type == "input":
                    i = bg.input_ops.index(lead)
                    t = lead.outputs[0]
                    label = f"load in{i}\n{_shape(t)}\nimap {map_label(lead.attrs['input_map'])}, fmap {fmap_label(lead.attrs['forloop_dim'])}"
                    c.node(nid, label, fillcolor=LOADER_FILL)
                    dot.edge(src[op.inputs[i].guid], nid)
                elif lead.op_type == "output":
                    i = bg.output_ops.index(lead)
                    c.node(nid, f"save out{i}\n{fmt(lead.attrs['out_dims'])}\nomap {map_label(lead.attrs['output_map'])}",
                           fillcolor=LOADER_FILL)
                    src[op.outputs[i].guid] = nid
                else:
                    ops_txt = " → ".join(_op_label(o) for o in chain.ops)
                    head = "thread chain" if chain.epilogue else "block op"
                    c.node(nid, f"{head}\n{ops_txt}\n→ {_shape(chain.output)}",
                           fillcolor=CHAIN_FILL if chain.epilogue else "white")
                for o in chain.ops:
                    for t in o.outputs:
                        tnode[t.guid] = nid
                for t in lead.inputs:
                    dot.edge(tnode[t.guid], nid)
            return
        chains_by_op = {o.guid: (ci, ch) for ci, ch in enumerate(tg.chains) for o in ch.ops}
        opened: dict[int, Any] = {}
        for bop in bg.ops:
            nid = f"{prefix}{bop.guid}"
            target = c
            ci, chain = chains_by_op[bop.guid]
            if level == "all" and len(chain.ops) > 1:
                # Nested cluster per fusion chain: the thread level inside the block level.
                if ci not in opened:
                    opened[ci] = True
                    with c.subgraph(name=f"cluster_{prefix}chain{ci}") as cc:
                        cc.attr(label=f"thread chain {ci}", style="filled,dashed", fillcolor=CHAIN_FILL, color="#ad1457")
                        for o in chain.ops:
                            _block_node(cc, o, bg, f"{prefix}{o.guid}", op, src, dot)
                continue
            _block_node(target, bop, bg, nid, op, src, dot)
        for bop in bg.ops:
            for t in bop.inputs:
                dot.edge(f"{prefix}{t.op.guid}", f"{prefix}{bop.guid}", label=fmt(t.dims) if bop.op_type != "output" else "")


def _block_node(c: Any, bop: Any, bg: Any, nid: str, op: Any, src: dict[int, str], dot: graphviz.Digraph) -> None:
    if bop.op_type == "input":
        i = bg.input_ops.index(bop)
        t = bop.outputs[0]
        c.node(nid, f"load in{i}: {_shape(t)}\nimap {map_label(bop.attrs['input_map'])}  fmap {fmap_label(bop.attrs['forloop_dim'])}",
               fillcolor=LOADER_FILL)
        dot.edge(src[op.inputs[i].guid], nid)
    elif bop.op_type == "output":
        i = bg.output_ops.index(bop)
        c.node(nid, f"save out{i}: {fmt(bop.attrs['out_dims'])}\nomap {map_label(bop.attrs['output_map'])}",
               fillcolor=LOADER_FILL)
        src[op.outputs[i].guid] = nid
    else:
        t = bop.outputs[0]
        fill = ACCUM_FILL if bop.op_type == "forloop_accum" else "white"
        phase = " (after loop)" if t.after_accum and bop.op_type != "forloop_accum" else ""
        c.node(nid, f"{_op_label(bop)}{phase}\n{_shape(t)}", fillcolor=fill)


def render_svg(dot: graphviz.Digraph) -> str:
    """Render with the ``dot`` binary to SVG text; :class:`GraphvizMissingError` when Graphviz is not installed.

    >>> svg = render_svg(mi.draw(g, "thread"))   # doctest: +SKIP
    """
    try:
        return dot.pipe(format="svg").decode("utf-8")
    except graphviz.ExecutableNotFound as e:
        raise GraphvizMissingError(_MISSING_DOT) from e
