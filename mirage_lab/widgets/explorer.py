"""The search explorer: a live notebook view of an :class:`~.session.ExplorerSession`.

The session runs the search in a background thread and keeps the state (candidates,
progress, verification, measurements); this widget subscribes to its events and repaints
from that state at most every ``refresh_interval`` seconds, inside ``hold_sync()``
(DESIGN.md: set traits from the background thread, never print, coalesce), and at once for
the first candidate, the end of the search, verification, measurement and export. Clicks run
on the kernel's main thread; one lock keeps them and the background repaints from interleaving.

    >>> import mirage_lab as mi
    >>> from mirage_lab import examples as ex
    >>> w = mi.lab.explore(ex.rms_norm_linear_program(4, 256, 256), workers=1, max_kernel_ops=3)
    >>> w.wait(120)
    True
    >>> w.state, len(w.candidates) > 0, w.selected
    ('finished', True, 0)
    >>> "<svg" in w.detail_svg
    True
    >>> w.session.best_index() is not None      # the same state, without widgets
    True
"""
from __future__ import annotations

import html
import threading
import time
import uuid
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Iterable

import ipywidgets as W

from ..ir.kernel_graph import KernelGraph
from ..runtime.latency import LatencyRow
from ..search.settings_check import check_choice
from ..viz import LEVELS
from ..viz.plots import candidate_dtick
from . import detail, progress, saved_view
from .measure import gpu_available
from .records import CandidateRecord
from .session import (STATES, CandidateAdded, ErrorReported, ExplorerSession, Exported, MeasureFinished,
                      MeasurementsAdded, ProgressUpdated, SearchEnded, SessionEvent, StateChanged, StopRequested,
                      VerificationDone)
from .table import CandidateTable

PLOT_WIDTH = 520  # px: FigureWidget does not follow its container's width; this fits beside the detail pane
_ERROR_STYLE = 'style="color:#b71c1c"'
SAVED_VIEW_INTERVAL = 5.0  # s: how often the saved view follows a running search


def _from_session(name: str, doc: str) -> property:
    """A read-only attribute that is the session's (the view keeps no copy of the search's state)."""
    return property(lambda self: getattr(self.session, name), doc=doc)


class SearchExplorer(W.VBox):
    """The live widget over an :class:`ExplorerSession` (made from ``program`` and the search settings, or given).

    The session's state, read through: :attr:`program`, :attr:`stats`, :attr:`history`,
    :attr:`candidates`, :attr:`state`, :attr:`errors`, :attr:`verification`,
    :attr:`measurements`, :attr:`result`, :attr:`done`. The view's own: :attr:`selected`,
    :attr:`level`, :attr:`detail_svg`, :attr:`detail_code`. Actions: :meth:`start`, :meth:`stop`,
    :meth:`wait`, :meth:`select`, :meth:`select_best`, :meth:`set_level`, :meth:`verified`,
    :meth:`export`, :meth:`measure`, :meth:`add_measurements`.

        >>> w = SearchExplorer(program, workers=1, max_kernel_ops=3)     # doctest: +SKIP
        >>> SearchExplorer(ExplorerSession(program).start())              # doctest: +SKIP
    """

    program = _from_session("program", "the searched program")
    config = _from_session("config", "the search preset")
    settings = _from_session("settings", "the search's other settings")
    stats = _from_session("stats", "the latest SearchStats")
    history = _from_session("history", "progress samples (dicts), what the progress plot draws")
    candidates = _from_session("candidates", "CandidateRecords in the order found")
    state = _from_session("state", f"one of {STATES}")
    errors = _from_session("errors", "the search's error messages")
    stopped_in = _from_session("stopped_in", "seconds from Stop to the search's end")
    verification = _from_session("verification", "{index: EquivalenceResult or error text}")
    measurements = _from_session("measurements", "{label: LatencyRow}")
    result = _from_session("result", "the search so far as a SearchResult")
    done = _from_session("done", "whether the search has ended")

    def __init__(self, program: KernelGraph | ExplorerSession, config: str | None = None, *,
                 workers: int | None = None, executor: Any = None, checkpoint: Any = None,
                 refresh_interval: float = 0.25, level: str = "block", title: str | None = None,
                 autostart: bool = True, plots: bool = True, export_dir: str | Path | None = None,
                 **settings: Any) -> None:
        check_choice("level", level, LEVELS)
        if isinstance(program, ExplorerSession):
            if config is not None or settings or any(x is not None for x in (workers, executor, checkpoint)):
                raise ValueError("SearchExplorer(session): the search settings are the session's; pass none here")
            self.session = program
        else:
            self.session = ExplorerSession(program, config, workers=workers, executor=executor, checkpoint=checkpoint,
                                           progress_interval=refresh_interval * 0.8, **settings)
        self.refresh_interval = float(refresh_interval)
        self._lock = threading.RLock()       # widget updates: background events vs clicks
        self._last_flush = 0.0
        self._shown_candidates = -1
        self._pending_select: int | None = None
        self._svg_cache: dict[tuple[int, str], tuple[str | None, str]] = {}
        self._code_cache: dict[int, tuple[str, str]] = {}

        # ---- the view's own state
        self.selected: int | None = None
        self.level = level
        self.detail_svg: str | None = None
        self.detail_code: str = ""
        self.detail_code_origin: str = ""

        # Export's folder: the one asked for, else the kernel's working directory (a notebook's own folder
        # in JupyterLab); the message after an export names the full path either way.
        self.export_dir = Path(export_dir).expanduser().absolute() if export_dir is not None else Path.cwd()
        self._export_dir_chosen = export_dir is not None
        self._saved_id = f"mirage-lab-saved-{uuid.uuid4().hex}"  # display id of the saved view's outputs
        self._saved_shown = False
        self._saved_at = 0.0
        self._build(title, plots)
        self._unsubscribe = self.session.subscribe(self._on_event)
        if self.session.candidates:  # a view over a session that has already found candidates
            self._pending_select = self.session.candidates[0].index
        self._flush(force=True)
        if autostart and self.session.state == "idle":
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
        self.export_path = W.Text(value="", description="module", placeholder="file name or path of the module",
                                  tooltip=f"a relative name is written into {self.export_dir}",
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
        self.drawing = detail.InspectorPane()
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

    # ================================================================== session events
    def start(self) -> None:
        """Start the search (done by the constructor unless ``autostart=False``)."""
        if self.session.state != "idle":
            raise RuntimeError("this explorer's search has already started; make a new one with mi.lab.explore")
        self.session.start()

    def _on_event(self, ev: SessionEvent) -> None:
        """Repaint what ``ev`` changed (called on the thread that caused it)."""
        if isinstance(ev, ProgressUpdated):
            self._flush()
        elif isinstance(ev, CandidateAdded):
            with self._lock:
                first = self.selected is None and self._pending_select is None
                if first:
                    self._pending_select = ev.record.index
            self._flush(force=first)  # show the first candidate at once
        elif isinstance(ev, (StateChanged, SearchEnded, ErrorReported, StopRequested)):
            self._flush(force=True)
            if isinstance(ev, SearchEnded):
                self.update_saved_view()
        elif isinstance(ev, VerificationDone):
            with self._lock:
                if self.selected == ev.index:
                    self._paint_verification(ev.index)
                    self.update_saved_view()
        elif isinstance(ev, MeasurementsAdded):
            self._measurements_added()
            self.update_saved_view()
        elif isinstance(ev, MeasureFinished):
            n = ev.candidates
            with self._lock:
                self.message.value = (f"✓ measured {n} candidate{'s' if n != 1 else ''}" if ev.error is None else
                                      f"<span {_ERROR_STYLE}>measurement failed: {html.escape(ev.error)}</span>")
                self.measure_button.disabled = False
        elif isinstance(ev, Exported):
            lat = f"{ev.latency_us:.3g} µs measured" if ev.latency_us is not None else "latency not measured (no GPU)"
            where = ("the export folder you chose" if self._export_dir_chosen else
                     "the kernel's working directory; pass export_dir= to explore, or a full path, to choose")
            folder = (f" (into {html.escape(where)})"
                      if Path(ev.path).parent == self.export_dir else "")
            with self._lock:
                self.message.value = (f"✓ wrote <code>{html.escape(str(ev.path))}</code>{folder} "
                                      f"({ev.lines} lines; {lat}). "
                                      "<code>import</code> it and call <code>forward(*tensors)</code> with CUDA "
                                      "tensors.")

    # ================================================================== painting
    def _flush(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last_flush < self.refresh_interval:
            return
        with self._lock:
            self._last_flush = now
            self._paint_progress()
            cands = self.session.candidates
            if len(cands) != self._shown_candidates:
                self._shown_candidates = len(cands)
                self.table.set_records(cands)
            self._paint_figure()
            if self._pending_select is not None and self.selected is None:
                idx, self._pending_select = self._pending_select, None
                self._select_locked(idx)
            if now - self._saved_at >= SAVED_VIEW_INTERVAL:  # a notebook saved mid-search keeps recent counts
                self.update_saved_view()

    def _paint_progress(self) -> None:
        s, n = self.session.stats, len(self.session.candidates)
        state = self.session.state
        shown = "stopping" if state == "running" and self.session.cancel_requested else state
        cards = progress.stat_cards_html(s, n, progress.recent_rate(self.session.history))
        status = progress.status_html(shown, s, n, self.session.errors)
        with ExitStack() as st:
            for w in (self.progress_html, self.subtrees, self.subtrees_label, self.status, self.stop_button):
                st.enter_context(w.hold_sync())
            self.progress_html.value = cards
            self.status.value = status
            total = max(1, s.subtrees_total)
            self.subtrees.max = total
            self.subtrees.value = min(s.subtrees_done, total)
            self.subtrees.bar_style = {"finished": "success", "stopped": "warning", "error": "danger"}.get(
                state, "info")
            self.subtrees_label.value = f"{s.subtrees_done} / {s.subtrees_total or '?'}"
            self.stop_button.disabled = shown != "running"

    def _paint_figure(self) -> None:
        fig = self.figure
        if fig is None:
            return
        hist = list(self.session.history)
        xs = [h["elapsed"] for h in hist]
        with fig.batch_update():
            fig.data[0].x, fig.data[0].y = xs, [h["states"] for h in hist]
            fig.data[1].x, fig.data[1].y = xs, [h["candidates"] for h in hist]
            fig.layout.yaxis2.dtick = candidate_dtick(len(self.session.candidates))
            if hist and fig.layout.annotations:
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

        rows = list(self.session.measurements.values())
        new = latency_figure(rows, floor_us=floor_us(self.program)).update_layout(width=PLOT_WIDTH)
        fw = self.latency_figure_widget
        if fw is None:
            self.latency_figure_widget = go.FigureWidget(new)
            return
        fw.data = []  # plotly allows removing traces only outside batch_update
        fw.add_traces(list(new.data))
        fw.layout = new.layout

    def _measurements_added(self) -> None:
        with self._lock:
            self.table.refresh()
            if self.figure is not None and self.plot_choice.value != "latency":
                self.plot_choice.value = "latency"  # repaints through the observer
            elif self.figure is not None:
                self._paint_latency_figure()

    # ================================================================== selection and detail
    def record(self, index: int) -> CandidateRecord:
        """The candidate found ``index``-th (the session's record)."""
        return self.session.record(index)

    def select(self, index: int) -> None:
        """Show candidate ``index`` (the order found) in the detail pane and verify it in the background."""
        with self._lock:
            self._select_locked(index)

    def select_best(self) -> int | None:
        """Select the fastest measured candidate, else the cheapest by static cost; returns its index."""
        best = self.session.best_index()
        if best is not None:
            self.select(best)
        return best

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
        if index in self.session.verification:
            self._paint_verification(index)
        else:
            self.verify_html.value = detail.verification_html(None, running=True)
            self.session.verify(index)
        self.update_saved_view()

    def set_level(self, level: str) -> None:
        """Draw the selected candidate at ``level``: kernel, block, thread or all."""
        check_choice("level", level, LEVELS)
        with self._lock:
            self.level = level
            if self.level_buttons.value != level:
                self.level_buttons.value = level  # re-enters through the observer; harmless
            self._paint_drawing()
            self.update_saved_view()

    def _paint_drawing(self) -> None:
        if self.selected is None:
            return
        key = (self.selected, self.level)
        graph = self.record(self.selected).graph
        if key not in self._svg_cache:
            self._svg_cache[key] = detail.drawing_svg(graph, self.level)
        svg, reason = self._svg_cache[key]
        self.detail_svg = svg
        self.drawing.show(graph, self.level, svg)

    def _paint_verification(self, index: int) -> None:
        v = self.session.verification[index]
        self.verify_html.value = (detail.verification_html(None, error=v) if isinstance(v, str)
                                  else detail.verification_html(v))

    def verified(self, index: int | None = None, timeout: float | None = None) -> Any:
        """``mi.verify.equivalent(program, candidate)`` for ``index`` (default: the selected one), waiting up to
        ``timeout`` s; ``None`` while it runs, the error text if it could not run."""
        index = self.selected if index is None else index
        if index is None:
            raise ValueError("no candidate selected")
        return self.session.verified(index, timeout)

    # ================================================================== control
    def stop(self, timeout: float | None = 5.0) -> bool:
        """Cancel the search (the candidates found so far are kept); wait up to ``timeout`` s for it to end.

        Returns whether it has ended. ``timeout=0`` only asks (the Stop button does that).
        """
        # never under self._lock: the search thread repaints while it ends
        return self.session.stop(timeout, widgets=[self])

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the search ends (or ``timeout`` s pass); returns whether it has ended.

        The widget stays live meanwhile: Stop, row clicks and the level switch are handled while the cell
        waits (:func:`~.ui_wait.wait_until`), so ``explore`` then ``wait()`` in a Run All can still be stopped.
        """
        return self.session.wait(timeout, widgets=[self])

    # ================================================================== export and measurements
    def export(self, path: str | Path | None = None, index: int | None = None) -> Path:
        """Write candidate ``index`` (default: the selected one) as a standalone module; returns its full path.

        See :meth:`ExplorerSession.export`; the path defaults to the one in the Export box, and a relative
        one is taken from :attr:`export_dir` (``explore(..., export_dir=...)``, else the working directory).
        """
        index = self.selected if index is None else index
        if index is None:
            raise ValueError("no candidate selected: select one (click a row, or w.select(i)) first")
        target = Path(path or self.export_path.value or self.record(index).module_name).expanduser()
        return self.session.export(index, target if target.is_absolute() else self.export_dir / target)

    def _export_clicked(self) -> None:
        try:
            self.export()
        except Exception as e:  # shown in the widget instead of a traceback nobody sees
            self.message.value = f"<span {_ERROR_STYLE}>export failed: {html.escape(str(e))}</span>"

    def add_measurements(self, rows: Iterable[LatencyRow]) -> None:
        """Store latency rows measured elsewhere (:meth:`ExplorerSession.add_measurements`): the table's
        latency column and the latency plot follow."""
        self.session.add_measurements(rows)

    def measure(self, inputs: Any = None, *, baselines: bool = True, compile_mode: str | None = "default",
                repeats: int = 200, block: bool = False) -> None:
        """On a GPU: time every unmeasured candidate, then the torch baselines (:meth:`ExplorerSession.measure`).

        Runs in the background (``block=True`` waits). Without a GPU it raises and says so.
        """
        if not gpu_available():
            raise RuntimeError("No GPU: latencies are measured on a CUDA machine (torch.cuda.is_available() is False)")
        if self.session.measuring:
            return
        self.measure_button.disabled = True
        self.message.value = "⏳ measuring on the GPU…"
        try:
            self.session.measure(inputs, baselines=baselines, compile_mode=compile_mode, repeats=repeats, block=block)
        except Exception:
            self.measure_button.disabled = False
            raise

    # ================================================================== the saved view
    def _ipython_display_(self) -> None:
        """The live widget, then its saved view (:mod:`.saved_view`): outputs a saved notebook keeps, updated
        in place, hidden while the widget is on screen."""
        from IPython.display import display

        display(self._repr_mimebundle_(), raw=True)
        with self._lock:
            self._saved_shown = True
            bundles = self._saved_bundles()
        for suffix, bundle in bundles.items():
            display(bundle, raw=True, display_id=self._saved_id + suffix)

    def _saved_bundles(self) -> dict[str, dict[str, Any]]:
        """The saved view's outputs, by display-id suffix: the page, the progress figure, the latency figure."""
        page = saved_view.saved_view_html(
            self.session, selected=self.selected, level=self.level, svg=self.detail_svg, title=self.title.value,
            detail_title=self.detail_title.value if self.selected is not None else "",
            verification=self.verify_html.value if self.selected is not None else "")
        out: dict[str, dict[str, Any]] = {"": {"text/html": page, "text/plain": f"saved view of {self!r}"}}
        out["-progress"] = out["-latency"] = {"text/plain": ""}
        if self.figure is not None:
            from ..viz.plots import progress_figure

            fig = progress_figure(saved_view.thinned(self.session.history)).update_layout(width=PLOT_WIDTH)
            out["-progress"] = saved_view.figure_bundle(fig, "search progress")
            rows = list(self.session.measurements.values())
            if rows:
                from ..runtime.profile import floor_us
                from ..viz.plots import latency_figure

                out["-latency"] = saved_view.figure_bundle(
                    latency_figure(rows, floor_us=floor_us(self.program)).update_layout(width=PLOT_WIDTH), "latency")
        return out

    def update_saved_view(self) -> None:
        """Repaint the saved view's outputs in place (done on the search's end, clicks, verification and
        measurements; every few seconds while the search runs)."""
        with self._lock:
            if not self._saved_shown:
                return
            self._saved_at = time.monotonic()
            bundles = self._saved_bundles()
        from IPython.display import update_display

        for suffix, bundle in bundles.items():
            update_display(bundle, raw=True, display_id=self._saved_id + suffix)

    def __repr__(self) -> str:
        return (f"SearchExplorer({self.state}, {len(self.candidates)} candidates, states={self.stats.states}, "
                f"selected={self.selected})")


def explore(program: KernelGraph | ExplorerSession, config: str | None = None, **kwargs: Any) -> SearchExplorer:
    """Search ``program`` in the background and return the live explorer widget (display it in a cell).

    ``config`` and ``kwargs`` are :func:`mirage_lab.search.search`'s (``workers``,
    ``max_kernel_ops``, ``griddims``, ...) plus the widget's own (``refresh_interval``,
    ``level``, ``title``, ``autostart``, ``plots``, ``export_dir``). Given an
    :class:`ExplorerSession` instead, the widget shows that session. Bad settings raise a
    ``SearchConfigError`` here, before the search starts; displayed, the widget also leaves a
    saved view in the notebook (:mod:`.saved_view`).

        >>> w = explore(program, workers=1, max_kernel_ops=3)      # doctest: +SKIP
        >>> w                                                       # doctest: +SKIP
    """
    return SearchExplorer(program, config, **kwargs)
