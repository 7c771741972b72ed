"""What the detail pane shows for one candidate, as text and HTML (pure functions, no widgets).

    >>> from mirage_lab import examples as ex
    >>> g = ex.rms_norm_linear_fused(4, 256, 256, grid=8, forloop_range=4)
    >>> code, origin = candidate_code(g)
    >>> origin, "@cuda.jit" in code, "def run(inputs" in code
    ('codegen', True, True)
    >>> "<svg" in drawing_html(g, "block")
    True
    >>> pane = InspectorPane()
    >>> pane.show(g, "block")
    >>> pane.outputs[0]["data"]["application/vnd.mirage-lab.mugraph+json"]["view"]["expand"]
    'block'
"""
from __future__ import annotations

import html
import re
from typing import Any

import ipywidgets as W

from ..ir.kernel_graph import KernelGraph

PANE_MAX_HEIGHT = "520px"


def candidate_code(graph: KernelGraph) -> tuple[str, str]:
    """The generated kernels and host ``run`` function of ``graph``, and where the text came from.

    Returns ``(text, "codegen")``; when the code generator cannot handle the graph,
    ``(printed μGraph with the reason, "printed")`` — the pane then still shows something true.
    The shared prelude (bit-level helpers, imports) is left out: it is the same for every
    candidate and the exported module has it.
    """
    try:
        from ..codegen import generate_module

        gen = generate_module(graph)
    except Exception as e:  # an op the code generator does not support yet: show the graph instead
        return f"# no generated code: {type(e).__name__}: {e}\n\n{graph!r}", "printed"
    src = gen.source
    starts = [src.find(s) for s in gen.kernel_sources.values() if s in src]
    start = min(starts) if starts else src.find("def run(")
    return (src[start:] if start >= 0 else src).strip() + "\n", "codegen"


def code_html(code: str) -> str:
    """Syntax-highlighted Python in a scrolling box (inline styles: no stylesheet needed)."""
    try:
        from pygments import highlight
        from pygments.formatters import HtmlFormatter
        from pygments.lexers import PythonLexer

        body = highlight(code, PythonLexer(), HtmlFormatter(noclasses=True, nobackground=True))
    except ImportError:  # pygments comes with IPython, but the pane must not depend on it
        body = f"<pre>{html.escape(code)}</pre>"
    return (f'<div class="mlab-code" style="max-height:{PANE_MAX_HEIGHT};overflow:auto;font-size:12px;'
            f'line-height:1.35">{body}</div>')


def text_html(text: str) -> str:
    """Preformatted text in a scrolling box."""
    return (f'<div style="max-height:{PANE_MAX_HEIGHT};overflow:auto"><pre style="font-size:12px;margin:0">'
            f"{html.escape(text)}</pre></div>")


def _inline_svg(svg: str) -> str:
    """Graphviz's standalone SVG made fit for an HTML page: no XML prolog, scaled to the pane's width."""
    i = svg.find("<svg")
    svg = svg[i:] if i >= 0 else svg
    # The viewBox keeps the aspect ratio; the width/height attributes only cap the natural size.
    return re.sub(r"<svg\b", '<svg class="mlab-drawing" style="max-width:100%;height:auto"', svg, count=1)


def drawing_svg(graph: KernelGraph, level: str) -> tuple[str | None, str]:
    """``(svg, "")`` for ``graph`` at ``level``, or ``(None, reason)`` when Graphviz is unavailable."""
    from ..errors import MirageLabError
    from ..viz import draw, render_svg

    try:
        return render_svg(draw(graph, level=level)), ""
    except MirageLabError as e:  # GraphvizMissingError and friends say what to install
        return None, str(e)


def drawing_pane_html(svg: str | None, reason: str, graph: KernelGraph) -> str:
    """The drawing in a scrolling box, or a note saying why there is none followed by the printed graph."""
    if svg is None:
        return (f'<div style="color:#b71c1c">Drawing unavailable: {html.escape(reason)}</div>'
                + text_html(repr(graph)))
    return f'<div style="max-height:{PANE_MAX_HEIGHT};overflow:auto">{_inline_svg(svg)}</div>'


def drawing_html(graph: KernelGraph, level: str) -> str:
    """:func:`drawing_pane_html` of ``graph`` drawn at ``level``."""
    return drawing_pane_html(*drawing_svg(graph, level), graph)


def inspection_output(graph: KernelGraph, level: str, *, svg: str | None = None,
                      metrics: dict[str, Any] | None = None,
                      summary: dict[str, Any] | None = None) -> dict[str, Any]:
    """One notebook output (``display_data``) holding the inspector of ``graph`` opened to ``level``.

    JupyterLab shows the inspector (the mirage_lab extension); other front ends the SVG drawing
    (``svg``, when the caller has it already: the explorer caches one per candidate and level)
    or the printed graph.
    """
    from ..ir.serialize import MIME_TYPE
    from ..viz.inspector import graph_data

    data: dict[str, Any] = {MIME_TYPE: graph_data(graph, metrics, expand=level, summary=summary)}
    if svg is not None:
        data["image/svg+xml"] = svg
    data["text/plain"] = repr(graph)
    return {"output_type": "display_data", "data": data, "metadata": {}}


class InspectorPane(W.Output):
    """The detail pane's drawing: the μGraph inspector (zoom, pan, search, expand, export) of a candidate.

    :meth:`show` replaces what it shows by setting ``outputs`` (a trait), so it is safe from the
    search's background repaints, where printing into an Output widget is not; the widget's
    saved state keeps the last graph.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.add_class("mlab-drawing-pane")
        self.layout.min_height = "320px"

    def show(self, graph: KernelGraph, level: str, svg: str | None = None, *,
             metrics: dict[str, Any] | None = None, summary: dict[str, Any] | None = None) -> None:
        """Show ``graph`` opened to ``level`` (kernel, block, thread or all); see :func:`inspection_output`."""
        self.outputs = (inspection_output(graph, level, svg=svg, metrics=metrics, summary=summary),)


def verification_html(result: Any | None, *, running: bool = False, error: str | None = None) -> str:
    """One line on the candidate's equivalence check (``mi.verify.equivalent`` against the program)."""
    if error is not None:
        return f'<span style="color:#b71c1c">verification failed to run: {html.escape(error)}</span>'
    if running or result is None:
        return '<span style="color:#616161">⏳ verifying against the program (random tests in Z_p × Z_q)…</span>'
    if result:
        return ('<span style="color:#1b5e20"><b>✓ equivalent</b> to the program: equal fingerprints on '
                f"{result.tests} random inputs in Z_p × Z_q (seed {result.seed}, output permutation "
                f"{result.permutation})</span>")
    return f'<span style="color:#b71c1c"><b>✗ not equivalent</b>: {html.escape(result.reason)}</span>'
