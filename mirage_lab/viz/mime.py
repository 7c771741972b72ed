"""How μGraphs show themselves in notebooks (``_repr_mimebundle_``).

The bundle carries the package's own MIME type (rendered by the JupyterLab extension),
an SVG drawing for other front ends, and plain text. A missing ``dot`` binary drops only
the SVG, with a note in the text: showing a graph never raises.
"""
from __future__ import annotations

import json
from typing import Any

from ..errors import GraphvizMissingError
from ..ir.serialize import MIME_TYPE, to_dict


def svg_or_none(graph: Any, level: str = "all") -> str | None:
    from .graphviz_draw import draw, render_svg

    try:
        return render_svg(draw(graph, level=level))
    except GraphvizMissingError:
        return None


def mimebundle(graph: Any, metrics: dict[str, Any] | None = None, level: str = "all") -> dict[str, Any]:
    text = repr(graph)
    bundle: dict[str, Any] = {MIME_TYPE: json.loads(json.dumps(to_dict(graph, metrics)))}
    svg = svg_or_none(graph, level)
    if svg is not None:
        bundle["image/svg+xml"] = svg
    else:
        text += "\n(drawing unavailable: Graphviz `dot` is not installed; apt-get install graphviz)"
    bundle["text/plain"] = text
    return bundle
