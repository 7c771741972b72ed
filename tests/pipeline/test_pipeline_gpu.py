"""On a real GPU: superoptimize end to end on a small program, then call the result as a user does."""
from __future__ import annotations

import pytest
import torch

import mirage_lab as mi
from mirage_lab import examples as ex
from mirage_lab.pipeline import gpu_available

from pipe_helpers import SMALL_SEARCH

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU")]


def _rel(a, b) -> float:
    return float((a.double() - b.double()).norm() / b.double().norm())


def test_superoptimize_then_call_runs_the_measured_kernel():
    g = ex.rms_norm_linear_program(16, 256, 512)
    best = g.superoptimize(tune_seconds=120, **{**SMALL_SEARCH, "griddims": [(16, 1, 1), (32, 1, 1)]})
    rep = best.report
    assert rep.timed and rep.best is not None
    if best.is_program:  # at this small shape the program's own lowering may win the race
        assert best.latency_us is not None and best.latency_us <= rep.best.median_us
    else:
        assert best.latency_us == rep.best.median_us
        assert best.kernel.options == rep.best.variant.options and best.kernel.graph is rep.best.variant.graph
    assert rep.input_policy == "randn" and "torch_eager" in rep.baselines
    X = torch.randn(16, 256, device="cuda").half()
    W = torch.randn(256, 512, device="cuda").half()
    (ref,) = mi.run_reference(g, [X.double(), W.double()])
    (o,) = best(inputs=[X, W])
    assert _rel(o, ref) < 2e-3
    (o2,) = best(inputs=[X, W], graph=True)
    assert _rel(o2, ref) < 2e-3
    X.copy_(torch.randn_like(X))                       # replay reads the captured input buffers
    (ref2,) = mi.run_reference(g, [X.double(), W.double()])
    (o3,) = best(inputs=[X, W], graph=True)
    assert _rel(o3, ref2) < 2e-3


def test_attention_is_measured_not_rejected():
    g = ex.gqa_program(2, 16, 64, 512)
    best = g.superoptimize("attention", tune_seconds=120, search_seconds=60, max_candidates=2, workers=4)
    rep = best.report
    assert rep.input_policy == "randn/sqrt(last dim)"
    assert rep.best is not None, [r.error for r in rep.results]
    assert all("nan" not in (r.error or "") for r in rep.results), [r.error for r in rep.results]


def _load(path):
    import importlib.util

    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_program_races_and_the_result_is_never_slower_than_it(tmp_path):
    g = ex.rms_norm_linear_program(16, 256, 512)
    best = g.superoptimize(tune_seconds=120, **{**SMALL_SEARCH, "griddims": [(16, 1, 1), (32, 1, 1)]})
    rep = best.report
    lowerings = {p.lowering: p for p in rep.programs}
    assert set(lowerings) == {"torch", "torch.compile"}
    assert lowerings["torch"].ok and lowerings["torch"].timings["cuda_graph"].repeats == 300   # the finalists' repeats
    timed = [p.median_us for p in rep.programs if p.ok and p.timings]
    assert best.latency_us is not None and best.latency_us <= min(timed)      # never slower than the program
    assert best.winner in ("μGraph", "torch", "torch.compile") and best.is_program == (best.winner != "μGraph")
    assert best.speedup == pytest.approx(rep.eager.median_us / best.latency_us)
    if lowerings["torch.compile"].ok:
        assert best.speedup_vs_compile == pytest.approx(lowerings["torch.compile"].median_us / best.latency_us)
    assert rep.stop_reason and rep.summary() in repr(best)
    X = torch.randn(16, 256, device="cuda").half()
    W = torch.randn(256, 512, device="cuda").half()
    (ref,) = mi.run_reference(g, [X.double(), W.double()])
    for graph in (False, True):
        (o,) = best([X, W], graph=graph)
        assert _rel(o, ref) < 2e-3
    (o,) = _load(best.export(tmp_path / "best_module.py")).forward(X, W)
    assert _rel(o, ref) < 2e-3


def test_when_every_variant_fails_on_the_gpu_the_measured_program_comes_back(monkeypatch, tmp_path):
    from mirage_lab.runtime import kernel as rk

    real = rk.compile

    def broken(graph, **kw):  # the parent's load of every variant fails (the pool's compiles are untouched)
        if graph.customized_ops:
            raise RuntimeError("CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES (simulated)")
        return real(graph, **kw)

    monkeypatch.setattr(rk, "compile", broken)
    g = ex.rms_norm_linear_program(16, 256, 512)
    with pytest.warns(RuntimeWarning, match="LAUNCH_OUT_OF_RESOURCES.*returning the program itself"):
        best = g.superoptimize(tune_seconds=60, max_candidates=1, **SMALL_SEARCH)
    assert best.is_program and best.latency_us is not None and best.winner in ("torch", "torch.compile")
    assert "no μGraph beat PyTorch on this GPU: returning the program itself" in repr(best)
    X = torch.randn(16, 256, device="cuda").half()
    W = torch.randn(256, 512, device="cuda").half()
    (ref,) = mi.run_reference(g, [X.double(), W.double()])
    (o,) = best([X, W], graph=True)
    assert _rel(o, ref) < 2e-3
    X.copy_(torch.randn_like(X))                       # the replay reads the captured input buffers
    (ref2,) = mi.run_reference(g, [X.double(), W.double()])
    (o2,) = best([X, W], graph=True)
    assert _rel(o2, ref2) < 2e-3
    mod = _load(best.export(tmp_path / "program_module.py"))
    assert "numba" not in (tmp_path / "program_module.py").read_text()
    (o3,) = mod.forward(X, W)
    assert _rel(o3, ref2) < 2e-3
