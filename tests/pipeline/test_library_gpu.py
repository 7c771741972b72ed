"""On a real GPU: the sdpa contender races in autotune (timed by the real CUDA-graph timer), is correct,
replays in a CUDA graph and exports; its time sits beside the program's own lowerings."""
from __future__ import annotations

import importlib.util
import warnings

import pytest
import torch

import mirage_lab as mi
from mirage_lab import examples as ex
from mirage_lab.pipeline import autotune, gpu_available
from mirage_lab.pipeline.library import library_function
from mirage_lab.pipeline.result import result_from_report

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU")]


def _rel(a, b) -> float:
    return float((a.double() - b.double()).norm() / b.double().norm())


@pytest.mark.parametrize("dtype", [mi.float16, mi.bfloat16])
def test_the_sdpa_lowering_runs_and_replays_on_the_gpu(dtype):
    g = ex.gqa_program(2, 64, 64, 1024, dtype=dtype)
    xs = [(torch.randn(*t.dims, device="cuda") / 8).to(t.dtype.torch) for t in g.inputs]
    (ref,) = mi.run_reference(g, [x.double() for x in xs])
    f = library_function(g, "sdpa")
    (o,) = f(xs)
    (o2,) = f(xs, graph=True)
    tol = 2e-3 if dtype == mi.float16 else 2e-2
    assert _rel(o, ref) < tol and _rel(o2, ref) < tol
    xs[0].copy_(torch.randn_like(xs[0]) / 8)         # the replay reads the captured input buffers
    (ref2,) = mi.run_reference(g, [x.double() for x in xs])
    (o3,) = f(xs, graph=True)
    assert _rel(o3, ref2) < tol


def test_the_sdpa_contender_is_timed_beside_the_program_and_returned_if_fastest(tmp_path):
    g = ex.gqa_program(2, 256, 64, 4096)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)   # no μGraph candidate here: the program races alone
        rep = autotune(g, [], tune_seconds=120)
        best = result_from_report(g, None, rep)
    progs = {p.lowering: p for p in rep.programs}
    assert set(progs) == {"torch", "torch.compile", "sdpa"}
    assert progs["sdpa"].ok and progs["sdpa"].timings["cuda_graph"].repeats == 300, progs["sdpa"].error
    fastest = min((p for p in rep.programs if p.ok and p.timings), key=lambda p: p.median_us)
    assert best.winner == fastest.lowering and best.latency_us == fastest.median_us
    assert best.is_library == (fastest.lowering == "sdpa")
    if best.is_library:
        assert "returning FlashAttention (sdpa): no μGraph beat it" in repr(best)
    xs = [(torch.randn(*t.dims, device="cuda") / 8).to(t.dtype.torch) for t in g.inputs]
    (ref,) = mi.run_reference(g, [x.double() for x in xs])
    (o,) = best(xs, graph=True)
    assert _rel(o, ref) < 2e-3
    path = best.export(tmp_path / "best_attention.py")
    spec = importlib.util.spec_from_file_location("best_attention", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    (o2,) = mod.forward(*xs)
    assert _rel(o2, ref) < 2e-3
    print(f"sdpa {progs['sdpa'].median_us:.2f} µs, torch {progs['torch'].median_us:.2f} µs, "
          f"torch.compile {progs['torch.compile'].median_us:.2f} µs; returned {best.winner}")
