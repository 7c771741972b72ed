"""mi.inspect / mi.compare / best.inspect(): what the JupyterLab inspector receives, and bad input."""
from __future__ import annotations

import math
import shutil

import pytest

import mirage_lab as mi
from mirage_lab import examples as ex
from mirage_lab.codegen import CodegenOptions
from mirage_lab.ir.serialize import MIME_TYPE
from mirage_lab.pipeline import Estimate, OptimizedGraph, TuneReport, Variant, VariantResult
from mirage_lab.runtime.profile import Timing
from mirage_lab.viz.inspector import COMPARE_MIME_TYPE, Comparison, Inspection, normalize_metrics, op_metrics

GQA_METRICS = {"op3": {"latency_us": 31.5, "bytes": 134217728}, "op4": {"latency_us": 6.2, "note": "reduce"}}


def test_inspect_carries_the_graph_its_metrics_and_the_view_hints():
    g = ex.gqa_flashdecoding()
    view = mi.inspect(g, metrics=GQA_METRICS, expand="block", title="GQA")
    assert isinstance(view, Inspection)
    bundle = view._repr_mimebundle_()
    data = bundle[MIME_TYPE]
    assert data["format"] == "mirage_lab.mugraph" and data["metrics"] == GQA_METRICS
    assert data["view"] == {"expand": "block", "metric": "latency_us", "title": "GQA"}
    assert [op["id"] for op in data["kernel_graph"]["ops"]] == [op.guid for op in g.ops]
    assert "customized" in bundle["text/plain"]
    if shutil.which("dot"):
        assert "<svg" in bundle["image/svg+xml"]
    # Colour by another metric, or by none: the only numeric metric is chosen by default.
    assert mi.inspect(g, GQA_METRICS, color_by="bytes").data["view"]["metric"] == "bytes"
    assert mi.inspect(g, {"op4": {"t": 1.0}}).data["view"]["metric"] == "t"
    assert "metric" not in mi.inspect(g).data["view"]


def test_metrics_keys_may_be_op_ids_names_or_ops_and_numpy_scalars_become_numbers():
    np = pytest.importorskip("numpy")
    g = ex.gqa_flashdecoding()
    op3 = next(op for op in g.ops if op.guid == 3)
    m = normalize_metrics(g, {3: {"a": 1}, "op4": {"a": np.float32(2.5)}, op3: {"b": 7}})
    assert m == {"op3": {"a": 1, "b": 7}, "op4": {"a": 2.5}}


@pytest.mark.parametrize("metrics, color_by, expand, message", [
    ({"op9": {"x": 1}}, None, "kernel", r"'op9' is not a kernel op of this μGraph; its ops are op0, op1, op2, op3, op4"),
    ([{"op3": {"x": 1}}], None, "kernel", r"metrics must be a dict"),
    ({"op3": 5}, None, "kernel", r"metrics\['op3'\] must be a dict"),
    ({"op3": {"x": float("nan")}}, None, "kernel", r"only finite numbers"),
    ({"op3": {"x": [1, 2]}}, None, "kernel", r"must be a number or text, got list"),
    ({"op3": {"latency_us": 1}}, "latency", "kernel", r"did you mean 'latency_us'\?"),
    (None, "latency_us", "kernel", r"no metrics with numbers were given"),
    (None, None, "blok", r"expand='blok'.*did you mean 'block'\?"),
])
def test_bad_input_is_a_mirage_lab_error_that_says_the_fix(metrics, color_by, expand, message):
    with pytest.raises(mi.MirageLabError, match=message):
        mi.inspect(ex.gqa_flashdecoding(), metrics, color_by=color_by, expand=expand)
    with pytest.raises(mi.MirageLabError, match="must be a μGraph"):
        mi.inspect("not a graph")


def test_compare_puts_two_candidates_and_their_numbers_in_one_bundle():
    a, b = ex.rms_norm_linear_fused(grid=8), ex.rms_norm_linear_fused(grid=16)
    c = mi.compare(a, b, metrics_a={"op2": {"latency_us": 12.0}}, metrics_b={2: {"latency_us": 9.0}},
                   labels=("grid 8", "grid 16"), summaries=[{"device": "H100"}, None])
    assert isinstance(c, Comparison) and c.labels == ("grid 8", "grid 16")
    bundle = c._repr_mimebundle_()
    data = bundle[COMPARE_MIME_TYPE]
    assert data["format"] == "mirage_lab.mugraph-compare" and len(data["candidates"]) == 2
    ga, gb = (x["graph"] for x in data["candidates"])
    assert ga["view"]["summary"] == {"kernel ops": 1, "customized ops": 1, "latency_us (sum)": 12.0, "device": "H100"}
    assert gb["view"]["summary"]["latency_us (sum)"] == 9.0
    assert ga["view"]["metric"] == gb["view"]["metric"] == "latency_us"   # one shared colouring
    assert ga["kernel_graph"]["ops"][2]["block_graph"]["grid_dim"][0] == 8
    assert gb["kernel_graph"]["ops"][2]["block_graph"]["grid_dim"][0] == 16
    assert "grid 8" in bundle["text/plain"] and "grid 16" in bundle["text/html"]
    # inspect([a, b]) is the same comparison
    same = mi.inspect([a, b], [{"op2": {"latency_us": 12.0}}, {"op2": {"latency_us": 9.0}}])
    assert [x["graph"]["metrics"] for x in same.data["candidates"]] == [ga["metrics"], gb["metrics"]]


def test_compare_refuses_what_it_cannot_show():
    g = ex.rms_norm_linear_fused()
    with pytest.raises(mi.MirageLabError, match="at least two graphs"):
        mi.compare(g)
    with pytest.raises(mi.MirageLabError, match="labels has 1 entries for 2 graphs"):
        mi.compare(g, g, labels=["a"])
    with pytest.raises(mi.MirageLabError, match="labels must differ"):
        mi.compare(g, g, labels=["a", "a"])
    with pytest.raises(mi.MirageLabError, match="one metrics dict per graph"):
        mi.inspect([g, g], {"op2": {"x": 1}})


def test_op_metrics_count_bytes_and_matmul_flops_over_blocks_and_loop():
    g = ex.gqa_flashdecoding()
    m = op_metrics(g)
    assert sorted(m) == ["op3", "op4"]   # inputs launch nothing
    op3 = next(op for op in g.ops if op.guid == 3)
    assert m["op3"]["hbm_bytes"] == sum(t.nbytes() for t in (*op3.inputs, *op3.outputs))
    bg = op3.block_graph
    want = sum(2 * math.prod(o.inputs[0].dims) * o.inputs[1].dims[-1] for o in bg.ops if o.op_type == "matmul")
    assert m["op3"]["flops"] == want * math.prod(bg.grid_dim) * bg.forloop_range > 0


def _optimized(graph, *, timed: bool, median: float = 18.9) -> OptimizedGraph:
    res = VariantResult(Variant(0, graph, CodegenOptions(), 256), Estimate(21.0, 20.0, 3.0, 1, 1.0), rel_err=3e-4)
    if timed:
        res.timings["cuda_graph"] = Timing("v", "cuda_graph", median, median * 0.95, median * 1.1, 200)
    rep = TuneReport([res], res, {}, 11.3, "randn", 1.0, 60.0, 0, "NVIDIA H100" if timed else "", timed)
    return OptimizedGraph(graph, CodegenOptions(), program=graph, report=rep)


def test_best_inspect_is_coloured_by_the_tuners_measurement():
    best = _optimized(ex.rms_norm_linear_fused(), timed=True)
    data = best.inspect()._repr_mimebundle_()[MIME_TYPE]
    # One launched kernel: the measured time is that kernel's, and colours it.
    assert data["metrics"]["op2"]["latency_us"] == 18.9 and data["view"]["metric"] == "latency_us"
    s = data["view"]["summary"]
    assert (s["latency_us"], s["device"], s["threads"], s["options"]) == (18.9, "NVIDIA H100", 256, CodegenOptions().tag())
    assert s["p10_us"] < s["latency_us"] < s["p90_us"] and s["rel_err"] == 3e-4
    assert "18.9 µs measured" in data["view"]["title"]
    # Several kernels: no per-kernel time was measured, so none is shown; structure metrics colour.
    multi = _optimized(ex.gqa_flashdecoding(), timed=True).inspect(color_by="hbm_bytes").data
    assert all("latency_us" not in row for row in multi["metrics"].values())
    assert multi["view"]["metric"] == "hbm_bytes" and multi["view"]["summary"]["latency_us"] == 18.9
    # The CUDA simulator checks but does not time: the summary says so.
    sim = _optimized(ex.rms_norm_linear_fused(), timed=False).inspect().data
    assert "not timed" in sim["view"]["summary"]["latency_us"] and "latency_us" not in sim["metrics"]["op2"]
    # A comparison of two tuned results shows both measurements.
    c = mi.compare(_optimized(ex.rms_norm_linear_fused(), timed=True, median=25.0), best, labels=("before", "after"))
    assert [x["graph"]["view"]["summary"]["latency_us"] for x in c.data["candidates"]] == [25.0, 18.9]
