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


def _svg_or_reason(graph: Any, level: str) -> tuple[str | None, str]:
    from . import draw, render_svg

    try:
        return render_svg(draw(graph, level=level)), ""
    except GraphvizMissingError as e:
        return None, str(e)


def svg_or_none(graph: Any, level: str = "all") -> str | None:
    """The SVG drawing of ``graph``, or ``None`` when Graphviz is not available (never raises for that)."""
    return _svg_or_reason(graph, level)[0]


def mimebundle(graph: Any, metrics: dict[str, Any] | None = None, level: str = "all") -> dict[str, Any]:
    """The notebook bundle: the μGraph JSON (for the JupyterLab extension), SVG when drawable, and text."""
    text = repr(graph)
    bundle: dict[str, Any] = {MIME_TYPE: json.loads(json.dumps(to_dict(graph, metrics)))}
    svg, reason = _svg_or_reason(graph, level)
    if svg is not None:
        bundle["image/svg+xml"] = svg
    else:
        text += f"\n(drawing unavailable: {reason})"
    bundle["text/plain"] = text
    return bundle
