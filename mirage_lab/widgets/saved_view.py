"""The explorer's saved view: a static, complete rendering of its state that a saved notebook keeps.

Widget state is not saved with a notebook by default (and saving it makes the file megabytes
and the widget dead without saying so). So beside the live widget the explorer displays plain
outputs with a display id, and updates them in place as the search ends, a row is clicked or
measurements arrive: an HTML page (a line saying it is a saved view, the status and counters,
the candidates table, the selected candidate's summary, verification and drawing as SVG) and
the figures as plotly JSON (rendered by plotly's JupyterLab extension, no kernel needed). A
style rule in the HTML hides them while the live widget is on screen, and shows them when the
notebook is reopened without it (where JupyterLab says "model not found" for the widget).

    >>> from mirage_lab import examples as ex
    >>> from mirage_lab.widgets.session import ExplorerSession
    >>> s = ExplorerSession(ex.rms_norm_linear_program(4, 256, 256), max_kernel_ops=3)
    >>> page = saved_view_html(s, selected=None, level="block", svg=None, title="demo")
    >>> "Saved view" in page and 'class="mlab-saved-view"' in page
    True
"""
from __future__ import annotations

import html
import json
from typing import Any, Sequence

from . import progress
from .records import CandidateRecord
from .table import COLUMNS, cells, sorted_records

SAVED_CLASS = "mlab-saved-view"
MAX_ROWS = 50           # keeps the file small; the line under the table says how many there were
MAX_POINTS = 200        # progress samples kept in the saved figure

# While the live explorer is in the same output area, the saved outputs (this one and the figures
# after it) are hidden; reopened without the widget, they show, and the widget's own output
# ("Loading widget...", "Error displaying widget: model not found") is hidden beside them.
_STYLE = f"""<style>
.jp-OutputArea:has(.mlab-explorer) > .jp-OutputArea-child:has(.{SAVED_CLASS}),
.jp-OutputArea:has(.mlab-explorer) > .jp-OutputArea-child:has(.{SAVED_CLASS}) ~ .jp-OutputArea-child
  {{display: none;}}
.jp-OutputArea:has(.{SAVED_CLASS}):not(:has(.mlab-explorer)) .jp-OutputArea-output.jupyter-widgets {{display: none;}}
.{SAVED_CLASS} table {{border-collapse: collapse; font-family: monospace; font-size: 12px;}}
.{SAVED_CLASS} td, .{SAVED_CLASS} th {{padding: 1px 8px; border-bottom: 1px solid #eee;}}
.{SAVED_CLASS} tr.mlab-selected {{background: #bbdefb;}}
</style>"""


def table_html(records: Sequence[CandidateRecord], selected: int | None) -> str:
    """The candidates table as an HTML table, in the order found (the first :data:`MAX_ROWS`)."""
    recs = sorted_records(records, "index")
    head = "".join(f'<th style="text-align:{"right" if a == ">" else "left"}">{html.escape(h)}</th>'
                   for _, h, a in COLUMNS)
    rows = []
    for r in recs[:MAX_ROWS]:
        c = cells(r)
        tds = "".join(f'<td style="text-align:{"right" if a == ">" else "left"}">{html.escape(c[k])}</td>'
                      for k, _, a in COLUMNS)
        cls = ' class="mlab-selected"' if r.index == selected else ""
        rows.append(f"<tr{cls}>{tds}</tr>")
    more = f"<div><i>{len(recs) - MAX_ROWS} more candidates not listed</i></div>" if len(recs) > MAX_ROWS else ""
    if not recs:
        return "<div><i>no candidates</i></div>"
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>{more}"


def saved_view_html(session: Any, *, selected: int | None, level: str, svg: str | None, title: str,
                    detail_title: str = "", verification: str = "") -> str:
    """The saved view of an explorer over ``session``: everything but the live controls, as one HTML page."""
    s, n = session.stats, len(session.candidates)
    when = {"running": "while the search was running", "idle": "before the search started"}.get(
        session.state, "after the search ended")
    note = (f"<div class=\"mlab-saved-note\" style=\"color:#616161;font-size:12px\">Saved view of the search widget "
            f"({html.escape(when)}): static, with no kernel behind it. Run the notebook to get the live widget "
            "back (Stop, row clicks, the level switch).</div>")
    parts = [_STYLE, f'<div class="{SAVED_CLASS}">', note, f"<div>{title}</div>",
             progress.status_html(session.state, s, n, session.errors),
             progress.stat_cards_html(s, n, progress.recent_rate(session.history)),
             '<div style="display:flex;flex-wrap:wrap;gap:16px;margin-top:6px">',
             f'<div style="min-width:320px">{table_html(session.candidates, selected)}</div>']
    if selected is not None:
        drawing = svg if svg is not None else "<i>no drawing (Graphviz's dot is not installed)</i>"
        parts.append(f'<div style="flex:1;min-width:360px">{detail_title}{verification}'
                     f'<div style="color:#616161">drawing: {html.escape(level)} level</div>'
                     f'<div class="mlab-saved-drawing" style="max-width:720px">{drawing}</div></div>')
    parts.append("</div></div>")
    return "".join(parts)


def figure_bundle(fig: Any, label: str) -> dict[str, Any]:
    """A plotly figure as a display bundle that renders without a kernel (plotly's mime type, no plotly.js)."""
    return {"application/vnd.plotly.v1+json": {**json.loads(fig.to_json()), "config": {"displaylogo": False}},
            "text/plain": f"<{label}: a plotly figure>"}


def thinned(history: Sequence[dict[str, Any]], n: int = MAX_POINTS) -> list[dict[str, Any]]:
    """At most ``n`` samples, evenly spaced, the last kept.

        >>> len(thinned([{"elapsed": i} for i in range(1000)], 10)), thinned([{"e": 1}, {"e": 2}], 10)[-1]
        (10, {'e': 2})
    """
    h = list(history)
    if len(h) <= n:
        return h
    step = len(h) / (n - 1)
    return [h[int(i * step)] for i in range(n - 1)] + [h[-1]]


__all__ = ["saved_view_html", "table_html", "figure_bundle", "thinned", "SAVED_CLASS"]
