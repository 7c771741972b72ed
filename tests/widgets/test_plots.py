"""mirage_lab.viz.plots and the typed rows it draws: LatencyRow built from each thing that measures
(profile_baselines, select_fastest's Selection, the autotuner's TuneReport), the no-GPU figure."""
from __future__ import annotations

import pytest

from mirage_lab import examples as ex
from mirage_lab.codegen import CodegenOptions
from mirage_lab.pipeline import Candidate, Estimate, Selection, TuneReport, Variant, VariantResult
from mirage_lab.runtime import LatencyRow, baseline_rows
from mirage_lab.runtime.profile import Timing, floor_us
from mirage_lab.search.events import Progress, SearchStats
from mirage_lab.viz.plots import NO_GPU_TITLE, latency_figure, progress_figure


def _t(name: str, mode: str, med: float) -> Timing:
    return Timing(name, mode, med, med * 0.9, med * 1.2, 200)


def _baselines() -> dict[str, Timing]:
    return {"torch_eager": _t("torch", "eager", 40.0), "torch_cuda_graph": _t("torch", "cuda_graph", 30.0),
            "torch_python_call": _t("torch", "python_call", 80.0), "torch_compile": _t("torch.compile", "eager", 25.0)}


def test_no_rows_says_no_gpu_and_keeps_the_floor():
    floor = floor_us(ex.rms_norm_linear_program())
    for empty in (None, [], ()):
        fig = latency_figure(empty, floor_us=floor)
        assert fig.layout.title.text == NO_GPU_TITLE
        assert len(fig.data) == 0
        note = " ".join(a.text for a in fig.layout.annotations)  # one plain-text line each
        assert "CUDA GPU" in note and f"{floor:.3g} µs" in note
        assert fig.layout.xaxis.visible is False


def test_a_row_is_checked_once_where_it_is_made():
    with pytest.raises(ValueError, match="finite"):
        LatencyRow("candidate 0", "candidate", float("inf"))   # an untimed candidate has no row
    with pytest.raises(ValueError, match="kind"):
        LatencyRow("candidate 0", "kernel", 1.0)
    assert LatencyRow("c", "candidate", 3).median_us == 3.0 and isinstance(LatencyRow("c", "candidate", 3).median_us, float)


def test_baseline_and_candidate_rows_give_bars_whiskers_and_the_floor():
    base = baseline_rows(_baselines(), device="NVIDIA H100")
    assert [r.label for r in base] == ["torch eager", "torch + CUDA graph", "torch.compile"]  # python call left out
    cands = [LatencyRow.from_timing("candidate 0", _t("m", "cuda_graph", 12.9), kind="candidate", candidate=0,
                                    device="NVIDIA H100"),
             LatencyRow("candidate 1", "candidate", 15.0, 14.0, 17.0, device="NVIDIA H100")]
    fig = latency_figure(base + cands, floor_us=11.3)  # candidates are drawn first whatever the order given
    cand, bl = fig.data
    assert (cand.name, bl.name) == ("candidates", "baselines")
    assert list(cand.y) == ["candidate 0", "candidate 1"] and list(cand.x) == [12.9, 15.0]
    assert list(bl.y) == ["torch eager", "torch + CUDA graph", "torch.compile"] and list(bl.x) == [40.0, 30.0, 25.0]
    assert cand.error_x.array[0] == pytest.approx(12.9 * 0.2)     # p90 whisker
    assert cand.error_x.arrayminus[0] == pytest.approx(12.9 * 0.1)
    (floor_line,) = fig.layout.shapes
    assert floor_line.x0 == floor_line.x1 == 11.3 and floor_line.line.dash == "dash"
    assert "memory floor 11.3 µs" in fig.layout.annotations[0].text
    assert fig.layout.title.text == "Latency per call on NVIDIA H100 (median, p10–p90)"  # modes differ: not named
    with pytest.raises(TypeError, match="Timing"):
        baseline_rows({"torch_eager": 40.0})


def test_selection_rows_number_the_graphs_and_name_options():
    g1, g2, g3 = (ex.rms_norm_linear_fused(grid=n) for n in (64, 128, 256))
    sel = Selection(None, [Candidate(g1, timings={"cuda_graph": _t("m", "cuda_graph", 14.0),
                                                  "eager": _t("m", "eager", 20.0)}),
                           Candidate(g2, error="relative error 0.3 exceeds 0.002"),
                           Candidate(g3, timings={})])
    rows = sel.latency_rows(device="")
    assert [(r.label, r.kind, r.median_us, r.candidate) for r in rows] == [("candidate 0", "candidate", 14.0, 0)]
    assert sel.latency_rows([5, 6, 7], mode="eager", device="")[0].label == "candidate 5"
    assert sel.latency_rows([5, 6, 7], mode="eager", device="")[0].median_us == 20.0
    # select_fastest(..., options=[a, b]) times each graph under each option: the label says which.
    twice = Selection(None, [Candidate(g1, timings={"cuda_graph": _t("m", "cuda_graph", 14.0)}),
                             Candidate(g1, CodegenOptions(mma=True), timings={"cuda_graph": _t("m", "cuda_graph", 13.0)})])
    names = [r.label for r in twice.latency_rows(device="")]
    assert len(set(names)) == 2 and all(n.startswith("candidate 0 [") for n in names)


def test_tune_report_rows_keep_each_candidates_fastest_variant():
    g = ex.rms_norm_linear_fused(grid=64)
    est = Estimate(10.0, 8.0, 2.0, 1, 1.0)

    def res(cand: int, threads: int, med: float | None, error: str | None = None) -> VariantResult:
        r = VariantResult(Variant(cand, g, CodegenOptions(), threads), est, rel_err=None if error else 1e-4,
                          error=error)
        if med is not None:
            r.timings["cuda_graph"] = _t("v", "cuda_graph", med)
        return r

    rep = TuneReport([res(0, 128, 20.0), res(0, 256, 15.0), res(1, 128, 18.0), res(1, 256, None, "compile: boom")],
                     None, {**_baselines(), "error": "torch.compile failed"}, 11.3, "randn", 1.0, 60.0, 0,
                     "NVIDIA H100", True)
    cands = rep.candidate_rows(numbers=[7, 3])  # the tuned shortlist, numbered as the search found them
    assert [(r.label, r.median_us, r.candidate, r.options) for r in cands] == [
        ("candidate 7", 15.0, 7, "t256/" + CodegenOptions().tag()), ("candidate 3", 18.0, 3, "t128/" + CodegenOptions().tag())]
    assert len(rep.candidate_rows(every_variant=True)) == 3
    rows = rep.latency_rows()
    assert [r.kind for r in rows] == ["candidate"] * 2 + ["baseline"] * 3   # the failed baseline note is no row
    assert {r.device for r in rows} == {"NVIDIA H100"}
    assert latency_figure(rows, floor_us=rep.floor_us).data[0].y == ("candidate 0", "candidate 1")


def test_anything_but_rows_is_a_type_error_naming_the_type():
    for bad in ({"candidate 0": 3.0}, 42, "candidate 0", [3.0], [_t("m", "cuda_graph", 1.0)]):
        with pytest.raises(TypeError, match=r"expected a sequence of mirage_lab\.runtime\.LatencyRow"):
            latency_figure(bad)
    fig = latency_figure([LatencyRow("a", "candidate", 3), LatencyRow("torch eager", "baseline", 5.5)])
    assert [list(t.y) for t in fig.data] == [["a"], ["torch eager"]]
    assert fig.data[0].error_x.array is None  # no quantiles: no whiskers
    assert len(fig.layout.shapes) == 0       # no floor given
    assert "cuda graph" in fig.layout.title.text


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
