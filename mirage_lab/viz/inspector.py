"""The public way to look at μGraphs in JupyterLab: the inspector, coloured by any metric, and the
side-by-side comparison of two candidates.

:func:`inspect` and :func:`compare` return objects that a notebook shows through the JupyterLab
extension (``extension/``); other front ends get SVG drawings and text. Nothing runs in the kernel
once shown: saved notebooks keep the view.

**Metrics** are numbers per kernel op, keyed by the op (its ``guid``, ``"op<guid>"``, or the op
object itself) and then by metric name::

    {"op3": {"latency_us": 31.5, "bytes": 134217728}, 4: {"latency_us": 6.2}}

Every metric with a number on at least one op is offered in the inspector's **Colour** menu
(a viridis scale, with a legend); text values show in the side panel only.

    >>> import mirage_lab as mi
    >>> from mirage_lab import examples as ex
    >>> g = ex.gqa_flashdecoding()
    >>> view = mi.inspect(g, metrics={"op3": {"latency_us": 31.5}, "op4": {"latency_us": 6.2}})
    >>> view.data["view"]["metric"], sorted(view.data["metrics"])
    ('latency_us', ['op3', 'op4'])
    >>> mi.compare(g, ex.gqa_flashdecoding(), labels=("before", "after")).labels
    ('before', 'after')
"""
from __future__ import annotations

import difflib
import json
import math
from typing import Any, Mapping, Sequence

from ..errors import MirageLabError
from ..ir.kernel_graph import KernelGraph
from ..ir.serialize import MIME_TYPE, to_dict

COMPARE_MIME_TYPE = "application/vnd.mirage-lab.mugraph-compare+json"
COMPARE_FORMAT = "mirage_lab.mugraph-compare"
COMPARE_VERSION = 1
EXPAND_LEVELS = ("kernel", "block", "thread", "all")

Metrics = Mapping[Any, Mapping[str, Any]]


def _graph_of(obj: Any, what: str) -> KernelGraph:
    """The μGraph of ``obj``: a KernelGraph, or anything holding one as ``.graph`` (OptimizedGraph)."""
    g = getattr(obj, "graph", obj)
    if not isinstance(g, KernelGraph):
        raise MirageLabError(f"{what} must be a μGraph (KernelGraph, or the result of superoptimize), "
                             f"got {type(obj).__name__}")
    return g


def _did_you_mean(word: str, choices: Sequence[str]) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def normalize_metrics(graph: KernelGraph, metrics: Metrics | None) -> dict[str, dict[str, Any]]:
    """``metrics`` checked against ``graph`` and keyed as the JSON format keys them (``"op<guid>"``).

    Raises :class:`MirageLabError` naming the bad key or value, and the op ids the graph has.

        >>> from mirage_lab import examples as ex
        >>> normalize_metrics(ex.gqa_flashdecoding(), {3: {"latency_us": 31.5}})
        {'op3': {'latency_us': 31.5}}
    """
    if metrics is None:
        return {}
    if not isinstance(metrics, Mapping):
        raise MirageLabError(f"metrics must be a dict {{op: {{name: value}}}}, e.g. {{'op3': {{'latency_us': 31.5}}}}; "
                             f"got {type(metrics).__name__}")
    ids = {op.guid for op in graph.ops}
    valid = ", ".join(f"op{i}" for i in sorted(ids))
    out: dict[str, dict[str, Any]] = {}
    for key, values in metrics.items():
        guid = _op_guid(key)
        if guid is None or guid not in ids:
            raise MirageLabError(f"metrics key {key!r} is not a kernel op of this μGraph; its ops are {valid} "
                                 "(keys may be 'op<id>', the id, or the op)")
        if not isinstance(values, Mapping):
            raise MirageLabError(f"metrics[{key!r}] must be a dict {{name: value}}, got {type(values).__name__}")
        row: dict[str, Any] = {}
        for name, v in values.items():
            if not isinstance(name, str) or not name:
                raise MirageLabError(f"metrics[{key!r}]: metric names must be non-empty strings, got {name!r}")
            if isinstance(v, bool) or not isinstance(v, (int, float, str)):
                try:
                    v = float(v)  # numpy and torch scalars
                except (TypeError, ValueError):
                    raise MirageLabError(f"metrics[{key!r}][{name!r}] must be a number or text, "
                                         f"got {type(v).__name__}") from None
            if isinstance(v, float) and not math.isfinite(v):
                raise MirageLabError(f"metrics[{key!r}][{name!r}] is {v}: only finite numbers can be coloured")
            row[name] = v
        out.setdefault(f"op{guid}", {}).update(row)
    return out


def _op_guid(key: Any) -> int | None:
    if isinstance(key, bool):
        return None
    if isinstance(key, int):
        return key
    if isinstance(key, str):
        s = key[2:] if key.startswith("op") else key
        return int(s) if s.isdigit() else None
    guid = getattr(key, "guid", None)
    return guid if isinstance(guid, int) and hasattr(key, "op_type") else None


def numeric_metric_names(metrics: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Names with a number on at least one op: what the Colour menu offers."""
    return sorted({k for row in metrics.values() for k, v in row.items()
                   if isinstance(v, (int, float)) and not isinstance(v, bool)})


def _check_summary(summary: Mapping[str, Any] | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in (summary or {}).items():
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float, str)):
            raise MirageLabError(f"summary[{k!r}] must be a number or text, got {type(v).__name__}")
        if isinstance(v, float) and not math.isfinite(v):
            v = str(v)
        out[str(k)] = v
    return out


def graph_data(graph: Any, metrics: Metrics | None = None, *, color_by: str | None = None,
               expand: str = "kernel", title: str | None = None,
               summary: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The inspector's JSON for one μGraph: the graph, its metrics and the view hints.

    ``color_by`` defaults to the only numeric metric, or ``latency_us`` when present.
    """
    g = _graph_of(graph, "graph")
    if expand not in EXPAND_LEVELS:
        raise MirageLabError(f"expand={expand!r}: use one of {EXPAND_LEVELS}{_did_you_mean(str(expand), EXPAND_LEVELS)}")
    m = normalize_metrics(g, metrics)
    names = numeric_metric_names(m)
    if color_by is None:
        color_by = "latency_us" if "latency_us" in names else (names[0] if len(names) == 1 else None)
    elif color_by not in names:
        have = f"the numeric metrics are {names}" if names else "no metrics with numbers were given"
        raise MirageLabError(f"color_by={color_by!r} is not a numeric metric of this μGraph: {have}"
                             f"{_did_you_mean(color_by, names)}")
    data = json.loads(json.dumps(to_dict(g, m or None)))
    view: dict[str, Any] = {"expand": expand}
    if color_by:
        view["metric"] = color_by
    if title:
        view["title"] = str(title)
    s = _check_summary(summary)
    if s:
        view["summary"] = s
    data["view"] = view
    return data


class Inspection:
    """One μGraph as the notebook shows it: the inspector (JupyterLab), else SVG and text.

    ``data`` is the JSON the extension reads (docs/json_format.md plus the ``view`` hints).
    """

    def __init__(self, graph: KernelGraph, data: dict[str, Any]) -> None:
        self.graph = graph
        self.data = data

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        from .mime import svg_or_none

        bundle: dict[str, Any] = {MIME_TYPE: self.data}
        svg = svg_or_none(self.graph, _drawing_level(self.data["view"]["expand"]))
        if svg is not None:
            bundle["image/svg+xml"] = svg
        bundle["text/plain"] = _summary_text(self.data) + repr(self.graph)
        return bundle

    def __repr__(self) -> str:
        metric = self.data["view"].get("metric")
        ops = len(self.data["kernel_graph"]["ops"])
        return f"Inspection({ops} kernel ops, {f'coloured by {metric}' if metric else 'coloured by node kind'})"


class Comparison:
    """Two or more candidates side by side with their measured numbers (the compare view)."""

    def __init__(self, graphs: Sequence[KernelGraph], labels: Sequence[str], data: dict[str, Any]) -> None:
        self.graphs = list(graphs)
        self.labels = tuple(labels)
        self.data = data

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        import html

        from .mime import svg_or_none

        bundle: dict[str, Any] = {COMPARE_MIME_TYPE: self.data}
        cells = []
        for label, g, c in zip(self.labels, self.graphs, self.data["candidates"]):
            svg = svg_or_none(g, _drawing_level(c["graph"]["view"]["expand"]))
            body = svg[svg.find("<svg"):] if svg else f"<pre>{html.escape(repr(g))}</pre>"
            cells.append(f'<div style="flex:1;min-width:0;overflow:auto"><b>{html.escape(label)}</b>'
                         f"<pre>{html.escape(_summary_text(c['graph']))}</pre>{body}</div>")
        bundle["text/html"] = f'<div style="display:flex;gap:12px">{"".join(cells)}</div>'
        bundle["text/plain"] = "\n\n".join(f"== {label}\n{_summary_text(c['graph'])}{g!r}" for label, g, c in
                                           zip(self.labels, self.graphs, self.data["candidates"]))
        return bundle

    def __repr__(self) -> str:
        return f"Comparison({', '.join(self.labels)})"


def _drawing_level(expand: str) -> str:
    return {"kernel": "kernel", "block": "block"}.get(expand, "all")


def _summary_text(data: dict[str, Any]) -> str:
    s = data.get("view", {}).get("summary") or {}
    return "".join(f"{k}: {v}\n" for k, v in s.items())


def inspect(graph: Any, metrics: Metrics | Sequence[Metrics | None] | None = None, *, color_by: str | None = None,
            expand: str = "kernel", title: str | None = None,
            summary: Mapping[str, Any] | None = None) -> Inspection | Comparison:
    """Show ``graph`` in the inspector, coloured by a metric when ``metrics`` are given.

    ``graph``: a KernelGraph or ``superoptimize``'s result (which brings its tuner measurements:
    see :func:`tuned_metrics`); a list of two or more graphs gives :func:`compare` (``metrics`` then
    a list too). ``metrics``: ``{op: {name: number}}`` (see the module doc). ``color_by``: the
    metric the nodes are coloured by at first (the Colour menu changes it). ``expand``: how far
    the graph is open at first: ``"kernel"``, ``"block"``, ``"thread"`` or ``"all"``.
    ``summary``: graph-level numbers shown over the graph (e.g. ``{"latency_us": 18.9}``).

        >>> import mirage_lab as mi
        >>> from mirage_lab import examples as ex
        >>> mi.inspect(ex.rms_norm_linear_fused(), {"op2": {"latency_us": 9.5}}, expand="block")
        Inspection(3 kernel ops, coloured by latency_us)
    """
    if isinstance(graph, (list, tuple)):
        if metrics is not None and not isinstance(metrics, (list, tuple)):
            raise MirageLabError("inspect([a, b], metrics=...): give one metrics dict per graph, as a list")
        ms = list(metrics) if metrics is not None else [None] * len(graph)
        return compare(*graph, metrics=ms, color_by=color_by, expand=expand)
    if isinstance(metrics, (list, tuple)):
        raise MirageLabError("metrics must be a dict {op: {name: value}} for one graph (a list is for inspect([a, b]))")
    g = _graph_of(graph, "graph")
    tuned_m, tuned_s, tuned_t = tuned_metrics(graph) if g is not graph else ({}, {}, None)
    m = _merge(tuned_m, normalize_metrics(g, metrics))
    s = {**tuned_s, **dict(summary or {})}
    return Inspection(g, graph_data(g, m, color_by=color_by, expand=expand, title=title or tuned_t, summary=s))


def compare(*graphs: Any, metrics: Sequence[Metrics | None] | None = None, labels: Sequence[str] | None = None,
            summaries: Sequence[Mapping[str, Any] | None] | None = None, color_by: str | None = None,
            expand: str = "kernel", metrics_a: Metrics | None = None,
            metrics_b: Metrics | None = None) -> Comparison:
    """Two (or more) candidates side by side, each in an inspector, under a table of their numbers.

    ``metrics``: one per-op metrics dict per graph (or ``metrics_a``/``metrics_b`` for two);
    both sides are coloured on one shared scale. ``summaries``: graph-level numbers per graph,
    added to what is known anyway (op counts, the sum of each per-op metric, and for a
    ``superoptimize`` result its measured latency). ``labels`` default to ``A``, ``B``, ...

        >>> import mirage_lab as mi
        >>> from mirage_lab import examples as ex
        >>> c = mi.compare(ex.rms_norm_linear_fused(grid=8), ex.rms_norm_linear_fused(grid=16),
        ...                metrics_a={"op2": {"latency_us": 12.0}}, metrics_b={"op2": {"latency_us": 9.0}})
        >>> [x["graph"]["view"]["summary"]["latency_us (sum)"] for x in c.data["candidates"]]
        [12.0, 9.0]
    """
    if len(graphs) < 2:
        raise MirageLabError(f"compare needs at least two graphs, got {len(graphs)}")
    if metrics is not None and (metrics_a is not None or metrics_b is not None):
        raise MirageLabError("give metrics=[...] or metrics_a/metrics_b, not both")
    if metrics is None:
        metrics = [metrics_a, metrics_b] + [None] * (len(graphs) - 2)
    for name, seq in (("metrics", metrics), ("labels", labels), ("summaries", summaries)):
        if seq is not None and len(seq) != len(graphs):
            raise MirageLabError(f"{name} has {len(seq)} entries for {len(graphs)} graphs")
    labels = tuple(str(x) for x in labels) if labels is not None else tuple(chr(65 + i) for i in range(len(graphs)))
    if len(set(labels)) != len(labels):
        raise MirageLabError(f"labels must differ, got {labels}")
    summaries = summaries or [None] * len(graphs)
    gs, candidates = [], []
    for i, (obj, m, s) in enumerate(zip(graphs, metrics, summaries)):
        g = _graph_of(obj, f"graph {labels[i]}")
        tuned_m, tuned_s, _ = tuned_metrics(obj) if g is not obj else ({}, {}, None)
        mm = _merge(tuned_m, normalize_metrics(g, m))
        summ = {**_structure_summary(g, mm), **tuned_s, **dict(s or {})}
        candidates.append({"label": labels[i], "graph": graph_data(g, mm, expand=expand, summary=summ)})
        gs.append(g)
    names = sorted({n for c in candidates for n in numeric_metric_names(c["graph"].get("metrics", {}))})
    if color_by is None:
        color_by = "latency_us" if "latency_us" in names else (names[0] if len(names) == 1 else None)
    elif color_by not in names:
        raise MirageLabError(f"color_by={color_by!r} is not a numeric metric of these graphs: {names}"
                             f"{_did_you_mean(color_by, names)}")
    for c in candidates:
        view = c["graph"]["view"]
        view.pop("metric", None)
        if color_by:
            view["metric"] = color_by
    return Comparison(gs, labels, {"format": COMPARE_FORMAT, "version": COMPARE_VERSION, "candidates": candidates})


def _merge(a: dict[str, dict[str, Any]], b: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    out = {k: dict(v) for k, v in a.items()}
    for k, v in b.items():
        out.setdefault(k, {}).update(v)
    return out


def _structure_summary(g: KernelGraph, metrics: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """What every candidate can be compared on: its op counts and each per-op metric's sum."""
    ops = [op for op in g.ops if op.op_type != "input"]
    out: dict[str, Any] = {"kernel ops": len(ops), "customized ops": sum(op.op_type == "customized" for op in ops)}
    for name in numeric_metric_names(metrics):
        vals = [row[name] for row in metrics.values() if isinstance(row.get(name), (int, float))]
        out[f"{name} (sum)"] = round(sum(vals), 6)
    return out


def op_metrics(graph: KernelGraph) -> dict[str, dict[str, float]]:
    """Per kernel op, numbers read off the μGraph itself: ``hbm_bytes`` (its inputs and outputs in
    device memory) and ``flops`` (2·m·n·k per matmul, over every block and for-loop iteration).

        >>> from mirage_lab import examples as ex
        >>> op_metrics(ex.rms_norm_linear_fused(16, 4096, 4096))["op2"]["flops"] == 2 * 16 * 4096 * 4096
        True
    """
    out: dict[str, dict[str, float]] = {}
    for op in graph.ops:
        if op.op_type == "input":
            continue
        row: dict[str, float] = {"hbm_bytes": float(sum(t.nbytes() for t in (*op.inputs, *op.outputs)))}
        flops = 0
        if op.op_type == "matmul":
            a, b = op.inputs
            flops = 2 * math.prod(a.dims) * b.dims[-1]
        elif op.block_graph is not None:
            bg = op.block_graph
            for bop in bg.ops:
                if bop.op_type == "matmul":
                    a, b = bop.inputs
                    flops += 2 * math.prod(a.dims) * b.dims[-1] * math.prod(bg.grid_dim) * bg.forloop_range
        row["flops"] = float(flops)
        out[f"op{op.guid}"] = row
    return out


def tuned_metrics(result: Any) -> tuple[dict[str, dict[str, Any]], dict[str, Any], str | None]:
    """``(per-op metrics, summary, title)`` for ``superoptimize``'s result, from the tuner's report.

    The tuner times the whole chosen kernel module (CUDA-graph replay): that time is the
    summary's ``latency_us`` with its ``p10_us``/``p90_us``, and it becomes the op's own
    ``latency_us`` when the graph launches a single kernel (then it is that kernel's time; with
    several kernels no per-kernel time was measured, and none is made up). Every op also gets
    :func:`op_metrics`. Under the CUDA simulator nothing is timed; the summary says so.
    """
    g = _graph_of(result, "result")
    metrics: dict[str, dict[str, Any]] = op_metrics(g)
    summary: dict[str, Any] = {}
    report = getattr(result, "report", None)
    best = getattr(report, "best", None)
    options = getattr(result, "options", None)
    if options is not None and hasattr(options, "tag"):
        summary["options"] = options.tag()
    if best is not None:
        summary["threads"] = best.variant.threads
        summary["estimate_us"] = round(best.estimate.us, 2)
        if best.rel_err is not None:
            summary["rel_err"] = float(best.rel_err)
    timing = best.timings.get("cuda_graph") if best is not None else None
    title = None
    if timing is not None and getattr(report, "timed", False):
        summary.update({"latency_us": round(timing.median_us, 3), "p10_us": round(timing.p10_us, 3),
                        "p90_us": round(timing.p90_us, 3)})
        if getattr(report, "device", ""):
            summary["device"] = report.device
        launched = [op for op in g.ops if op.op_type != "input"]
        if len(launched) == 1:
            metrics[f"op{launched[0].guid}"]["latency_us"] = round(timing.median_us, 3)
        title = f"superoptimized · {timing.median_us:.3g} µs measured"
    elif report is not None:
        summary["latency_us"] = "not timed (CUDA simulator: checked only)"
        title = "superoptimized · not timed"
    return metrics, summary, title
