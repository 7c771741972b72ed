"""Self-contained HTML reports: a program, its candidate μGraphs, their checks and timings.

A report is plain data in, one HTML file out (inline CSS and SVG, no scripts, nothing
fetched), so it opens anywhere and can be attached to an issue. The parts are independent
so later stages plug in without touching this module's callers:

* :class:`CandidateSection`: one μGraph with its checks; the demo adds a hand-written one,
  the search will add one per ``CandidateFound`` event (``info`` carries its stats).
* :class:`MeasurementsSection`: a latency table from a GPU run (optional).

    >>> from mirage_lab.examples import rms_norm_linear_program, rms_norm_linear_fused
    >>> prog = ProgramSection("RMSNorm + Linear", rms_norm_linear_program())
    >>> cand = CandidateSection("hand-written", rms_norm_linear_fused(),
    ...                         checks=[CheckResult("float32 vs program", 2.4e-7, 1e-4)])
    >>> html_text = render_report("demo", prog, [cand])     # doctest: +SKIP
    >>> write_report("reports/demo.html", "demo", prog, [cand])  # doctest: +SKIP
"""
from __future__ import annotations

import datetime as _dt
import html
import math
import platform
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from .errors import GraphvizMissingError
from .ir.kernel_graph import KernelGraph
from .runtime.latency import LatencyRow

DEFAULT_LEVELS = ("kernel", "block", "thread")


@dataclass
class CheckResult:
    """One numerical check: ``rel_err`` = ‖out − ref‖/‖ref‖ must stay below ``tol`` (NaN never passes)."""

    name: str
    rel_err: float
    tol: float
    detail: str = ""

    @property
    def passed(self) -> bool:
        return math.isfinite(self.rel_err) and self.rel_err <= self.tol


@dataclass
class ProgramSection:
    """The program the user wrote: its source text (optional) and its kernel graph."""

    title: str
    graph: KernelGraph
    source: str = ""
    description: str = ""


@dataclass
class CandidateSection:
    """A candidate μGraph for the program, with its checks and (optionally) search info and metrics.

    ``metrics`` maps kernel op ids (``"op2"``) to short strings shown in the drawings;
    ``info`` is free-form key → value shown as a small table (e.g. search statistics).
    """

    title: str
    graph: KernelGraph
    description: str = ""
    checks: list[CheckResult] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] | None = None
    levels: Sequence[str] = DEFAULT_LEVELS


@dataclass
class MeasurementsSection:
    """Timings from a GPU run: one row per contender, columns as given (e.g. median µs, ratio to floor).

    :meth:`from_latency_rows` makes the table from the runtime's typed ``LatencyRow`` records.
    """

    device: str
    columns: list[str]
    rows: list[list[Any]]
    notes: str = ""
    title: str = "Measurements"

    @classmethod
    def from_latency_rows(cls, rows: Sequence[LatencyRow], *, device: str, floor_us: float | None = None,
                          failures: Sequence[tuple[str, str]] = (), notes: str = "",
                          title: str = "Measurements") -> MeasurementsSection:
        """One line per row (candidates, then baselines), then ``failures`` (label, error), then the floor.

            >>> m = MeasurementsSection.from_latency_rows([LatencyRow("torch eager", "baseline", 41.0)],
            ...                                           device="NVIDIA H100", floor_us=11.3)
            >>> m.rows
            [['torch eager', 'baseline', 41.0, '—', 'cuda graph', '—'], ['memory floor', 'floor', 11.3, '—', '—', '—']]
        """
        from .runtime.latency import CANDIDATE, check_rows

        ok = check_rows(rows, "MeasurementsSection.from_latency_rows")
        ok = [r for r in ok if r.kind == CANDIDATE] + [r for r in ok if r.kind != CANDIDATE]
        table: list[list[Any]] = [
            [r.label, r.kind, round(r.median_us, 2), f"{r.p10_us:.3g}–{r.p90_us:.3g}" if r.spread else "—",
             r.mode.replace("_", " "), r.options or "—"] for r in ok]
        table += [[label, "failed", error, "—", "—", "—"] for label, error in failures]
        if floor_us is not None:
            table.append(["memory floor", "floor", round(floor_us, 2), "—", "—", "—"])
        return cls(device, ["contender", "kind", "median µs", "p10–p90 µs", "launch", "lowering"], table, notes, title)


# --------------------------------------------------------------------------- rendering helpers
_CSS = """
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:2em auto;max-width:1100px;color:#222;padding:0 1em}
h1{font-size:1.6em;margin-bottom:.2em}h2{border-bottom:2px solid #1565c0;padding-bottom:.2em;margin-top:2em}
h3{margin-bottom:.3em}.meta{color:#666;font-size:.9em}
pre{background:#f6f8fa;border:1px solid #e1e4e8;border-radius:4px;padding:.8em;overflow-x:auto;font-size:.85em;line-height:1.35}
table{border-collapse:collapse;margin:.6em 0}th,td{border:1px solid #d0d7de;padding:.3em .7em;text-align:left;font-size:.9em}
th{background:#f0f4f8}td.num{text-align:right;font-family:ui-monospace,Menlo,monospace}
.ok{color:#1a7f37;font-weight:600}.fail{color:#cf222e;font-weight:600}
.badge{display:inline-block;border-radius:3px;padding:.1em .5em;font-size:.85em;color:#fff}
.badge.ok{background:#1a7f37;color:#fff}.badge.fail{background:#cf222e;color:#fff}
figure{margin:1em 0;border:1px solid #e1e4e8;border-radius:4px;padding:.6em;background:#fff}
figure svg{max-width:100%;height:auto}figcaption{color:#555;font-size:.9em;margin-bottom:.4em}
.figs{display:flex;flex-wrap:wrap;gap:1em;align-items:flex-start}.figs figure{flex:1 1 520px;text-align:center}
.figs figure.kernel{flex:0 0 auto}figcaption{text-align:left}
.note{background:#fff8c5;border:1px solid #d4a72c;border-radius:4px;padding:.5em .8em}
details summary{cursor:pointer;color:#1565c0}
"""

_LEVEL_CAPTION = {
    "kernel": "Kernel level: device-memory tensors and kernels",
    "block": "Block level: each customized kernel's thread-block graph (imap/omap/fmap, for-loop, accumulators)",
    "thread": "Thread level: fusion chains run in registers",
    "all": "Block graphs with their thread-level fusion chains",
}


def _e(x: Any) -> str:
    return html.escape(str(x), quote=True)


def _fmt_err(x: float) -> str:
    return "NaN" if not math.isfinite(x) else f"{x:.2e}"


def _svg(graph: KernelGraph, level: str, id_prefix: str, metrics: dict[str, Any] | None) -> str:
    """The drawing as inline SVG (its XML prolog dropped and ids made unique within the page)."""
    from .viz import draw, render_svg

    try:
        svg = render_svg(draw(graph, level, metrics=metrics))
    except GraphvizMissingError as e:
        return f'<p class="note">{_e(e)}</p>'
    svg = svg[svg.index("<svg"):]
    return re.sub(r'\bid="', f'id="{id_prefix}', svg)


def _figures(graph: KernelGraph, levels: Sequence[str], key: str, metrics: dict[str, Any] | None) -> str:
    parts = []
    for level in levels:
        parts.append(f'<figure class="{_e(level)}"><figcaption>{_e(_LEVEL_CAPTION.get(level, level))}</figcaption>'
                     f'{_svg(graph, level, f"{key}-{level}-", metrics)}</figure>')
    # the kernel level is small: it keeps its natural width, the block and thread levels share the rest
    return '<div class="figs">' + "".join(parts) + "</div>"


def _checks_table(rows: list[tuple[str, CheckResult]]) -> str:
    if not rows:
        return "<p>No checks were run.</p>"
    out = ["<table><tr><th>candidate</th><th>check</th><th>rel. error</th><th>tolerance</th><th>result</th></tr>"]
    for cand, c in rows:
        verdict = '<span class="ok">pass</span>' if c.passed else '<span class="fail">FAIL</span>'
        out.append(f"<tr><td>{_e(cand)}</td><td>{_e(c.name)}{'<br><small>' + _e(c.detail) + '</small>' if c.detail else ''}"
                   f'</td><td class="num">{_fmt_err(c.rel_err)}</td><td class="num">{c.tol:.0e}</td><td>{verdict}</td></tr>')
    out.append("</table>")
    return "".join(out)


def _kv_table(d: dict[str, Any]) -> str:
    rows = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in d.items())
    return f"<table>{rows}</table>"


def _measurements(m: MeasurementsSection | None) -> str:
    if m is None:
        return ('<h2>Measurements</h2><p class="note">No timings in this report: it was made without a GPU '
                "timing stage. Correctness checks above ran with the reference interpreter on the CPU.</p>")
    head = "".join(f"<th>{_e(c)}</th>" for c in m.columns)
    body = "".join("<tr>" + "".join(
        f'<td class="num">{v:.4g}</td>' if isinstance(v, float) else f"<td>{_e(v)}</td>" for v in row) + "</tr>"
        for row in m.rows)
    notes = f"<p>{_e(m.notes)}</p>" if m.notes else ""
    return f"<h2>{_e(m.title)}</h2><p class=\"meta\">device: {_e(m.device)}</p><table><tr>{head}</tr>{body}</table>{notes}"


def _environment() -> dict[str, str]:
    from . import __version__

    env = {"mirage_lab": __version__, "python": platform.python_version(), "machine": platform.machine()}
    try:
        import torch

        env["torch"] = torch.__version__
        env["device"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "CPU only"
    except Exception:  # pragma: no cover - torch is a dependency; a broken CUDA still gives a report
        env["device"] = "unknown"
    return env


# --------------------------------------------------------------------------- public API
def render_report(title: str, program: ProgramSection, candidates: Sequence[CandidateSection],
                  measurements: MeasurementsSection | None = None, *, subtitle: str = "") -> str:
    """The report as one HTML string (inline CSS and SVG; no scripts, no external resources)."""
    when = _dt.datetime.now().strftime("%Y-%m-%d %H:%M")
    env = _environment()
    all_checks = [(c.title, chk) for c in candidates for chk in c.checks]
    n_fail = sum(not chk.passed for _, chk in all_checks)
    verdict = (f'<span class="badge ok">all {len(all_checks)} checks pass</span>' if all_checks and not n_fail
               else f'<span class="badge fail">{n_fail} of {len(all_checks)} checks fail</span>' if n_fail
               else '<span class="badge fail">no checks</span>')
    out = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{_e(title)}</h1>",
        f'<p class="meta">{_e(subtitle + " · " if subtitle else "")}{_e(when)} · '
        + " · ".join(f"{_e(k)} {_e(v)}" for k, v in env.items()) + "</p>",
        f"<p>{verdict}</p>",
        "<h2>Check results</h2>", _checks_table(all_checks),
        f"<h2>The program: {_e(program.title)}</h2>",
    ]
    if program.description:
        out.append(f"<p>{_e(program.description)}</p>")
    if program.source:
        out.append(f"<pre><code>{_e(program.source)}</code></pre>")
    out.append(f"<details><summary>The program's kernel graph, printed</summary><pre>{_e(repr(program.graph))}</pre></details>")
    out.append(_figures(program.graph, ("kernel",), "program", None))
    for i, c in enumerate(candidates):
        ok = all(chk.passed for chk in c.checks) and c.checks
        badge = '<span class="badge ok">checked</span>' if ok else '<span class="badge fail">check failed</span>' \
            if c.checks else ""
        out.append(f"<h2>Candidate {i + 1}: {_e(c.title)} {badge}</h2>")
        if c.description:
            out.append(f"<p>{_e(c.description)}</p>")
        if c.info:
            out.append(_kv_table(c.info))
        out.append(_checks_table([(c.title, chk) for chk in c.checks]))
        out.append(f"<h3>μGraph</h3><pre>{_e(repr(c.graph))}</pre>")
        out.append(f'<p class="meta">content hash <code>{_e(c.graph.content_hash())}</code></p>')
        out.append(_figures(c.graph, c.levels, f"c{i}", c.metrics))
        out.append(f"<details><summary>μGraph JSON (load with <code>mi.from_json</code>)</summary>"
                   f"<pre>{_e(c.graph.to_json(indent=1))}</pre></details>")
    out.append(_measurements(measurements))
    out.append("</body></html>")
    return "\n".join(out)


def write_report(path: str | Path, title: str, program: ProgramSection, candidates: Sequence[CandidateSection],
                 measurements: MeasurementsSection | None = None, *, subtitle: str = "") -> Path:
    """Write :func:`render_report`'s HTML to ``path`` (parent folders are created) and return the path."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_suffix(p.suffix + ".tmp")
    tmp.write_text(render_report(title, program, candidates, measurements, subtitle=subtitle), encoding="utf-8")
    tmp.replace(p)
    return p
