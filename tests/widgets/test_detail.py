"""The explorer's detail pane: the inspector of the selected candidate."""
from __future__ import annotations

from mirage_lab import examples as ex
from mirage_lab.ir.serialize import MIME_TYPE
from mirage_lab.widgets import detail


def test_the_pane_shows_the_inspector_opened_to_the_level_with_the_svg_fallback():
    g = ex.rms_norm_linear_fused(4, 256, 256, grid=8, forloop_range=4)
    pane = detail.InspectorPane()
    assert "mlab-drawing-pane" in pane._dom_classes
    pane.show(g, "kernel", "<svg>fallback</svg>", summary={"latency_us": 12.5})
    (out,) = pane.outputs
    assert out["output_type"] == "display_data"
    data = out["data"]
    assert data[MIME_TYPE]["view"] == {"expand": "kernel", "summary": {"latency_us": 12.5}}
    assert data["image/svg+xml"] == "<svg>fallback</svg>" and "customized" in data["text/plain"]
    pane.show(g, "thread")   # replaces, never appends
    assert len(pane.outputs) == 1 and pane.outputs[0]["data"][MIME_TYPE]["view"]["expand"] == "thread"
    assert "image/svg+xml" not in pane.outputs[0]["data"]
