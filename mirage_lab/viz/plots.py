"""Plotly figures of a search and its measurements: one pure function per plot, no hidden state
(the pattern of Optuna's ``optuna.visualization``). Usable outside the widget.

* :func:`latency_figure`: each candidate's measured latency beside the torch baselines
  (eager, CUDA graph, torch.compile), with the memory floor drawn as a line. Without
  measurements (a CPU-only machine) the figure says so instead of showing empty axes.
* :func:`progress_figure`: states visited and candidates found over the search's time.

    >>> from mirage_lab.viz.plots import latency_figure, progress_figure
    >>> fig = latency_figure({"candidate 0": 14.1, "torch_eager": 40.2}, floor_us=11.3)
    >>> [t.name for t in fig.data]
    ['candidates', 'baselines']
    >>> "No GPU" in latency_figure({}).layout.title.text
    True
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

import plotly.graph_objects as go

#: What the runtime's profiler calls its baselines, and how the plots label them.
BASELINE_LABELS = {
    "torch_eager": "torch eager",
    "torch_cuda_graph": "torch + CUDA graph",
    "torch_compile": "torch.compile",
    "torch_compile_cuda_graph": "torch.compile + CUDA graph",
}
NO_GPU_TITLE = "No GPU: latencies are measured on a CUDA machine"
CANDIDATE_COLOR = "#1f77b4"
BASELINE_COLOR = "#7f7f7f"
FLOOR_COLOR = "#d62728"


@dataclass(frozen=True)
class LatencyRow:
    """One bar of the latency plot (microseconds; ``p10``/``p90`` when the profiler gave them)."""

    name: str
    kind: str                 # "candidate" | "baseline"
    median_us: float
    p10_us: float | None = None
    p90_us: float | None = None


def _is_baseline(name: str) -> bool:
    return name in BASELINE_LABELS or name.startswith("torch")


def _row(name: str, value: Any, mode: str) -> LatencyRow | None:
    """A row from a number, a ``Timing``, a ``Timing.as_dict()`` or a per-mode dict of timings."""
    if isinstance(value, Mapping) and "median_us" not in value:
        # profile_kernel's result: {"cuda_graph": Timing, "eager": Timing, ...}
        for m in (mode, "cuda_graph", "eager"):
            if m in value:
                return _row(name, value[m], mode)
        return None
    if isinstance(value, Mapping):
        med, p10, p90 = value.get("median_us"), value.get("p10_us"), value.get("p90_us")
    elif hasattr(value, "median_us"):
        med, p10, p90 = value.median_us, getattr(value, "p10_us", None), getattr(value, "p90_us", None)
    else:
        med, p10, p90 = value, None, None
    try:
        med = float(med)
    except (TypeError, ValueError):
        return None
    if not math.isfinite(med):  # an untimed or failed candidate (Candidate.median_us is inf)
        return None
    kind = "baseline" if _is_baseline(name) else "candidate"
    label = BASELINE_LABELS.get(name, name)
    return LatencyRow(label, kind, med, None if p10 is None else float(p10), None if p90 is None else float(p90))


def latency_rows(measurements: Any, mode: str = "cuda_graph") -> list[LatencyRow]:
    """Normalise the structures the runtime returns into rows, candidates first, then baselines.

    Accepts a plain ``{name: median_us}``; ``{name: Timing}`` (``profile_baselines``);
    ``{name: {mode: Timing}}`` (``profile_kernel`` per candidate); a ``Selection``
    (``select_fastest``); anything with a ``.measurements`` mapping (``SearchResult``).
    Host-side call times (``*python_call*``) are left out: they measure Python, not the GPU.

        >>> [r.name for r in latency_rows({"torch_compile": 20.0, "c1": 13.0, "torch_python_call": 60.0})]
        ['c1', 'torch.compile']
    """
    if measurements is None:
        return []
    if hasattr(measurements, "candidates") and hasattr(measurements, "best"):  # runtime.profile.Selection
        cands = list(measurements.candidates)
        graph_no: dict[int, int] = {}
        for c in cands:
            graph_no.setdefault(id(c.graph), len(graph_no))
        several_options = len(graph_no) < len(cands)  # select_fastest(..., options=[...]) times each graph twice+
        items: list[tuple[str, Any]] = [
            (f"candidate {graph_no[id(c.graph)]}" + (f" [{c.options.tag()}]" if several_options else ""), c.timings)
            for c in cands if getattr(c, "error", None) is None and c.timings]
    elif not isinstance(measurements, Mapping) and isinstance(getattr(measurements, "measurements", None), Mapping):
        return latency_rows(measurements.measurements, mode)
    elif isinstance(measurements, Mapping):
        items = [(str(k), v) for k, v in measurements.items()]
    else:
        raise TypeError(f"latency_figure: cannot read measurements of type {type(measurements).__name__}; "
                        "pass {name: median_us}, profile results or a Selection")
    rows = [r for k, v in items if "python_call" not in k for r in [_row(k, v, mode)] if r is not None]
    return [r for r in rows if r.kind == "candidate"] + [r for r in rows if r.kind == "baseline"]


def latency_figure(measurements: Any = None, floor_us: float | None = None, *, mode: str = "cuda_graph",
                   title: str | None = None) -> go.Figure:
    """Horizontal bars of median latency (p10–p90 whiskers), candidates and baselines, floor as a line.

    ``floor_us``: the memory floor (``mi.runtime.floor_us(program)``), drawn as a dashed
    vertical line. With no measurements the figure's title says that latencies need a GPU.

        >>> fig = latency_figure({"candidate 0": 12.9, "candidate 1": 15.0, "torch_eager": 41.0,
        ...                       "torch_cuda_graph": 30.0, "torch_compile": 25.0}, floor_us=11.3)
        >>> list(fig.data[0].y), list(fig.data[1].y)
        (['candidate 0', 'candidate 1'], ['torch eager', 'torch + CUDA graph', 'torch.compile'])
    """
    rows = latency_rows(measurements, mode)
    fig = go.Figure()
    if not rows:
        text = ("Search and draw work on the CPU; running and timing the kernels needs a CUDA GPU.<br>"
                "On a GPU machine: <code>mi.runtime.select_fastest(candidates, inputs)</code> and "
                "<code>mi.runtime.profile_baselines(program, inputs)</code>.")
        if floor_us is not None:
            text += f"<br>Memory floor of this program: {floor_us:.3g} µs."
        fig.update_layout(
            title=dict(text=NO_GPU_TITLE), height=260, template="plotly_white",
            xaxis=dict(visible=False), yaxis=dict(visible=False),
            annotations=[dict(text=text, x=0.5, y=0.5, xref="paper", yref="paper", showarrow=False,
                              font=dict(size=13))],
        )
        return fig

    def bars(kind: str, color: str, name: str) -> None:
        sel = [r for r in rows if r.kind == kind]
        if not sel:
            return
        has_err = all(r.p10_us is not None and r.p90_us is not None for r in sel)
        fig.add_trace(go.Bar(
            name=name, orientation="h", marker_color=color,
            x=[r.median_us for r in sel], y=[r.name for r in sel],
            error_x=dict(type="data", symmetric=False, array=[r.p90_us - r.median_us for r in sel],
                         arrayminus=[r.median_us - r.p10_us for r in sel]) if has_err else None,
            text=[f"{r.median_us:.3g} µs" for r in sel], textposition="auto",
            hovertemplate="%{y}: %{x:.3g} µs<extra>" + name + "</extra>",
        ))

    bars("candidate", CANDIDATE_COLOR, "candidates")
    bars("baseline", BASELINE_COLOR, "baselines")
    if floor_us is not None:
        fig.add_vline(x=floor_us, line=dict(color=FLOOR_COLOR, dash="dash"),
                      annotation_text=f"memory floor {floor_us:.3g} µs", annotation_position="top right")
    fig.update_layout(
        title=dict(text=title or f"Latency per call ({mode.replace('_', ' ')}, median, p10–p90)"),
        xaxis_title="µs (lower is better)", template="plotly_white", barmode="group", bargap=0.25,
        height=max(260, 90 + 28 * len(rows)), legend=dict(orientation="h", y=-0.2),
        # Bars read top to bottom in the order given.
        yaxis=dict(autorange="reversed", categoryorder="array", categoryarray=[r.name for r in rows]),
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


__all__ = ["latency_figure", "progress_figure", "latency_rows", "LatencyRow", "BASELINE_LABELS", "NO_GPU_TITLE"]
