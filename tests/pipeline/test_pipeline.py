"""The pipeline as a user meets it: superoptimize -> a result that runs exactly what was tuned."""
from __future__ import annotations

import pytest
import torch

import mirage_lab as mi
from mirage_lab import examples as ex
from mirage_lab.codegen import CodegenOptions
from mirage_lab.pipeline import OptimizedGraph, lowering_variants, measuring_inputs, plan_variants

from pipe_helpers import ROOT, SMALL_SEARCH
from proc_helpers import run_python


def test_attention_inputs_are_scaled_until_the_program_is_finite():
    # unit randn: q·k over 64 dims has std 8, exp overflows fp16 -> the policy scales by 1/sqrt(64)
    g = ex.gqa_program(1, 16, 64, 128)
    m = measuring_inputs(g, device="cpu")
    assert m.policy == "randn/sqrt(last dim)"
    assert all(torch.isfinite(r).all() for r in m.reference)
    assert m.inputs[0].dtype == torch.float16 and m.reference[0].dtype == torch.float64
    # RMSNorm + Linear is finite on plain randn
    assert measuring_inputs(ex.rms_norm_linear_program(2, 64, 32), device="cpu").policy == "randn"


def test_given_inputs_the_program_cannot_compute_are_refused():
    g = ex.gqa_program(1, 16, 64, 128)
    xs = [torch.randn(t.dims).half() * 30 for t in g.inputs]
    with pytest.raises(mi.MirageLabError, match="non-finite"):
        measuring_inputs(g, device="cpu", inputs=xs)


def test_variants_cover_threads_and_tensor_cores_and_drop_duplicates():
    g = ex.rms_norm_linear_fused(16, 4096, 4096, grid=128, forloop_range=16)
    vs = lowering_variants(g)
    assert {v.threads for v in vs} == {128, 256, 512}
    assert any(v.options.mma for v in vs) and any(not v.options.mma for v in vs)
    assert len({v.source_key for v in vs}) == len(vs)
    for v in vs:
        assert all(op.block_graph.block_dim == (v.threads, 1, 1) for op in v.graph.customized_ops)
    # a grid whose column tiles cannot feed mma.m16n8k16: the mma options generate FMA code, kept once
    narrow = lowering_variants(ex.rms_norm_linear_fused(2, 4096, 6144))
    assert not any(v.options.mma for v in narrow)


def test_attention_with_wide_query_tiles_gets_tensor_core_variants():
    # 32 queries per block: QK^T and exp(S)V are matmuls of two staged tiles (no mma stream); the
    # tuner must still try them on tensor cores (it once relabelled these options as FMA)
    g = ex.gqa_flashdecoding(1, 32, 16, 64, kv_splits=2, q_blocks=1, forloop_range=2)
    vs = lowering_variants(g)
    mma = [v for v in vs if v.options.mma]
    assert mma and all("tiles of 16x8" in "".join(mi.codegen.generate_module(v.graph, options=v.options)
                                                    .kernel_sources.values()) for v in mma)


def test_every_candidate_gets_its_best_variant_first():
    cands = [ex.rms_norm_linear_fused(16, 1024, 1024, grid=g, forloop_range=4) for g in (16, 32, 64)]
    planned = plan_variants(cands)
    assert {v.candidate for v, _ in planned[:3]} == {0, 1, 2}
    # then every (candidate, FMA or tensor cores, block size) group's best, before any second of a group
    keys = [(v.candidate, v.options.mma, v.threads) for v, _ in planned]
    n = len(set(keys))
    assert len(set(keys[:n])) == n
    for part in (planned[3:n], planned[n:]):
        assert [e.us for _, e in part] == sorted(e.us for _, e in part)
    assert len({id(v) for v, _ in planned}) == len(planned) == sum(len(lowering_variants(c)) for c in cands)


def test_without_a_gpu_the_cost_model_picks_and_calls_run_the_reference():
    g = ex.rms_norm_linear_program(4, 64, 64)
    best = g.superoptimize(tune=False, **SMALL_SEARCH)
    assert isinstance(best, OptimizedGraph) and best.report is None and best.latency_us is None
    assert best.customized_ops, "a fused μGraph was expected"
    X, W = torch.randn(4, 64), torch.randn(64, 64)
    (out,) = best(inputs=[X, W])
    (ref,) = mi.run_reference(g, [X.double(), W.double()])
    assert float((out.double() - ref).norm() / ref.norm()) < 1e-5
    assert best.search_result.candidates and best.inputs[0].dims == (4, 64)   # the μGraph's face


def test_ir_reaches_search_runtime_and_pipeline_only_through_hooks():
    """No module of mirage_lab/ir imports the search, codegen, runtime or pipeline (eagerly or lazily)."""
    import ast

    above = {"search", "runtime", "pipeline", "codegen", "widgets", "verify", "interp", "expr", "cli", "lab"}
    bad = []
    for path in sorted((ROOT / "mirage_lab" / "ir").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level >= 2 and node.module:
                top = node.module.split(".")[0]
            elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("mirage_lab."):
                top = node.module.split(".")[1]
            else:
                continue
            if top in above:
                bad.append(f"{path.name}:{node.lineno} imports {top}")
    assert not bad, bad


SIM_TUNE = '''
import json, torch, mirage_lab as mi
from mirage_lab import examples as ex
from mirage_lab.runtime import kernel as rk
g = ex.rms_norm_linear_program(4, 64, 64)
events = []
real_compile = rk.compile
failing = []   # the block size of the first lowering compiled (the cost model's first pick) cannot launch
def flaky(graph, **kw):  # (as a 512-thread block out of registers would)
    threads = graph.customized_ops[0].block_graph.block_dim[0]
    failing[:] = failing or [threads]
    if threads == failing[0]:
        raise RuntimeError("CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES (simulated)")
    return real_compile(graph, **kw)
rk.compile = flaky
best = g.superoptimize(tune=True, tune_seconds=600, max_candidates=1, on_event=lambda e: events.append(type(e).__name__),
                       workers=1, max_kernel_ops=4, max_block_ops=5, griddims=[(4, 1, 1)], franges=[4])
rep = best.report
X, W = torch.randn(4, 64).half(), torch.randn(64, 64).half()
(o,) = best(inputs=[X, W])
(o2,) = best(inputs=[X, W], graph=True)          # accepted (replay needs a real GPU; the simulator launches)
(o3,) = best.graph(inputs=[X, W], graph=True)    # KernelGraph.__call__ passes graph= through
(ref,) = mi.run_reference(g, [X.double(), W.double()])
err = lambda a: float((a.double() - ref).norm() / ref.norm())
print("RESULTS " + json.dumps({
    "fail_threads": failing[0], "kernel_options": best.kernel.options.tag(), "measured_options": rep.best.variant.options.tag(),
    "kernel_threads": best.kernel.graph.customized_ops[0].block_graph.block_dim[0], "measured_threads": rep.best.variant.threads,
    "same_graph": best.kernel.graph is rep.best.variant.graph,
    "errors": [r.error for r in rep.results if r.error], "checked": [r.variant.threads for r in rep.results if r.rel_err is not None],
    "err": [err(o), err(o2), err(o3)], "events": sorted(set(events)), "timed": rep.timed,
    "export_has_options": rep.best.variant.options.tag() in open(best.export("exported.py")).read()}))
'''


def test_simulator_superoptimize_calls_what_was_tuned_and_skips_failures(tmp_path):
    r = run_python(SIM_TUNE, tmp_path, timeout=900)
    fail_threads = r["fail_threads"]
    assert r["kernel_options"] == r["measured_options"] and r["kernel_threads"] == r["measured_threads"]
    assert r["same_graph"]
    assert r["measured_threads"] != fail_threads and r["checked"] and fail_threads not in r["checked"]
    # the cost model's first-ranked block size failed to launch; its variants were reported and skipped
    assert any("LAUNCH_OUT_OF_RESOURCES" in e for e in r["errors"]), r["errors"]
    assert max(r["err"]) < 2e-3
    assert {"TuneStarted", "VariantDone", "TuneFinished", "CandidateFound", "Finished"} <= set(r["events"])
    assert r["timed"] is False and r["export_has_options"]


def test_run_graph_compiles_per_options(tmp_path):
    code = '''
import json, torch
from mirage_lab import examples as ex
from mirage_lab.codegen import CodegenOptions
from mirage_lab.runtime.kernel import run_graph, _BY_GRAPH
g = ex.rms_norm_linear_fused(4, 64, 64, grid=4, forloop_range=4)
xs = [torch.randn(4, 64).half(), torch.randn(64, 64).half()]
run_graph(g, xs); run_graph(g, xs, options=CodegenOptions(max_stream_acc=64)); run_graph(g, xs, graph=True)
print("RESULTS " + json.dumps(sorted(k[2].tag() for k in _BY_GRAPH[g])))
'''
    assert run_python(code, tmp_path, timeout=900) == sorted([CodegenOptions().tag(), CodegenOptions(max_stream_acc=64).tag()])


def test_one_output_check_for_the_tuner_and_select_fastest():
    """check_outputs: poisoned outputs against the reference, the failure said the same way for both callers."""
    from mirage_lab.pipeline.autotune import check_outputs

    ref = [torch.ones(4, dtype=torch.float64)]
    seen = {}

    def kernel(inputs, poison):
        seen["poison"] = poison
        return [torch.tensor([1.0, 1.0, 1.0, 1.5])]

    err, why = check_outputs(kernel, [torch.zeros(4)], ref)
    assert seen["poison"] is True and err == pytest.approx(0.25) and why == "relative error 0.25 exceeds 0.002"
    assert check_outputs(kernel, [torch.zeros(4)], ref, tol=0.3) == (pytest.approx(0.25), None)
    nan = check_outputs(lambda inputs, poison: [torch.full((4,), float("nan"))], [], ref)
    assert nan[1] is not None and "nan" in nan[1]
    with pytest.raises(mi.MirageLabError, match="no candidates"):
        mi.pipeline.select_fastest([], [])


def test_the_shortlist_takes_each_tiling_in_turn():
    """Eight variations of one tiling do not crowd out another tiling the cost model rates lower."""
    from mirage_lab.pipeline import _tiling_key, shortlist

    narrow = [ex.rms_norm_linear_fused(16, 1024, 1024, grid=64, forloop_range=f) for f in (4, 8, 16)]
    wide = [ex.rms_norm_linear_fused(16, 1024, 1024, grid=16, forloop_range=f) for f in (4, 8, 16)]
    cands = narrow + wide
    everything = float("inf")    # the round robin alone (the band is the next test's)
    picks = shortlist(cands, 2, band=everything)
    assert len({_tiling_key(cands[i]) for i in picks}) == 2
    assert sorted(shortlist(cands, 6, band=everything)) == list(range(6))       # nothing is lost when there is room
    assert shortlist(cands, 0) == []


def test_the_shortlist_leaves_out_what_the_cost_model_rates_far_worse():
    """A grid of 4 blocks (4 of the GPU's SMs) is rated past 2x the best and not tuned; room does not bring it back."""
    from mirage_lab.pipeline import SHORTLIST_BAND, estimate, lowering_variants, shortlist

    grids = (64, 16, 4)
    cands = [ex.rms_norm_linear_fused(16, 1024, 1024, grid=gr, forloop_range=8) for gr in grids]
    rated = [min(estimate(v.graph, v.options).us for v in lowering_variants(g, candidate=i)) for i, g in enumerate(cands)]
    inside = [i for i, us in enumerate(rated) if us <= SHORTLIST_BAND * min(rated)]
    assert rated[2] > SHORTLIST_BAND * min(rated) and 2 not in inside        # the case this test is about
    assert sorted(shortlist(cands, 8)) == inside
    assert sorted(shortlist(cands, 8, band=float("inf"))) == [0, 1, 2]
