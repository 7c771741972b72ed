"""``ExplorerSession``: one background search and everything learnt about its candidates, without widgets.

The session owns the search thread, its cancel token, the candidates (:class:`CandidateRecord`),
the progress history, background verification, GPU measurements (typed
:class:`~mirage_lab.runtime.latency.LatencyRow` records) and export. It imports no
ipywidgets: scripts and tests drive it directly, and the explorer widget
(:mod:`.explorer`) is a view that subscribes to its events and repaints.

Listeners are called with one :data:`SessionEvent` at a time, on the thread that caused it
(the search thread, a verification or measurement thread, or the caller's thread for
:meth:`~ExplorerSession.export` and :meth:`~ExplorerSession.add_measurements`), after the
session's state is updated and without the session's lock held, so a listener may read the
session freely. A listener that raises is recorded in ``listener_errors``; the search goes on.

    >>> from mirage_lab import examples as ex
    >>> s = ExplorerSession(ex.rms_norm_linear_program(4, 256, 256), workers=1, max_kernel_ops=3)
    >>> seen = []
    >>> unsubscribe = s.subscribe(seen.append)
    >>> s.state, s.stop(), s.state, [type(e).__name__ for e in seen]     # never started: stops at once
    ('idle', True, 'stopped', ['StateChanged'])
    >>> s.start().wait(120)                                              # doctest: +SKIP
    True
    >>> s.state, len(s.candidates), s.export(s.best_index(), "best.py")   # doctest: +SKIP
    ('finished', 4, PosixPath('/home/me/best.py'))
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Union

from ..ir.kernel_graph import KernelGraph
from ..runtime.latency import CANDIDATE, LatencyRow, check_rows
from ..search.events import CandidateFound, Finished, Progress, SearchError, SearchStats
from .records import CandidateRecord

STATES = ("idle", "running", "finished", "stopped", "error")
_MAX_HISTORY = 4000


# ----------------------------------------------------------------------------- events
@dataclass(frozen=True)
class ProgressUpdated:
    """New counters (``session.stats``; a sample was added to ``session.history``)."""

    stats: SearchStats


@dataclass(frozen=True)
class CandidateAdded:
    """The search found a candidate; ``record`` is in ``session.candidates``."""

    record: CandidateRecord


@dataclass(frozen=True)
class StateChanged:
    state: str
    previous: str


@dataclass(frozen=True)
class StopRequested:
    """Cancel was asked; the search ends within about a second (then :class:`StateChanged`)."""


@dataclass(frozen=True)
class ErrorReported:
    message: str


@dataclass(frozen=True)
class SearchEnded:
    """The search thread's last event: the search is over, ``state`` is final."""

    state: str


@dataclass(frozen=True)
class VerificationDone:
    """``mi.verify.equivalent(program, candidate)`` finished: an ``EquivalenceResult``, or the error text."""

    index: int
    result: Any


@dataclass(frozen=True)
class MeasurementsAdded:
    """Latency rows stored in ``session.measurements``; ``records``: candidates whose latency or error changed."""

    rows: tuple[LatencyRow, ...]
    records: tuple[CandidateRecord, ...]


@dataclass(frozen=True)
class MeasureFinished:
    candidates: int
    error: str | None


@dataclass(frozen=True)
class Exported:
    index: int
    path: Path
    lines: int
    latency_us: float | None


SessionEvent = Union[ProgressUpdated, CandidateAdded, StateChanged, StopRequested, ErrorReported, SearchEnded,
                     VerificationDone, MeasurementsAdded, MeasureFinished, Exported]
Listener = Callable[[SessionEvent], None]


def _sample(stats: SearchStats, candidates: int) -> dict[str, Any]:
    d = stats.as_dict()
    d["candidates"] = max(candidates, d.get("candidates", 0))
    return d


# ----------------------------------------------------------------------------- the session
class ExplorerSession:
    """Runs ``search(program, config, **settings)`` in a background thread and keeps what it learns.

    State: :attr:`state` (one of :data:`STATES`), :attr:`stats`, :attr:`history` (progress
    samples as dicts), :attr:`candidates`, :attr:`errors`, :attr:`verification`,
    :attr:`measurements` (``{label: LatencyRow}``), :attr:`stopped_in`, :attr:`result`.
    Actions: :meth:`start`, :meth:`cancel`, :meth:`stop`, :meth:`wait`, :meth:`verify`,
    :meth:`verified`, :meth:`measure`, :meth:`add_measurements`, :meth:`export`,
    :meth:`best_index`. Events: :meth:`subscribe`.
    """

    def __init__(self, program: KernelGraph, config: str | None = None, *, workers: int | None = None,
                 executor: Any = None, checkpoint: Any = None, progress_interval: float = 0.2,
                 **settings: Any) -> None:
        from ..search.runner import CancelToken, check_searchable

        from ..search.settings_check import validate_search_settings

        check_searchable(program)  # a bad program or setting fails here, in the caller's cell, not in a thread
        validate_search_settings(config, {"workers": workers, "checkpoint": checkpoint, **settings}, program)
        self.program = program
        self.config = config
        self.settings = dict(settings)
        self.progress_interval = float(progress_interval)
        self._search_kw = {"workers": workers, "executor": executor, "checkpoint": checkpoint}
        self._cancel = CancelToken()
        self._cancel_at: float | None = None
        self._lock = threading.RLock()          # the state below: search thread vs callers vs workers
        self._listeners: list[Listener] = []
        self._thread: threading.Thread | None = None
        self._done = threading.Event()
        self._t0 = time.monotonic()
        self._verify_events: dict[int, threading.Event] = {}
        self._verify_lock = threading.Lock()    # one verification at a time: they share the CPU with the search
        self._measure_thread: threading.Thread | None = None

        self.stats = SearchStats()
        self.history: list[dict[str, Any]] = []
        self.candidates: list[CandidateRecord] = []
        self.verification: dict[int, Any] = {}
        self.measurements: dict[str, LatencyRow] = {}
        self.state = "idle"
        self.errors: list[str] = []
        self.stopped_in: float | None = None
        self.listener_errors: list[str] = []

    # ================================================================== events
    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener(event)`` for every later event; returns a function that unsubscribes it."""
        with self._lock:
            self._listeners.append(listener)

        def unsubscribe() -> None:
            with self._lock:
                if listener in self._listeners:
                    self._listeners.remove(listener)

        return unsubscribe

    def _emit(self, ev: SessionEvent) -> None:
        with self._lock:
            listeners = list(self._listeners)
        for fn in listeners:  # outside the lock: a listener may call back into the session
            try:
                fn(ev)
            except Exception as e:  # a broken view must not end the search
                self.listener_errors.append(f"{getattr(fn, '__qualname__', fn)}({type(ev).__name__}): "
                                            f"{type(e).__name__}: {e}")

    def _set_state(self, state: str) -> None:
        with self._lock:
            previous, self.state = self.state, state
        if previous != state:
            self._emit(StateChanged(state, previous))

    # ================================================================== the search
    def start(self) -> ExplorerSession:
        """Start the search in a background thread; returns the session (``s.start().wait()``)."""
        with self._lock:
            if self._thread is not None or self.state != "idle":
                raise RuntimeError("this session's search has already started (or was stopped); make a new one")
            self._t0 = time.monotonic()
            self._thread = threading.Thread(target=self._run, daemon=True, name="mirage_lab-explorer")
        self._set_state("running")
        self._thread.start()
        return self

    def _run(self) -> None:
        from ..search.runner import search

        finished = False
        try:
            events = search(self.program, self.config, cancel=self._cancel, progress_interval=self.progress_interval,
                            **self._search_kw, **self.settings)
            for ev in events:
                finished |= self._on_search_event(ev)
            if not finished and self.state == "running":
                self._set_state("error" if self.errors else "finished")
        except Exception as e:  # reported as state: a background thread must not die silently
            msg = f"{type(e).__name__}: {e}"
            with self._lock:
                self.errors.append(msg)
            self._emit(ErrorReported(msg))
            self._set_state("error")
        finally:
            if self.state == "running":
                self._set_state("stopped" if self._cancel.is_set() else "finished")
            self._emit(SearchEnded(self.state))
            self._done.set()

    def _on_search_event(self, ev: Any) -> bool:
        """Record one search event and pass it on; returns whether it was the search's ``Finished``."""
        if isinstance(ev, Progress):
            with self._lock:
                self.stats = ev.stats
                self._record_history()
            self._emit(ProgressUpdated(self.stats))
        elif isinstance(ev, CandidateFound):
            rec = CandidateRecord.from_graph(ev.index, ev.graph, ev.info, time.monotonic() - self._t0)
            with self._lock:
                self.candidates.append(rec)
                self.stats.candidates = len(self.candidates)
            self._emit(CandidateAdded(rec))
        elif isinstance(ev, Finished):
            with self._lock:
                self.stats = ev.stats
                self.stats.candidates = len(self.candidates)
                self._record_history()
                if ev.cancelled and self._cancel_at is not None:
                    self.stopped_in = time.monotonic() - self._cancel_at
            self._emit(ProgressUpdated(self.stats))
            self._set_state("stopped" if ev.cancelled else "finished")
            return True
        elif isinstance(ev, SearchError):
            with self._lock:
                self.errors.append(ev.message)
            self._emit(ErrorReported(ev.message))
        return False

    def _record_history(self) -> None:
        self.history.append(_sample(self.stats, len(self.candidates)))
        if len(self.history) > _MAX_HISTORY:  # a long search: keep every other old sample
            self.history = self.history[: -_MAX_HISTORY // 2: 2] + self.history[-_MAX_HISTORY // 2:]

    @property
    def cancel_requested(self) -> bool:
        return self._cancel.is_set()

    def cancel(self) -> None:
        """Ask the search to stop and return at once (the candidates found so far are kept)."""
        if self._thread is None:  # never started: nothing to wait for
            self._set_state("stopped")
            self._done.set()
            return
        if not self._done.is_set() and not self._cancel.is_set():
            self._cancel_at = time.monotonic()
            self._cancel.cancel()
            self._emit(StopRequested())

    def stop(self, timeout: float | None = 5.0, widgets: Iterable[Any] = ()) -> bool:
        """Cancel the search and wait up to ``timeout`` s for it to end (``0``: only ask); returns whether it has."""
        self.cancel()
        return self.wait(timeout, widgets) if timeout else self._done.is_set()

    def wait(self, timeout: float | None = None, widgets: Iterable[Any] = ()) -> bool:
        """Block until the search ends (or ``timeout`` s pass); returns whether it has ended.

        In a notebook, clicks on ``widgets`` (a view of this session) are handled while it waits
        (:func:`~.ui_wait.wait_until`).
        """
        from .ui_wait import wait_until

        if self._thread is None:
            return self._done.is_set()
        return wait_until(self._done.is_set, timeout, widgets)

    @property
    def done(self) -> bool:
        return self._done.is_set()

    # ================================================================== candidates
    def record(self, index: int) -> CandidateRecord:
        """The candidate found ``index``-th."""
        with self._lock:
            for r in self.candidates:
                if r.index == index:
                    return r
        raise IndexError(f"no candidate {index}; the search has found {len(self.candidates)}")

    def _find(self, index: int | None) -> CandidateRecord | None:
        try:
            return None if index is None else self.record(index)
        except IndexError:
            return None

    def best_index(self) -> int | None:
        """The fastest measured candidate, else the cheapest by static cost (kernels, then bytes); None if none."""
        with self._lock:
            if not self.candidates:
                return None
            timed = [r for r in self.candidates if r.latency_us is not None]
            best = (min(timed, key=lambda r: (r.latency_us, r.index)) if timed else
                    min(self.candidates, key=lambda r: (r.kernels, r.bytes, r.index)))
        return best.index

    @property
    def result(self) -> Any:
        """The search so far as a :class:`mirage_lab.search.SearchResult` (candidates, costs, stats, measurements)."""
        from ..search import SearchResult
        from ..search.cost import static_cost

        with self._lock:
            graphs = [r.graph for r in self.candidates]
            rows = list(self.measurements.values())
            stats, errors = self.stats, list(self.errors)
        return SearchResult(self.program, graphs, [static_cost(g) for g in graphs], stats,
                            cancelled=self.state == "stopped", errors=errors, measurements=rows)

    # ================================================================== verification
    def verify(self, index: int) -> None:
        """Start ``mi.verify.equivalent(program, candidate)`` in the background (once per candidate)."""
        rec = self.record(index)
        with self._lock:
            if index in self.verification or index in self._verify_events:
                return
            ev = self._verify_events[index] = threading.Event()

        def work() -> None:
            from ..verify import equivalent

            with self._verify_lock:
                try:
                    res: Any = equivalent(self.program, rec.graph)
                except Exception as e:  # reported as the result: the pane shows it
                    res = f"{type(e).__name__}: {e}"
            self.verification[index] = res
            ev.set()
            self._emit(VerificationDone(index, res))

        threading.Thread(target=work, daemon=True, name=f"mirage_lab-verify-{index}").start()

    def verified(self, index: int, timeout: float | None = None) -> Any:
        """The verification of candidate ``index`` (started if need be), waiting up to ``timeout`` s.

        An ``EquivalenceResult``; ``None`` while it runs; the error text if it could not run.
        """
        from .ui_wait import wait_until

        self.verify(index)
        ev = self._verify_events.get(index)
        if ev is not None:
            wait_until(ev.is_set, timeout)
        return self.verification.get(index)

    # ================================================================== measurements
    def add_measurements(self, rows: Iterable[LatencyRow]) -> None:
        """Store latency rows measured elsewhere (``{label: row}`` in :attr:`measurements`).

        A candidate row whose ``candidate`` is a found candidate's index sets its latency.

            >>> from mirage_lab import examples as ex
            >>> s = ExplorerSession(ex.rms_norm_linear_program(4, 256, 256))
            >>> s.add_measurements([LatencyRow("torch eager", "baseline", 41.0)])
            >>> list(s.measurements)
            ['torch eager']
        """
        rows = tuple(check_rows(rows, "add_measurements"))
        touched = []
        with self._lock:
            for row in rows:
                self.measurements[row.label] = row
                rec = self._find(row.candidate) if row.kind == CANDIDATE else None
                if rec is not None:
                    rec.latency, rec.measure_error, rec.lowered = row, None, None
                    touched.append(rec)
        self._emit(MeasurementsAdded(rows, tuple(touched)))

    def _candidate_measured(self, index: int, result: Any, row: LatencyRow | None) -> None:
        """One candidate's fastest lowering so far (a pipeline ``VariantResult``) and its row, or its failure."""
        with self._lock:
            rec = self._find(index)
            if rec is not None:
                rec.latency = row
                rec.measure_error = result.error if result.error else (None if row else "not measured")
                rec.lowered = result.variant if row is not None else None  # export exactly what was timed
            if row is not None:
                self.measurements[row.label] = row
        self._emit(MeasurementsAdded((row,) if row is not None else (), (rec,) if rec is not None else ()))

    @property
    def measuring(self) -> bool:
        return self._measure_thread is not None and self._measure_thread.is_alive()

    def measure(self, inputs: Any = None, *, baselines: bool = True, compile_mode: str | None = "default",
                repeats: int = 200, block: bool = False) -> bool:
        """On a GPU: tune and time every unmeasured candidate through the pipeline, then the torch baselines.

        Runs in the background (``block=True`` waits); returns whether it started (not while
        a measurement runs). Without a GPU it raises and says so.
        """
        from .measure import gpu_available

        if not gpu_available():
            raise RuntimeError("No GPU: latencies are measured on a CUDA machine (torch.cuda.is_available() is False)")
        with self._lock:
            if self.measuring:
                return False
            todo = [(r.index, r.graph) for r in self.candidates if r.latency_us is None]

            def work() -> None:
                from .measure import measure

                err = None
                try:
                    measure(self.program, todo, inputs=inputs, baselines=baselines, compile_mode=compile_mode,
                            repeats=repeats, on_candidate=self._candidate_measured, on_baselines=self.add_measurements)
                except Exception as e:  # reported through MeasureFinished
                    err = f"{type(e).__name__}: {e}"
                self._emit(MeasureFinished(len(todo), err))

            self._measure_thread = threading.Thread(target=work, daemon=True, name="mirage_lab-measure")
            self._measure_thread.start()
        if block:
            from .ui_wait import wait_until

            thread = self._measure_thread
            wait_until(lambda: not thread.is_alive())
        return True

    # ================================================================== export
    def export(self, index: int, path: str | Path | None = None) -> Path:
        """Write candidate ``index`` as a standalone module; returns its absolute path.

        ``path``: a file, or a folder to put it in under the record's ``module_name``; default: that name in
        the working directory. A relative path is taken from the working directory.

        The module is the runtime's export (:func:`mirage_lab.runtime.export`): generated
        Numba-CUDA kernels plus ``forward(*tensors)``, lowered exactly as it was timed. Its
        docstring records the measured latency and device, or says "not measured".
        """
        from ..runtime.export import export

        rec = self.record(index)
        v, row = rec.lowered, rec.latency
        target = Path(path or rec.module_name).expanduser()
        if target.is_dir():
            target = target / rec.module_name
        out = export(v.graph if v is not None else rec.graph, target.absolute(), latency_us=rec.latency_us,
                     device=(row.device or None) if row is not None else None,
                     options=v.options if v is not None else None)
        self._emit(Exported(index, out, out.read_text().count("\n"), rec.latency_us))
        return out

    def __repr__(self) -> str:
        return (f"ExplorerSession({self.state}, {len(self.candidates)} candidates, states={self.stats.states}, "
                f"{len(self.measurements)} measurements)")


__all__ = ["ExplorerSession", "SessionEvent", "Listener", "STATES", "ProgressUpdated", "CandidateAdded",
           "StateChanged", "StopRequested", "ErrorReported", "SearchEnded", "VerificationDone", "MeasurementsAdded",
           "MeasureFinished", "Exported"]
