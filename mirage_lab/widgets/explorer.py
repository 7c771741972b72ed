"""The search explorer: a live notebook view of a running μGraph search.

The search runs in a background thread (:func:`mirage_lab.search.search`); its events
update plain Python state at once, and the widgets are refreshed from that state at most
every ``refresh_interval`` seconds, inside ``hold_sync()`` (DESIGN.md: set traits from the
background thread, never print, coalesce). Clicks run on the kernel's main thread; one
lock keeps the two from interleaving widget updates.

    >>> import mirage_lab as mi
    >>> from mirage_lab import examples as ex
    >>> w = mi.lab.explore(ex.rms_norm_linear_program(4, 256, 256), workers=1, max_kernel_ops=3)
    >>> w.wait(120)
    True
    >>> w.state, len(w.candidates) > 0, w.selected
    ('finished', True, 0)
    >>> "<svg" in w.detail_svg
    True
"""
from __future__ import annotations

import html
import re
import threading
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import ipywidgets as W

from ..ir.kernel_graph import KernelGraph
from ..search.events import CandidateFound, Finished, Progress, SearchError, SearchStats
from ..viz import LEVELS
from ..viz.plots import candidate_dtick
from . import detail, progress
from .measure import gpu_available
from .records import CandidateRecord
from .table import CandidateTable

STATES = ("idle", "running", "finished", "stopped", "error")
_MAX_HISTORY = 4000
PLOT_WIDTH = 520  # px: FigureWidget does not follow its container's width; this fits beside the detail pane


def _sample(stats: SearchStats, candidates: int) -> dict[str, Any]:
    d = stats.as_dict()
    d["candidates"] = max(candidates, d.get("candidates", 0))
    return d


class SearchExplorer(W.VBox):
    """Runs ``search(program, config, **settings)`` in the background and shows it live.

    State for code and tests: :attr:`stats`, :attr:`history`, :attr:`candidates`,
    :attr:`selected`, :attr:`level`, :attr:`detail_svg`, :attr:`detail_code`,
    :attr:`verification`, :attr:`measurements`, :attr:`state`, :attr:`errors`, :attr:`result`.
    Actions: :meth:`start`, :meth:`stop`, :meth:`wait`, :meth:`select`, :meth:`select_best`,
    :meth:`set_level`, :meth:`export`, :meth:`measure`, :meth:`add_measurements`.
    """

    def __init__(self, program: KernelGraph, config: str | None = None, *, workers: int | None = None,
                 executor: Any = None, checkpoint: Any = None, refresh_interval: float = 0.25,
                 level: str = "block", title: str | None = None, autostart: bool = True,
                 plots: bool = True, **settings: Any) -> None:
        from ..search.runner import CancelToken, check_searchable

        check_searchable(program)  # a bad program fails here, in the caller's cell, not in a thread
        if level not in LEVELS:
            raise ValueError(f"level={level!r}: use one of {LEVELS}")
        self.program = program
        self.config = config
        self.settings = dict(settings)
        self.refresh_interval = float(refresh_interval)
        self._search_kw = {"workers": workers, "executor": executor, "checkpoint": checkpoint}
        self._cancel = CancelToken()
        self._lock = threading.RLock()       # widget updates: search thread vs clicks
        self._thread: threading.Thread | None = None
        self._done = threading.Event()
        self._last_flush = 0.0
        self._shown_candidates = -1
        self._pending_select: int | None = None
        self._final: Finished | None = None
        self._svg_cache: dict[tuple[int, str], tuple[str | None, str]] = {}
        self._code_cache: dict[int, tuple[str, str]] = {}
        self._verify_events: dict[int, threading.Event] = {}
        self._verify_lock = threading.Lock()
        self._measure_thread: threading.Thread | None = None

        # ---- public state
        self.stats = SearchStats()
        self.history: list[dict[str, Any]] = []
        self.candidates: list[CandidateRecord] = []
        self.selected: int | None = None
        self.level = level
        self.detail_svg: str | None = None
        self.detail_code: str = ""
        self.detail_code_origin: str = ""
        self.verification: dict[int, Any] = {}
        self.measurements: dict[str, Any] = {}
        self.state = "idle"
        self.errors: list[str] = []
        self.stopped_in: float | None = None

        self._build(title, plots)
        if autostart:
            self.start()

    # ================================================================== layout
    def _build(self, title: str | None, plots: bool) -> None:
        ins = ", ".join(f"{t.dtype.name}{list(t.dims)}" for t in self.program.inputs)
        cfg = f"config={self.config!r}" if self.config else "default config"
        extra = ", ".join(f"{k}={v!r}" for k, v in self.settings.items())
        self.title = W.HTML(f"<b>{html.escape(title or 'μGraph search')}</b> · inputs {html.escape(ins)} · "
                            f"{html.escape(cfg)}{', ' + html.escape(extra) if extra else ''}")
        self.status = W.HTML()
        self.progress_html = W.HTML()
        self.subtrees = W.IntProgress(value=0, min=0, max=1, description="subtrees", bar_style="info",
                                      layout=W.Layout(width="320px"))
        self.subtrees_label = W.Label("0 / ?")
        self.stop_button = W.Button(description="Stop", icon="stop", button_style="danger",
                                    tooltip="cancel the search; the candidates found so far are kept")
        self.stop_button.on_click(lambda _: self.stop(timeout=0))
        has_gpu = gpu_available()
        self.measure_button = W.Button(description="Measure on GPU", icon="tachometer", disabled=not has_gpu,
                                       tooltip="time torch baselines and every candidate" if has_gpu else
                                       "No GPU: latencies are measured on a CUDA machine")
        self.measure_button.on_click(lambda _: self.measure())
        self.export_path = W.Text(value="", description="module", placeholder="path of the module to write",
                                  layout=W.Layout(width="420px"))
        self.export_button = W.Button(description="Export", icon="download", disabled=True,
                                      tooltip="write the selected candidate as a standalone Python module")
        self.export_button.on_click(lambda _: self._export_clicked())
        self.message = W.HTML()

        self.table = CandidateTable()
        self.table.on_select(self.select)

        self.detail_title = W.HTML("<i>select a candidate</i>")
        self.level_buttons = W.ToggleButtons(options=list(LEVELS), value=self.level, description="level",
                                             style={"button_width": "70px"})
        self.level_buttons.observe(lambda ch: self.set_level(ch["new"]), names="value")
        self.drawing = W.HTML()
        self.drawing.add_class("mlab-drawing-pane")
        self.code_view = W.HTML()
        self.text_view = W.HTML()
        self.tabs = W.Tab(children=[self.drawing, self.code_view, self.text_view])
        for i, name in enumerate(("Drawing", "Generated code", "μGraph")):
            self.tabs.set_title(i, name)
        self.verify_html = W.HTML()
        detail_box = W.VBox([self.detail_title, self.verify_html, self.level_buttons, self.tabs],
                            layout=W.Layout(width="55%", min_width="360px"))
        detail_box.add_class("mlab-detail")

        self.figure: Any = None
        self.latency_figure_widget: Any = None
        plot_row: list[W.Widget] = []
        if plots:
            self.plot_choice = W.ToggleButtons(options=["progress", "latency"], value="progress", description="plot",
                                               style={"button_width": "90px"})
            self.plot_choice.observe(lambda ch: self._show_plot(ch["new"]), names="value")
            self.plot_box = W.Box(layout=W.Layout(width="100%"))
            try:
                import plotly.graph_objects as go

                from ..viz.plots import progress_figure

                self.figure = go.FigureWidget(progress_figure([]).update_layout(width=PLOT_WIDTH))
                self.plot_box.children = (self.figure,)
            except Exception as e:  # anywidget missing or broken: the rest of the explorer still works
                self.plot_box.children = (W.HTML(f"<i>plots unavailable: {html.escape(str(e))}</i>"),)
            plot_row = [self.plot_choice, self.plot_box]
        # The plot sits under the table: the detail pane beside them is the taller of the two.
        table_box = W.VBox([self.table, *plot_row], layout=W.Layout(width="45%", min_width="320px",
                                                                    margin="0 8px 0 0"))

        controls = W.HBox([self.stop_button, self.measure_button, self.export_path, self.export_button],
                          layout=W.Layout(flex_flow="row wrap", align_items="center"))
        progress = W.HBox([self.subtrees, self.subtrees_label], layout=W.Layout(align_items="center"))
        super().__init__([self.title, self.status, self.progress_html, progress, controls, self.message,
                          W.HBox([table_box, detail_box], layout=W.Layout(width="100%"))],
                         layout=W.Layout(width="100%"))
        self.add_class("mlab-explorer")
        self._paint_progress()

    # ================================================================== search thread
    def start(self) -> None:
        """Start the search (done by the constructor unless ``autostart=False``)."""
        if self._thread is not None:
            raise RuntimeError("this explorer's search has already started; make a new one with mi.lab.explore")
        self.state = "running"
        self._t0 = time.monotonic()
        self._thread = threading.Thread(target=self._run, daemon=True, name="mirage_lab-explorer")
        self._thread.start()

    def _run(self) -> None:
        from ..search.runner import search

        try:
            events = search(self.program, self.config, cancel=self._cancel,
                            progress_interval=self.refresh_interval * 0.8, **self._search_kw, **self.settings)
            for ev in events:
                force = self._on_event(ev)
                self._flush(force)
            if self._final is None and self.state == "running":
                self.state = "error" if self.errors else "finished"
        except Exception as e:  # shown in the widget: a background thread must not die silently
            self.errors.append(f"{type(e).__name__}: {e}")
            self.state = "error"
        finally:
            if self.state == "running":
                self.state = "stopped" if self._cancel.is_set() else "finished"
            self._done.set()
            self._flush(force=True)

    def _on_event(self, ev: Any) -> bool:
        """Record one event; returns whether the widgets should refresh now."""
        with self._lock:
            if isinstance(ev, Progress):
                self.stats = ev.stats
                self._record_history()
                return False
            if isinstance(ev, CandidateFound):
                rec = CandidateRecord.from_graph(ev.index, ev.graph, ev.info, time.monotonic() - self._t0)
                self.candidates.append(rec)
                self.stats.candidates = len(self.candidates)
                if self.selected is None and self._pending_select is None:
                    self._pending_select = rec.index
                    return True  # show the first candidate at once
                return False
            if isinstance(ev, Finished):
                self._final = ev
                self.stats = ev.stats
                self.stats.candidates = len(self.candidates)
                self._record_history()
                self.state = "stopped" if ev.cancelled else "finished"
                if ev.cancelled and self._cancel_at is not None:
                    self.stopped_in = time.monotonic() - self._cancel_at
                return True
            if isinstance(ev, SearchError):
                self.errors.append(ev.message)
                return True
        return False

    _cancel_at: float | None = None

    def _record_history(self) -> None:
        self.history.append(_sample(self.stats, len(self.candidates)))
        if len(self.history) > _MAX_HISTORY:  # a long search: keep every other old sample
            self.history = self.history[: -_MAX_HISTORY // 2: 2] + self.history[-_MAX_HISTORY // 2:]

    # ================================================================== painting
    def _flush(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last_flush < self.refresh_interval:
            return
        with self._lock:
            self._last_flush = now
            self._paint_progress()
            if len(self.candidates) != self._shown_candidates:
                self._shown_candidates = len(self.candidates)
                self.table.set_records(self.candidates)
            self._paint_figure()
            if self._pending_select is not None and self.selected is None:
                idx, self._pending_select = self._pending_select, None
                self._select_locked(idx)

    def _paint_progress(self) -> None:
        s, n = self.stats, len(self.candidates)
        cards = progress.stat_cards_html(s, n, progress.recent_rate(self.history))
        status = progress.status_html(self.state, s, n, self.errors)
        with ExitStack() as st:
            for w in (self.progress_html, self.subtrees, self.subtrees_label, self.status, self.stop_button):
                st.enter_context(w.hold_sync())
            self.progress_html.value = cards
            self.status.value = status
            total = max(1, s.subtrees_total)
            self.subtrees.max = total
            self.subtrees.value = min(s.subtrees_done, total)
            self.subtrees.bar_style = {"finished": "success", "stopped": "warning", "error": "danger"}.get(
                self.state, "info")
            self.subtrees_label.value = f"{s.subtrees_done} / {s.subtrees_total or '?'}"
            self.stop_button.disabled = self.state != "running"

    def _paint_figure(self) -> None:
        fig = self.figure
        if fig is None:
            return
        xs = [h["elapsed"] for h in self.history]
        with fig.batch_update():
            fig.data[0].x, fig.data[0].y = xs, [h["states"] for h in self.history]
            fig.data[1].x, fig.data[1].y = xs, [h["candidates"] for h in self.history]
            fig.layout.yaxis2.dtick = candidate_dtick(len(self.candidates))
            if self.history and fig.layout.annotations:
                fig.layout.annotations = []

    def _show_plot(self, which: str) -> None:
        with self._lock:
            if which == "latency":
                self._paint_latency_figure()
                if self.latency_figure_widget is not None:
                    self.plot_box.children = (self.latency_figure_widget,)
            elif self.figure is not None:
                self.plot_box.children = (self.figure,)

    def _paint_latency_figure(self) -> None:
        import plotly.graph_objects as go

        from ..runtime.profile import floor_us
        from ..viz.plots import latency_figure

        new = latency_figure(self.measurements, floor_us=floor_us(self.program)).update_layout(width=PLOT_WIDTH)
        fw = self.latency_figure_widget
        if fw is None:
            self.latency_figure_widget = go.FigureWidget(new)
            return
        fw.data = []  # plotly allows removing traces only outside batch_update
        fw.add_traces(list(new.data))
        fw.layout = new.layout

    # ================================================================== selection and detail
    def select(self, index: int) -> None:
        """Show candidate ``index`` (the order found) in the detail pane and verify it in the background."""
        with self._lock:
            self._select_locked(index)

    def select_best(self) -> int | None:
        """Select the fastest measured candidate, else the cheapest by static cost; returns its index."""
        if not self.candidates:
            return None
        timed = [r for r in self.candidates if r.latency_us is not None]
        best = (min(timed, key=lambda r: (r.latency_us, r.index)) if timed else
                min(self.candidates, key=lambda r: (r.kernels, r.bytes, r.index)))
        self.select(best.index)
        return best.index

    def record(self, index: int) -> CandidateRecord:
        for r in self.candidates:
            if r.index == index:
                return r
        raise IndexError(f"no candidate {index}; the search has found {len(self.candidates)}")

    def _select_locked(self, index: int) -> None:
        rec = self.record(index)
        self.selected = index
        self.table.set_selected(index)
        if index not in self._code_cache:
            self._code_cache[index] = detail.candidate_code(rec.graph)
        self.detail_code, self.detail_code_origin = self._code_cache[index]
        with ExitStack() as st:
            for w in (self.detail_title, self.code_view, self.text_view, self.export_path, self.export_button):
                st.enter_context(w.hold_sync())
            self.detail_title.value = (
                f"<b>candidate #{rec.index}</b> · {rec.kernels} kernel{'s' if rec.kernels != 1 else ''} · "
                f"grid {html.escape(rec.grid_text)} · forloop {html.escape(rec.forloop_text)} · "
                f"≈{rec.bytes:,} bytes moved · hash <code>{rec.hash[:12]}</code>")
            self.code_view.value = (("" if self.detail_code_origin == "codegen" else
                                     "<i>the code generator cannot handle this graph; its printed form:</i>")
                                    + detail.code_html(self.detail_code))
            self.text_view.value = detail.text_html(repr(rec.graph))
            self.export_path.value = rec.module_name
            self.export_button.disabled = False
        self._paint_drawing()
        self._verify_async(index)

    def set_level(self, level: str) -> None:
        """Draw the selected candidate at ``level``: kernel, block, thread or all."""
        if level not in LEVELS:
            raise ValueError(f"level={level!r}: use one of {LEVELS}")
        with self._lock:
            self.level = level
            if self.level_buttons.value != level:
                self.level_buttons.value = level  # re-enters through the observer; harmless
            self._paint_drawing()

    def _paint_drawing(self) -> None:
        if self.selected is None:
            return
        key = (self.selected, self.level)
        if key not in self._svg_cache:
            self._svg_cache[key] = detail.drawing_svg(self.record(self.selected).graph, self.level)
        svg, reason = self._svg_cache[key]
        self.detail_svg = svg
        self.drawing.value = detail.drawing_pane_html(svg, reason, self.record(self.selected).graph)

    def _verify_async(self, index: int) -> None:
        shown = self.selected == index
        if index in self.verification:
            if shown:
                self._paint_verification(index)
            return
        if shown:
            self.verify_html.value = detail.verification_html(None, running=True)
        if index in self._verify_events:
            return
        ev = self._verify_events[index] = threading.Event()

        def work() -> None:
            from ..verify import equivalent

            with self._verify_lock:  # one at a time: verifications share the CPU with the search
                try:
                    res: Any = equivalent(self.program, self.record(index).graph)
                    err = None
                except Exception as e:  # reported in the pane
                    res, err = None, f"{type(e).__name__}: {e}"
            self.verification[index] = res if err is None else err
            ev.set()
            with self._lock:
                if self.selected == index:
                    self._paint_verification(index)

        threading.Thread(target=work, daemon=True, name=f"mirage_lab-verify-{index}").start()

    def _paint_verification(self, index: int) -> None:
        v = self.verification[index]
        self.verify_html.value = (detail.verification_html(None, error=v) if isinstance(v, str)
                                  else detail.verification_html(v))

    def verified(self, index: int | None = None, timeout: float | None = None) -> Any:
        """``mi.verify.equivalent(program, candidate)`` for ``index`` (default: the selected one), waiting up to
        ``timeout`` s; ``None`` while it runs, the error text if it could not run."""
        index = self.selected if index is None else index
        if index is None:
            raise ValueError("no candidate selected")
        if index not in self._verify_events and index not in self.verification:
            with self._lock:
                self._verify_async(index)
        ev = self._verify_events.get(index)
        if ev is not None:
            ev.wait(timeout)
        return self.verification.get(index)

    # ================================================================== control
    def stop(self, timeout: float | None = 5.0) -> bool:
        """Cancel the search (the candidates found so far are kept); wait up to ``timeout`` s for it to end.

        Returns whether it has ended. ``timeout=0`` only asks (the Stop button does that).
        """
        if self._thread is None:
            self.state = "stopped"
            self._done.set()
            return True
        if not self._done.is_set() and not self._cancel.is_set():
            self._cancel_at = time.monotonic()
            self._cancel.cancel()
            with self._lock:
                self.stop_button.disabled = True
                self.status.value = '<span class="mlab-status" data-state="stopping">■ stopping…</span>'
        return self.wait(timeout) if timeout else self._done.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the search ends (or ``timeout`` s pass); returns whether it has ended."""
        if self._thread is None:
            return self._done.is_set()
        self._thread.join(timeout)
        return self._done.is_set()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    @property
    def result(self) -> Any:
        """The search so far as a :class:`mirage_lab.search.SearchResult` (candidates, costs, stats)."""
        from ..search.cost import static_cost
        from ..search import SearchResult

        graphs = [r.graph for r in self.candidates]
        return SearchResult(self.program, graphs, [static_cost(g) for g in graphs], self.stats,
                            cancelled=self.state == "stopped", errors=list(self.errors),
                            measurements=dict(self.measurements))

    # ================================================================== export
    def export(self, path: str | Path | None = None, index: int | None = None) -> Path:
        """Write candidate ``index`` (default: the selected one) as a standalone module; returns its path.

        The module is the runtime's export (:func:`mirage_lab.runtime.export`): generated
        Numba-CUDA kernels plus ``forward(*tensors)``. Its docstring records the measured
        latency when there is one, and says "not measured" on a machine without a GPU.
        """
        from ..runtime.export import export

        index = self.selected if index is None else index
        if index is None:
            raise ValueError("no candidate selected: select one (click a row, or w.select(i)) first")
        rec = self.record(index)
        p = Path(path or self.export_path.value or rec.module_name)
        device = None
        if rec.latency_us is not None:
            import torch

            device = torch.cuda.get_device_name() if torch.cuda.is_available() else None
        v = rec.lowered  # export exactly the lowering that was timed (threads per block, codegen options)
        out = export(v.graph if v is not None else rec.graph, p, latency_us=rec.latency_us, device=device,
                     options=v.options if v is not None else None)
        lines = out.read_text().count("\n")
        lat = f"{rec.latency_us:.3g} µs measured" if rec.latency_us is not None else "latency not measured (no GPU)"
        self.message.value = (f"✓ wrote <code>{html.escape(str(out))}</code> ({lines} lines; {lat}). "
                              f"<code>import</code> it and call <code>forward(*tensors)</code> with CUDA tensors.")
        return out

    def _export_clicked(self) -> None:
        try:
            self.export()
        except Exception as e:  # shown in the widget instead of a traceback nobody sees
            self.message.value = f'<span style="color:#b71c1c">export failed: {html.escape(str(e))}</span>'

    # ================================================================== measurements
    def add_measurements(self, measurements: Any) -> None:
        """Merge measured latencies: ``{name: median_us | Timing | {mode: Timing}}`` or a runtime ``Selection``.

        Names ``"candidate 3"`` set candidate 3's latency in the table; other names (the
        profiler's ``torch_eager``, ``torch_cuda_graph``, ``torch_compile``) are baselines.
        """
        if hasattr(measurements, "candidates") and hasattr(measurements, "best"):  # a Selection
            by_graph = {id(r.graph): r.index for r in self.candidates}
            items = [(f"candidate {by_graph[id(c.graph)]}", c) for c in measurements.candidates
                     if id(c.graph) in by_graph]
        else:
            items = list(dict(measurements).items())
        with self._lock:
            for name, value in items:
                self._apply_measurement(str(name), value)
            self.table.refresh()
            if self.figure is not None and self.plot_choice.value != "latency":
                self.plot_choice.value = "latency"  # repaints through the observer
            elif self.figure is not None:
                self._paint_latency_figure()

    def _apply_measurement(self, name: str, value: Any) -> None:
        from ..viz.plots import latency_rows

        lowered = None
        if hasattr(value, "timings") and hasattr(value, "error"):  # a pipeline VariantResult (or profile.Candidate)
            lowered = getattr(value, "variant", None)
            err, value = value.error, (value.timings or None)
        else:
            err = None
        m = re.fullmatch(r"candidate (\d+)", name)
        rec = None
        if m:
            try:
                rec = self.record(int(m.group(1)))
            except IndexError:
                rec = None
        rows = latency_rows({name: value}) if value is not None else []
        if rec is not None:
            rec.latency_us = rows[0].median_us if rows else None
            rec.measure_error = err if err else (None if rows else "not measured")
            rec.lowered = lowered if rows else None
        if rows:
            self.measurements[name] = value

    def measure(self, inputs: Any = None, *, baselines: bool = True, compile_mode: str | None = "default",
                repeats: int = 200, block: bool = False) -> None:
        """On a GPU: time the torch baselines, then every candidate, filling the table and the latency plot.

        Runs in the background (``block=True`` waits). Without a GPU it raises and says so.
        """
        if not gpu_available():
            raise RuntimeError("No GPU: latencies are measured on a CUDA machine (torch.cuda.is_available() is False)")
        if self._measure_thread is not None and self._measure_thread.is_alive():
            return
        todo = [(r.index, r.graph) for r in self.candidates if r.latency_us is None]

        def work() -> None:
            from .measure import measure

            try:
                measure(self.program, todo, inputs=inputs, baselines=baselines, compile_mode=compile_mode,
                        repeats=repeats, on_result=lambda n, v: self.add_measurements({n: v}))
                self.message.value = f"✓ measured {len(todo)} candidate{'s' if len(todo) != 1 else ''}"
            except Exception as e:  # shown in the widget
                self.message.value = f'<span style="color:#b71c1c">measurement failed: {html.escape(str(e))}</span>'
            finally:
                self.measure_button.disabled = False

        self.measure_button.disabled = True
        self.message.value = "⏳ measuring on the GPU…"
        self._measure_thread = threading.Thread(target=work, daemon=True, name="mirage_lab-measure")
        self._measure_thread.start()
        if block:
            self._measure_thread.join()

    def __repr__(self) -> str:
        return (f"SearchExplorer({self.state}, {len(self.candidates)} candidates, states={self.stats.states}, "
                f"selected={self.selected})")


def explore(program: KernelGraph, config: str | None = None, **kwargs: Any) -> SearchExplorer:
    """Search ``program`` in the background and return the live explorer widget (display it in a cell).

    ``config`` and ``kwargs`` are :func:`mirage_lab.search.search`'s (``workers``,
    ``max_kernel_ops``, ``griddims``, ...) plus the widget's own (``refresh_interval``,
    ``level``, ``title``, ``autostart``, ``plots``).

        >>> w = explore(program, workers=1, max_kernel_ops=3)      # doctest: +SKIP
        >>> w                                                       # doctest: +SKIP
    """
    return SearchExplorer(program, config, **kwargs)
