"""mirage_lab.viz.plots: the figures' traces from each structure the runtime returns, and the no-GPU figure."""
from __future__ import annotations

import pytest

from mirage_lab import examples as ex
from mirage_lab.runtime.profile import Candidate, Selection, Timing, floor_us
from mirage_lab.search.events import Progress, SearchStats
from mirage_lab.viz.plots import NO_GPU_TITLE, latency_figure, latency_rows, progress_figure


def _t(name: str, mode: str, med: float) -> Timing:
    return Timing(name, mode, med, med * 0.9, med * 1.2, 200)


def test_no_measurements_says_no_gpu_and_keeps_the_floor():
    floor = floor_us(ex.rms_norm_linear_program())
    for empty in (None, {}, {"candidate 0": float("inf")}):
        fig = latency_figure(empty, floor_us=floor)
        assert fig.layout.title.text == NO_GPU_TITLE
        assert len(fig.data) == 0
        note = fig.layout.annotations[0].text
        assert "CUDA GPU" in note and f"{floor:.3g} µs" in note
        assert fig.layout.xaxis.visible is False


def test_profiler_structures_give_candidate_and_baseline_bars_with_the_floor():
    baselines = {"torch_eager": _t("torch", "eager", 40.0), "torch_cuda_graph": _t("torch", "cuda_graph", 30.0),
                 "torch_python_call": _t("torch", "python_call", 80.0), "torch_compile": _t("torch.compile", "eager", 25.0)}
    per_candidate = {"candidate 0": {"cuda_graph": _t("mirage_lab", "cuda_graph", 12.9),
                                     "eager": _t("mirage_lab", "eager", 20.0)},
                     "candidate 1": {"median_us": 15.0, "p10_us": 14.0, "p90_us": 17.0}}
    fig = latency_figure({**per_candidate, **baselines}, floor_us=11.3)
    cand, base = fig.data
    assert (cand.name, base.name) == ("candidates", "baselines")
    assert list(cand.y) == ["candidate 0", "candidate 1"] and list(cand.x) == [12.9, 15.0]
    assert list(base.y) == ["torch eager", "torch + CUDA graph", "torch.compile"]  # python call time left out
    assert list(base.x) == [40.0, 30.0, 25.0]
    assert cand.error_x.array[0] == pytest.approx(12.9 * 0.2)     # p90 whisker
    assert cand.error_x.arrayminus[0] == pytest.approx(12.9 * 0.1)
    (floor_line,) = fig.layout.shapes
    assert floor_line.x0 == floor_line.x1 == 11.3 and floor_line.line.dash == "dash"
    assert "memory floor 11.3 µs" in fig.layout.annotations[0].text
    assert "No GPU" not in fig.layout.title.text
    # The eager mode instead of CUDA-graph replay.
    assert latency_rows(per_candidate, mode="eager")[0].median_us == 20.0


def test_selection_from_select_fastest():
    g1, g2, g3 = (ex.rms_norm_linear_fused(grid=n) for n in (64, 128, 256))
    sel = Selection(None, [Candidate(g1, timings={"cuda_graph": _t("mirage_lab", "cuda_graph", 14.0)}),
                           Candidate(g2, error="relative error 0.3 exceeds 0.002"),
                           Candidate(g3, timings={})])
    rows = latency_rows(sel)
    assert [(r.name, r.kind, r.median_us) for r in rows] == [("candidate 0", "candidate", 14.0)]
    # select_fastest(..., options=[a, b]) times each graph under each option: the label says which.
    twice = Selection(None, [Candidate(g1, timings={"cuda_graph": _t("m", "cuda_graph", 14.0)}),
                             Candidate(g1, timings={"cuda_graph": _t("m", "cuda_graph", 13.0)})])
    names = [r.name for r in latency_rows(twice)]
    assert len(names) == 2 and all(n.startswith("candidate 0 [") for n in names)


def test_plain_numbers_and_bad_input():
    fig = latency_figure({"a": 3, "torch_eager": 5.5})
    assert [list(t.y) for t in fig.data] == [["a"], ["torch eager"]]
    assert fig.data[0].error_x.array is None  # no quantiles: no whiskers
    assert len(fig.layout.shapes) == 0       # no floor given
    with pytest.raises(TypeError, match="cannot read measurements"):
        latency_figure(42)


def test_progress_figure_from_events_stats_and_dicts():
    hist = [Progress(SearchStats(states=10, candidates=0, elapsed=0.25)),
            SearchStats(states=40, candidates=1, elapsed=0.5),
            {"states": 90, "candidates": 3, "elapsed": 1.0}]
    fig = progress_figure(hist)
    states, cands = fig.data
    assert (states.name, cands.name) == ("states", "candidates")
    assert list(states.x) == [0.25, 0.5, 1.0] and list(states.y) == [10, 40, 90] and list(cands.y) == [0, 1, 3]
    assert cands.yaxis == "y2" and cands.line.shape == "hv"
    assert not fig.layout.annotations
    assert progress_figure([]).layout.annotations[0].text == "No progress recorded yet"
