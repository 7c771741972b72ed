"""The explorer's saved view: outputs a saved notebook keeps, updated in place, complete and small."""
from __future__ import annotations

import json
import time

import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

import mirage_lab as mi
from mirage_lab import examples as ex
from mirage_lab.widgets.saved_view import SAVED_CLASS

WIDGET = "application/vnd.jupyter.widget-view+json"
PLOTLY = "application/vnd.plotly.v1+json"


@pytest.fixture(scope="module")
def shell():
    return InteractiveShell.instance()


def test_displayed_explorer_carries_a_saved_view_updated_when_the_search_ends(shell):
    w = mi.lab.explore(ex.rms_norm_linear_program(4, 256, 256), workers=1, max_kernel_ops=3, autostart=False)
    with capture_output() as shown:
        w._ipython_display_()
    first = shown.outputs
    assert WIDGET in first[0].data                                   # the live widget, then the saved outputs
    ids = [o.transient["display_id"] for o in first[1:]]
    assert len(ids) == 3 and all(i.startswith(w._saved_id) for i in ids)
    assert SAVED_CLASS in first[1].data["text/html"] and "before the search started" in first[1].data["text/html"]

    with capture_output() as updates:
        w.start()
        assert w.wait(120)
        w.select(w.candidates[-1].index)
        w.verified(w.selected, timeout=60)
        deadline = time.monotonic() + 10  # the verification's event, and the repaint, follow on its thread
        while "✓ equivalent" not in [o.data for o in updates.outputs
                                     if o.transient["display_id"] == w._saved_id][-1]["text/html"]:
            assert time.monotonic() < deadline, "the saved view never showed the verification"
            time.sleep(0.05)
    last = {}
    for o in updates.outputs:
        assert o.update  # updated in place: no new outputs appear in the cell
        last[o.transient["display_id"]] = o.data
    page = last[w._saved_id]["text/html"]
    assert "Saved view of the search widget (after the search ended)" in page
    assert 'data-state="finished"' in page
    assert page.count("<tr") == len(w.candidates) + 1                  # the whole table, with its header
    assert f"<tr class=\"mlab-selected\"><td style=\"text-align:right\">{w.selected}</td>" in page
    assert "<svg" in page and "block level" in page                    # the selected drawing as SVG
    assert "✓ equivalent" in page                                      # its verification
    fig = last[w._saved_id + "-progress"][PLOTLY]
    assert [t["name"] for t in fig["data"]] == ["states", "candidates"] and len(fig["data"][0]["x"]) >= 1
    size = sum(len(json.dumps(d)) for d in last.values())
    assert size < 200_000, size                                        # no widget state, no plotly.js


def test_a_level_switch_updates_the_saved_drawing(shell):
    w = mi.lab.explore(ex.rms_norm_linear_program(4, 256, 256), workers=1, max_kernel_ops=3)
    assert w.wait(120)
    with capture_output():
        w._ipython_display_()
    with capture_output() as updates:
        w.set_level("kernel")
    page = [o.data for o in updates.outputs if o.transient["display_id"] == w._saved_id][-1]["text/html"]
    assert "kernel level" in page
