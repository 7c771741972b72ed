"""ExplorerSession without widgets: real small searches, its events, cancel, verification, typed
measurements and export (RMSNorm+Linear X[4,256]·W[256,256], at most 3 kernel ops: seconds)."""
from __future__ import annotations

import importlib.util
import threading
import time

import pytest

from mirage_lab import examples as ex
from mirage_lab.runtime import LatencyRow
from mirage_lab.widgets.measure import gpu_available
from mirage_lab.widgets.session import (CandidateAdded, ExplorerSession, Exported, MeasurementsAdded, ProgressUpdated,
                                        SearchEnded, StateChanged, StopRequested, VerificationDone)
from proc_helpers import run_python

pytestmark = pytest.mark.timeout(240)


def program():
    return ex.rms_norm_linear_program(4, 256, 256)


def test_a_search_to_the_end_events_candidates_verification_measurements_export(tmp_path):
    s = ExplorerSession(program(), workers=1, max_kernel_ops=3, franges=[4], max_block_ops=6)
    events: list = []
    s.subscribe(events.append)
    s.subscribe(lambda ev: 1 / 0 if isinstance(ev, CandidateAdded) else None)  # a broken listener...
    assert s.start() is s and s.wait(180)
    assert s.state == "finished" and s.done and not s.errors
    assert s.listener_errors and "ZeroDivisionError" in s.listener_errors[0]   # ...is recorded; the search went on

    # The events, in order: running, progress and candidates, finished, the thread's end.
    assert events[0] == StateChanged("running", "idle") and events[-1] == SearchEnded("finished")
    assert events[-2] == StateChanged("finished", "running")
    added = [e.record for e in events if isinstance(e, CandidateAdded)]
    assert len(added) >= 2 and added == s.candidates and [r.index for r in added] == list(range(len(added)))
    assert any(isinstance(e, ProgressUpdated) for e in events) and s.history[-1]["candidates"] == len(added)
    assert s.stats.subtrees_done == s.stats.subtrees_total > 0 and s.stats.candidates == len(added)
    assert all(r.graph.customized_ops and r.bytes > 0 and r.latency is None for r in s.candidates)
    res = s.result
    assert not res.cancelled and len(res.candidates) == len(added) and res.measurements == []

    # Verification runs in the background and reports.
    v = s.verified(0, timeout=60)
    assert v and v.permutation == (0,) and s.verification[0] is v
    assert _until(lambda: VerificationDone(0, v) in events, 5)

    # Measurements are LatencyRows and nothing else; a candidate row sets that candidate's latency.
    with pytest.raises(TypeError, match="LatencyRow"):
        s.add_measurements({"candidate 1": 12.5})
    cheapest = s.best_index()
    slow = next(r.index for r in s.candidates if r.index != cheapest)
    rows = [LatencyRow(f"candidate {slow}", "candidate", 9.5, candidate=slow, device="NVIDIA H100"),
            LatencyRow("torch eager", "baseline", 40.0)]
    s.add_measurements(rows)
    assert events[-1] == MeasurementsAdded(tuple(rows), (s.record(slow),))
    assert s.record(slow).latency_us == 9.5 and s.best_index() == slow  # measured beats the static cost
    assert list(s.measurements) == [f"candidate {slow}", "torch eager"] and s.result.measurements == rows

    # Export writes a module that imports, with the latency and the device it was measured on.
    out = s.export(slow, tmp_path / "best.py")
    assert isinstance(events[-1], Exported) and events[-1].path == out and events[-1].latency_us == 9.5
    text = out.read_text()
    assert s.record(slow).hash in text and "9.50 µs" in text and "NVIDIA H100" in text
    spec = importlib.util.spec_from_file_location("mirage_session_export", out)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert callable(mod.forward) and [list(d) for d, _ in mod.INPUTS] == [[4, 256], [256, 256]]
    assert s.record(cheapest).module_name.startswith(f"mirage_candidate_{cheapest}_")


def test_cancel_ends_the_search_within_a_second_and_keeps_the_candidates():
    from mirage_lab.search import worker

    worker._WORKER_CACHE.clear()  # a fresh search: a memoised repeat could end before the cancel
    s = ExplorerSession(program(), workers=1, max_kernel_ops=3)
    first = threading.Event()
    events: list = []
    s.subscribe(lambda ev: (events.append(ev), isinstance(ev, CandidateAdded) and first.set()))
    s.start()
    assert first.wait(60), "a first candidate should come within seconds"
    assert s.state == "running"
    t0 = time.monotonic()
    assert s.stop(timeout=10)
    took = time.monotonic() - t0
    assert took < 1.6 and s.stopped_in is not None and s.stopped_in < 1.6, took
    assert s.state == "stopped" and s.stats.subtrees_done < s.stats.subtrees_total
    kinds = [type(e) for e in events]
    assert kinds.index(StopRequested) < kinds.index(SearchEnded) and events[-1] == SearchEnded("stopped")
    assert StateChanged("stopped", "running") in events
    assert s.candidates and s.result.cancelled and len(s.result.candidates) == len(s.candidates)
    with pytest.raises(RuntimeError, match="already started"):
        s.start()


def test_no_gpu_no_measure_and_a_session_never_started():
    s = ExplorerSession(program(), workers=1, max_kernel_ops=3)
    assert s.state == "idle" and s.best_index() is None
    if not gpu_available():
        with pytest.raises(RuntimeError, match="No GPU"):
            s.measure()
    assert s.stop() and s.state == "stopped" and s.done
    with pytest.raises(IndexError, match="no candidate 0"):
        s.export(0)


def test_the_session_needs_no_ipywidgets(tmp_path):
    # A fresh interpreter: this process has imported ipywidgets for the widget tests.
    code = """
import json, sys
from mirage_lab import examples as ex
from mirage_lab.widgets import ExplorerSession
from mirage_lab.runtime import LatencyRow
s = ExplorerSession(ex.rms_norm_linear_program(4, 256, 256), workers=1, max_kernel_ops=3)
s.add_measurements([LatencyRow("torch eager", "baseline", 41.0)])
s.stop()
print("RESULTS " + json.dumps({"state": s.state, "ipywidgets": "ipywidgets" in sys.modules,
                               "plotly": "plotly" in sys.modules}))
"""
    assert run_python(code, tmp_path, simulator=False, timeout=300) == {"state": "stopped", "ipywidgets": False,
                                                                        "plotly": False}


def _until(cond, timeout: float, step: float = 0.05) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(step)
    return cond()


def fake_autotune(fail: int | None = None, calls: list | None = None):
    """A stand-in for pipeline.autotune with the real records: each candidate's variants at 128 and 256
    threads (the 256 one faster), candidate ``fail`` failing to compile; torch baselines."""
    from mirage_lab.codegen import CodegenOptions
    from mirage_lab.pipeline import Estimate, TuneReport, Variant, VariantDone, VariantResult
    from mirage_lab.runtime.profile import Timing

    def autotune(program, candidates, *, on_event, **kw):
        if calls is not None:
            calls.append(list(candidates))
        results = []
        for c, g in enumerate(candidates):
            for threads, us in ((128, 20.0 + c), (256, 15.0 + c)):
                r = VariantResult(Variant(c, g, CodegenOptions(max_stream_acc=64), threads), Estimate(9.0, 8.0, 1.0, 1, 1.0))
                if c == fail:
                    r.error = "compile/launch: boom"
                else:
                    r.rel_err = 1e-4
                    r.timings["cuda_graph"] = Timing("v", "cuda_graph", us, us - 1, us + 2, 100)
                results.append(r)
                on_event(VariantDone(r, len(results), 2 * len(candidates), 0.1))
        base = {"torch_eager": Timing("torch", "eager", 41.0, 40.0, 43.0, 100),
                "torch_python_call": Timing("torch", "python_call", 60.0, 59.0, 61.0, 100)}
        return TuneReport(results, None, base, 1.0, "randn", 1.0, 60.0, 0, "NVIDIA H100", True)

    return autotune


def test_measure_path_with_a_stand_in_autotuner(monkeypatch, tmp_path):
    # The GPU path's plumbing on any machine: autotuner records -> rows -> candidates, measurements, export.
    import mirage_lab.pipeline
    import mirage_lab.widgets.measure as measure_mod
    from mirage_lab.widgets.records import CandidateRecord

    monkeypatch.setattr(measure_mod, "gpu_available", lambda: True)
    monkeypatch.setattr(measure_mod, "current_device", lambda: "NVIDIA H100")
    calls: list = []
    monkeypatch.setattr(mirage_lab.pipeline, "autotune", fake_autotune(fail=1, calls=calls))
    s = ExplorerSession(program())
    s.stop()
    for i, grid in enumerate((8, 16)):
        s.candidates.append(CandidateRecord.from_graph(i, ex.rms_norm_linear_fused(4, 256, 256, grid=grid,
                                                                                   forloop_range=4)))
    events: list = []
    s.subscribe(events.append)
    assert s.measure(block=True) and not s.measuring
    assert events[-1].__class__.__name__ == "MeasureFinished" and events[-1].error is None
    ok, bad = s.record(0), s.record(1)
    assert ok.latency_us == 15.0 and ok.latency.options == "t256/" + ok.lowered.options.tag() and ok.lowered.threads == 256
    assert ok.latency.device == "NVIDIA H100" and ok.measure_error is None
    assert bad.latency is None and bad.measure_error == "compile/launch: boom" and bad.lowered is None
    assert list(s.measurements) == ["candidate 0", "torch eager"]   # python call time is no row
    added = [e for e in events if isinstance(e, MeasurementsAdded)]
    assert added[0].rows[0].median_us == 20.0 and added[1].rows[0].median_us == 15.0  # as it improves
    text = s.export(0, tmp_path / "m.py").read_text()  # the lowering that was timed, and where
    assert "15.00 µs" in text and "NVIDIA H100" in text and "options pw0-regNone-acc64" in text
    assert s.measure(block=True) and calls[-1] == [bad.graph]  # again: only what has no latency yet
