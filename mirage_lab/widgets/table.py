"""A sortable, clickable table of candidates, built from plain ipywidgets.

Each row is one :class:`ipywidgets.Button` whose label holds the row's cells in a
monospace font, padded with no-break spaces (which HTML does not collapse), so the
columns line up without any custom JS or CSS; the header is a button of the same style.
Rows are reused: a refresh only changes the labels that differ, so a live search sends
a few small messages rather than re-creating widgets. Sorting: the "sort by" menu and
the direction button.

    >>> from mirage_lab import examples as ex
    >>> from mirage_lab.widgets.records import CandidateRecord
    >>> t = CandidateTable()
    >>> t.set_records([CandidateRecord.from_graph(0, ex.rms_norm_linear_fused(4, 256, 256, grid=8, forloop_range=4))])
    >>> t.order, t.rows[0].description.split()[:3]
    ([0], ['0', '1', '1'])
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import ipywidgets as W

from .records import CandidateRecord, human_bytes

NBSP = "\u00a0"
SELECTED_COLOR = "#bbdefb"
ROW_COLOR = "#fafafa"

# (key, header, alignment) in display order; the sort key of each is in _SORT_KEYS.
COLUMNS: list[tuple[str, str, str]] = [
    ("index", "#", ">"),
    ("kernels", "kernels", ">"),
    ("block_graphs", "blocks", ">"),
    ("grid", "grid", "<"),
    ("forloop", "forloop", ">"),
    ("bytes", "bytes (est.)", ">"),
    ("latency", "latency", ">"),
]
SORT_LABELS = {"index": "# (order found)", "kernels": "kernels", "block_graphs": "block graphs",
               "grid": "grid (total blocks)", "forloop": "forloop range", "bytes": "bytes (est.)",
               "latency": "latency"}
_INF = float("inf")
_SORT_KEYS: dict[str, Callable[[CandidateRecord], Any]] = {
    "index": lambda r: r.index,
    "kernels": lambda r: (r.kernels, r.index),
    "block_graphs": lambda r: (r.block_graphs, r.index),
    "grid": lambda r: (r.total_blocks, r.grids, r.index),
    "forloop": lambda r: (r.forloop_ranges, r.index),
    "bytes": lambda r: (r.bytes, r.kernels, r.index),
    # Unmeasured candidates sort last whichever the direction (see sorted_records).
    "latency": lambda r: (r.latency_us if r.latency_us is not None else _INF, r.index),
}


def cells(r: CandidateRecord) -> dict[str, str]:
    """The row's cell texts."""
    return {"index": str(r.index), "kernels": str(r.kernels), "block_graphs": str(r.block_graphs),
            "grid": r.grid_text, "forloop": r.forloop_text, "bytes": human_bytes(r.bytes), "latency": r.latency_text}


def sorted_records(records: Sequence[CandidateRecord], key: str, descending: bool = False) -> list[CandidateRecord]:
    """Records in table order; rows without a latency stay at the bottom when sorting by latency.

        >>> from types import SimpleNamespace as R
        >>> rs = [R(index=0, latency_us=None), R(index=1, latency_us=5.0), R(index=2, latency_us=3.0)]
        >>> [r.index for r in sorted_records(rs, "latency", descending=True)]
        [1, 2, 0]
    """
    out = sorted(records, key=_SORT_KEYS[key], reverse=descending)
    if key == "latency" and descending:
        out = [r for r in out if r.latency_us is not None] + [r for r in out if r.latency_us is None]
    return out


def format_row(values: dict[str, str], widths: dict[str, int]) -> str:
    parts = []
    for key, _, align in COLUMNS:
        v = values[key]
        pad = NBSP * max(0, widths[key] - len(v))
        parts.append(pad + v if align == ">" else v + pad)
    return (NBSP * 2).join(parts)


class CandidateTable(W.VBox):
    """The candidates table. ``on_select(fn)`` registers ``fn(candidate_index)`` for row clicks."""

    def __init__(self, *, max_rows: int = 200, height: str = "300px") -> None:
        self.max_rows = max_rows
        self.records: list[CandidateRecord] = []
        self.order: list[int] = []               # candidate index shown in each row
        self.selected: int | None = None
        self._callbacks: list[Callable[[int], None]] = []
        self.sort_by = W.Dropdown(options=[(v, k) for k, v in SORT_LABELS.items()], value="index",
                                  description="sort by", style={"description_width": "initial"},
                                  layout=W.Layout(width="auto", min_width="250px"))
        self.descending = W.ToggleButton(value=False, description="▲ ascending", tooltip="reverse the order",
                                         layout=W.Layout(width="120px"))
        self.header = self._button(bold=True)
        self.header.tooltip = "columns: order found, kernels, block graphs (customized ops), grid, forloop range, " \
                              "estimated bytes moved, measured latency"
        self.rows: list[W.Button] = []
        self.body = W.VBox([], layout=W.Layout(max_height=height, overflow="auto", width="100%",
                                                  flex_flow="column", align_items="stretch"))
        self.note = W.HTML("<i>no candidates yet</i>")
        self.sort_by.observe(lambda _: self.refresh(), names="value")
        self.descending.observe(self._on_direction, names="value")
        super().__init__([W.HBox([self.sort_by, self.descending], layout=W.Layout(flex_flow="row wrap")),
                          self.header, self.body, self.note], layout=W.Layout(width="100%"))
        self.add_class("mlab-candidate-table")
        self.refresh()

    # ------------------------------------------------------------------ widgets
    def _button(self, bold: bool = False) -> W.Button:
        b = W.Button(layout=W.Layout(width="100%", height="24px", margin="0", padding="0 4px"),
                     style={"font_family": "monospace", "font_size": "12px", "font_weight": "bold" if bold else "normal",
                            "button_color": "transparent" if bold else ROW_COLOR})
        return b

    def _row(self, pos: int) -> W.Button:
        b = self._button()
        b.add_class("mlab-row")
        b.on_click(lambda _b, pos=pos: self._clicked(pos))
        return b

    def _on_direction(self, change: dict) -> None:
        self.descending.description = "▼ descending" if change["new"] else "▲ ascending"
        self.refresh()

    def _clicked(self, pos: int) -> None:
        if pos < len(self.order):
            for fn in self._callbacks:
                fn(self.order[pos])

    # ------------------------------------------------------------------ API
    def on_select(self, fn: Callable[[int], None]) -> None:
        """Call ``fn(candidate_index)`` when a row is clicked."""
        self._callbacks.append(fn)

    def set_records(self, records: Sequence[CandidateRecord]) -> None:
        self.records = list(records)
        self.refresh()

    def set_selected(self, index: int | None) -> None:
        self.selected = index
        self._paint()

    def click(self, index: int) -> None:
        """Act as a click on the row of candidate ``index`` (tests; keyboard-free use)."""
        self._clicked(self.order.index(index))

    def refresh(self) -> None:
        """Re-sort and relabel the rows (only changed labels are sent to the browser)."""
        recs = sorted_records(self.records, self.sort_by.value, self.descending.value)
        shown = recs[: self.max_rows]
        values = [cells(r) for r in shown]
        widths = {k: max([len(h)] + [len(v[k]) for v in values]) for k, h, _ in COLUMNS}
        with self.header.hold_sync():
            self.header.description = format_row({k: h for k, h, _ in COLUMNS}, widths)
        while len(self.rows) < len(shown):
            self.rows.append(self._row(len(self.rows)))
        for b, v in zip(self.rows, values):
            label = format_row(v, widths)
            if b.description != label:
                b.description = label
        self.order = [r.index for r in shown]
        if len(self.body.children) != len(shown):
            self.body.children = tuple(self.rows[: len(shown)])
        more = len(recs) - len(shown)
        self.note.value = ("<i>no candidates yet</i>" if not recs else
                           f"<i>{len(recs)} candidate{'s' if len(recs) != 1 else ''}"
                           + (f"; the first {len(shown)} by this order are listed" if more else "")
                           + " — click a row to inspect it</i>")
        self._paint()

    def _paint(self) -> None:
        for pos, b in enumerate(self.rows[: len(self.order)]):
            color = SELECTED_COLOR if self.order[pos] == self.selected else ROW_COLOR
            if b.style.button_color != color:
                b.style.button_color = color
