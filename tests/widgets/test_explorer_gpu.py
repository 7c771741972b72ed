"""The explorer's GPU path: Measure on GPU fills the latency column and plot; export records the latency.

Runs only where torch sees a CUDA device. The candidates are hand-built fused μGraphs (no search,
so that the test needs neither z3 nor time): what matters here is measure → table → plot → export.
"""
from __future__ import annotations

import pytest
import torch

pytest.importorskip("ipywidgets", reason="the explorer needs ipywidgets (the notebook extra)")
pytest.importorskip("plotly", reason="the explorer's plot needs plotly (the notebook extra)")
pytest.importorskip("anywidget", reason="plotly's FigureWidget needs anywidget (a dependency; not on the bare GPU host)")

from mirage_lab import examples as ex  # noqa: E402
from mirage_lab.runtime import LatencyRow  # noqa: E402
from mirage_lab.widgets import CandidateRecord, SearchExplorer  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.timeout(600),
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


def test_measure_on_gpu_fills_the_table_the_plot_and_the_export(tmp_path):
    program = ex.rms_norm_linear_program(16, 1024, 1024)
    w = SearchExplorer(program, autostart=False)
    assert w.stop() and not w.measure_button.disabled
    for i, (grid, frange) in enumerate([(64, 8), (128, 16)]):
        w.candidates.append(CandidateRecord.from_graph(i, ex.rms_norm_linear_fused(16, 1024, 1024, grid=grid,
                                                                                   forloop_range=frange)))
    w.table.set_records(w.candidates)
    w.measure(block=True, compile_mode=None, repeats=50)
    assert w.message.value.startswith("✓ measured 2 candidates"), w.message.value
    for r in w.candidates:
        assert r.measure_error is None and 0 < r.latency_us < 10_000, (r.latency_us, r.measure_error)
    assert {"torch eager", "torch + CUDA graph", "candidate 0", "candidate 1"} <= set(w.measurements)
    assert all(isinstance(r, LatencyRow) and r.device == torch.cuda.get_device_name() for r in w.measurements.values())
    assert all(r.lowered is not None and r.latency.options.startswith(f"t{r.lowered.threads}/") for r in w.candidates)
    rows = [b.description.replace("\u00a0", " ") for b in w.table.body.children]
    assert all("µs" in row for row in rows)
    fig = w.latency_figure_widget
    assert w.plot_choice.value == "latency" and [t.name for t in fig.data] == ["candidates", "baselines"]
    assert list(fig.data[1].y) == ["torch eager", "torch + CUDA graph"]
    best = w.select_best()
    assert w.record(best).latency_us == min(r.latency_us for r in w.candidates)
    text = w.export(tmp_path / "best.py").read_text()
    assert f"Measured latency: {w.record(best).latency_us:.2f} µs" in text and torch.cuda.get_device_name() in text
