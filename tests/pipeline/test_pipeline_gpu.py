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
    assert rep.timed and rep.best is not None and best.latency_us == rep.best.median_us
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
