"""Plotly figures of a search and its measurements: one pure function per plot, no hidden state
(the pattern of Optuna's ``optuna.visualization``: typed records first, then the drawing). Usable
outside the widget.

* :func:`latency_figure`: each candidate's measured latency beside the torch baselines
  (eager, CUDA graph, torch.compile), with the memory floor drawn as a line. It draws
  :class:`~mirage_lab.runtime.latency.LatencyRow` records only, built where the numbers are
  made (``TuneReport.latency_rows()``, ``Selection.latency_rows()``, ``baseline_rows(...)``).
  Without rows (a CPU-only machine) the figure says so instead of showing empty axes.
* :func:`progress_figure`: states visited and candidates found over the search's time.

    >>> from mirage_lab.viz.plots import LatencyRow, latency_figure, progress_figure
    >>> fig = latency_figure([LatencyRow("candidate 0", "candidate", 14.1),
    ...                       LatencyRow("torch eager", "baseline", 40.2)], floor_us=11.3)
    >>> [t.name for t in fig.data]
    ['candidates', 'baselines']
    >>> "No GPU" in latency_figure([]).layout.title.text
    True
"""
from __future__ import annotations

import math
import textwrap
from typing import Any, Iterable, Mapping, Sequence

import plotly.graph_objects as go

from ..runtime.latency import BASELINE, BASELINE_LABELS, CANDIDATE, LatencyRow, check_rows

NO_GPU_TITLE = "No GPU: latencies are measured on a CUDA machine"
CANDIDATE_COLOR = "#1f77b4"
BASELINE_COLOR = "#7f7f7f"
FLOOR_COLOR = "#d62728"


def checked_rows(rows: Sequence[LatencyRow] | None, who: str = "latency_figure") -> list[LatencyRow]:
    """``rows`` as a list, candidates first then baselines (each in the order given); ``TypeError`` for
    anything that is not a sequence of :class:`LatencyRow`.

        >>> [r.label for r in checked_rows([LatencyRow("torch eager", "baseline", 41.0),
        ...                                 LatencyRow("candidate 0", "candidate", 12.9)])]
        ['candidate 0', 'torch eager']
    """
    out = check_rows(rows, who)
    return [r for r in out if r.kind == CANDIDATE] + [r for r in out if r.kind == BASELINE]


def _title(rows: list[LatencyRow]) -> str:
    modes = {r.mode for r in rows}
    devices = {r.device for r in rows if r.device}
    how = f"{next(iter(modes)).replace('_', ' ')}, " if len(modes) == 1 else ""
    where = f" on {next(iter(devices))}" if len(devices) == 1 else ""
    return f"Latency per call{where} ({how}median, p10–p90)"


NOTE_WIDTH = 58  # characters per line of a note: fits the widget's 520 px plot at 13 px


def no_gpu_note(floor_us: float | None = None) -> list[str]:
    """The no-GPU figure's note as plain-text paragraphs (plotly shows HTML tags other than its own literally).

        >>> no_gpu_note(11.3)[-1]
        'Memory floor of this program: 11.3 µs.'
    """
    out = ["Search and draw work on the CPU; running and timing the kernels needs a CUDA GPU.",
           "On a GPU machine: mi.superoptimize(program).report.latency_rows(), or "
           "mi.pipeline.select_fastest(candidates, inputs).latency_rows()."]
    if floor_us is not None:
        out.append(f"Memory floor of this program: {floor_us:.3g} µs.")
    return out


def _note_figure(title: str, paragraphs: Sequence[str]) -> go.Figure:
    """A figure that is only a note: one plain-text annotation per wrapped line, the height to fit them all."""
    lines = [ln for p in paragraphs for ln in (textwrap.wrap(p, NOTE_WIDTH, break_on_hyphens=False) or [""])]
    step = 20  # px per line
    top = 60
    height = top + step * len(lines) + 30
    fig = go.Figure()
    fig.update_layout(
        title=dict(text=title), height=height, template="plotly_white", margin=dict(l=20, r=20, t=top, b=20),
        xaxis=dict(visible=False, range=[0, 1]), yaxis=dict(visible=False, range=[0, 1]),
        annotations=[dict(text=ln, x=0, y=1 - (i + 0.5) * step / (height - top - 20), xref="paper", yref="paper",
                          xanchor="left", showarrow=False, font=dict(size=13)) for i, ln in enumerate(lines)],
    )
    return fig


def latency_figure(rows: Sequence[LatencyRow] | None = None, floor_us: float | None = None, *,
                   title: str | None = None) -> go.Figure:
    """Horizontal bars of median latency (p10–p90 whiskers), candidates and baselines, floor as a line.

    ``rows``: :class:`LatencyRow` records (anything else raises ``TypeError``). ``floor_us``:
    the memory floor (``mi.runtime.floor_us(program)``), drawn as a dashed vertical line.
    With no rows the figure's title says that latencies need a GPU.

        >>> fig = latency_figure([LatencyRow("candidate 0", "candidate", 12.9),
        ...                       LatencyRow("torch eager", "baseline", 41.0),
        ...                       LatencyRow("candidate 1", "candidate", 15.0)], floor_us=11.3)
        >>> list(fig.data[0].y), list(fig.data[1].y)
        (['candidate 0', 'candidate 1'], ['torch eager'])
    """
    rows = checked_rows(rows)
    fig = go.Figure()
    if not rows:
        return _note_figure(NO_GPU_TITLE, no_gpu_note(floor_us))
    def bars(kind: str, color: str, name: str) -> None:
        sel = [r for r in rows if r.kind == kind]
        if not sel:
            return
        spreads = [r.spread for r in sel]
        has_err = all(s is not None for s in spreads)
        fig.add_trace(go.Bar(
            name=name, orientation="h", marker_color=color,
            x=[r.median_us for r in sel], y=[r.label for r in sel],
            error_x=dict(type="data", symmetric=False, array=[s[1] - r.median_us for r, s in zip(sel, spreads)],
                         arrayminus=[r.median_us - s[0] for r, s in zip(sel, spreads)]) if has_err else None,
            text=[f"{r.median_us:.3g} µs" for r in sel], textposition="auto",
            customdata=[r.options or r.mode for r in sel],
            hovertemplate="%{y}: %{x:.3g} µs (%{customdata})<extra>" + name + "</extra>",
        ))

    bars(CANDIDATE, CANDIDATE_COLOR, "candidates")
    bars(BASELINE, BASELINE_COLOR, "baselines")
    if floor_us is not None:
        fig.add_vline(x=floor_us, line=dict(color=FLOOR_COLOR, dash="dash"),
                      annotation_text=f"memory floor {floor_us:.3g} µs", annotation_position="top right")
    fig.update_layout(
        title=dict(text=title or _title(rows)),
        xaxis_title="µs (lower is better)", template="plotly_white", barmode="group", bargap=0.25,
        # A row of at least 26 px per bar keeps labels and values readable at any count.
        height=max(260, 110 + 26 * len(rows)), legend=dict(orientation="h", y=-0.15, yanchor="top"),
        uniformtext=dict(minsize=10, mode="hide"),
        # Bars read top to bottom in the order given; long labels widen the margin instead of being cut.
        yaxis=dict(autorange="reversed", categoryorder="array", categoryarray=[r.label for r in rows],
                   automargin=True, tickfont=dict(size=12)),
    )
    return fig


def _stats_dict(item: Any) -> dict[str, Any]:
    """A progress sample as a dict: a SearchStats, a Progress event or a plain dict."""
    if isinstance(item, Mapping):
        return dict(item)
    stats = getattr(item, "stats", item)
    if hasattr(stats, "as_dict"):
        return stats.as_dict()
    raise TypeError(f"progress_figure: cannot read a sample of type {type(item).__name__}")


def candidate_dtick(n: int) -> int:
    """Whole-number tick spacing for a candidates axis up to ``n`` (about five ticks)."""
    return max(1, math.ceil(n / 5))


def progress_figure(history: Iterable[Any], *, title: str | None = None) -> go.Figure:
    """States visited (left axis) and candidates found (right axis, steps) against elapsed seconds.

    ``history``: ``SearchStats``, ``Progress`` events or dicts with ``elapsed``, ``states``
    and ``candidates`` (what ``explore(...).history`` holds).

        >>> fig = progress_figure([{"elapsed": 0.5, "states": 100, "candidates": 0},
        ...                        {"elapsed": 1.0, "states": 250, "candidates": 2}])
        >>> [t.name for t in fig.data], list(fig.data[1].y)
        (['states', 'candidates'], [0, 2])
    """
    samples = [_stats_dict(h) for h in history]
    xs = [float(s.get("elapsed", 0.0)) for s in samples]
    fig = go.Figure()
    fig.add_trace(go.Scatter(name="states", x=xs, y=[int(s.get("states", 0)) for s in samples], mode="lines",
                             line=dict(color=CANDIDATE_COLOR), hovertemplate="%{x:.1f} s: %{y} states<extra></extra>"))
    fig.add_trace(go.Scatter(name="candidates", x=xs, y=[int(s.get("candidates", 0)) for s in samples],
                             mode="lines", line=dict(color="#ff7f0e", shape="hv"), yaxis="y2",
                             hovertemplate="%{x:.1f} s: %{y} candidates<extra></extra>"))
    fig.update_layout(
        title=dict(text=title or "Search progress"), template="plotly_white", height=300, autosize=True,
        margin=dict(l=60, r=60, t=50, b=40), legend=dict(orientation="h", y=-0.3),
        xaxis=dict(title="elapsed (s)", rangemode="tozero"),
        yaxis=dict(title="states visited", rangemode="tozero"),
        yaxis2=dict(title="candidates", overlaying="y", side="right", rangemode="tozero", showgrid=False,
                    tick0=0, dtick=candidate_dtick(max([int(s.get("candidates", 0)) for s in samples], default=0))),
    )
    if not samples:
        fig.add_annotation(text="No progress recorded yet", x=0.5, y=0.5, xref="paper", yref="paper",
                           showarrow=False)
    return fig


__all__ = ["latency_figure", "progress_figure", "checked_rows", "LatencyRow", "BASELINE_LABELS", "NO_GPU_TITLE"]
