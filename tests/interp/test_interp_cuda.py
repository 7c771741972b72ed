"""The reference interpreter on CUDA tensors gives the CPU's numbers (skipped without a GPU)."""
from __future__ import annotations

import pytest
import torch

import mirage_lab as mi
from mirage_lab import examples as ex

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


def _close(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.double().cpu(), b.double().cpu()
    return float((a - b).norm() / b.norm())


@pytest.mark.parametrize("build, shapes", [
    (lambda: ex.rms_norm_linear_fused(16, 4096, 4096, dtype=mi.float32), [(16, 4096), (4096, 4096)]),
    (lambda: ex.gqa_flashdecoding(dtype=mi.float32), [(2, 256, 64), (2, 64, 4096), (2, 4096, 64)]),
    (lambda: ex.gated_mlp_fused(dtype=mi.float32), [(8, 4096), (4096, 4096), (4096, 4096)]),
])
def test_cuda_matches_cpu(build, shapes):
    g = build()
    xs = [torch.randn(*s) / (s[-2] ** 0.5 if i else 1) for i, s in enumerate(shapes)]
    (cpu,) = mi.run_reference(g, xs)
    (gpu,) = mi.run_reference(g, [x.cuda() for x in xs])
    assert gpu.is_cuda and gpu.dtype == torch.float32
    # TF32 may be on for CUDA matmuls: allow its rounding, far below any real mismatch
    assert _close(gpu, cpu) < 2e-3


def test_cuda_per_block_and_half():
    g = ex.gqa_flashdecoding(batch=2, q_len=32, head_dim=16, kv_len=256, kv_splits=4, q_blocks=4, forloop_range=2)
    q, k, v = (torch.randn(2, 32, 16, device="cuda") / 4, torch.randn(2, 16, 256, device="cuda"),
               torch.randn(2, 256, 16, device="cuda"))
    (b,) = mi.run_reference(g, [q, k, v])
    (lit,) = mi.run_reference(g, [q, k, v], per_block=True)
    assert lit.is_cuda and _close(lit, b) < 1e-5
    (h,) = mi.run_reference(g, [q.half(), k.half(), v.half()])
    assert h.is_cuda and h.dtype == torch.float16 and _close(h, b) < 1e-2
