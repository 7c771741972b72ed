"""The hand-built μGraphs of MIRAGE_SPEC §7, run by the reference interpreter, against a
plain torch computation of the original program (float32, full benchmark shapes)."""
from __future__ import annotations

import time

import pytest
import torch

import mirage_lab as mi
from mirage_lab import examples as ex

TOL = 1e-4


def torch_rms_norm_linear(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    # What a PyTorch user writes (torch.nn.RMSNorm with eps=0 and no weight), then the linear layer.
    return torch.nn.functional.rms_norm(x, (x.shape[-1],), eps=0.0) @ w


def torch_gqa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    e = torch.exp(q @ k)
    return (e / e.sum(dim=2, keepdim=True)) @ v


def torch_gated_mlp(x, w1, w2):
    return torch.nn.functional.silu(x @ w1) * (x @ w2)


@pytest.mark.parametrize("batch, hidden, out", [(16, 4096, 4096), (2, 4096, 6144)])
def test_rmsnorm_linear_fused(batch, hidden, out, rel):
    fused = ex.rms_norm_linear_fused(batch, hidden, out, dtype=mi.float32)
    bg = fused.customized_ops[0].block_graph
    assert len(fused.customized_ops) == 1 and len(fused.ops) == 3   # one kernel
    # the division is moved after the matmul: it runs after the loop, on the accumulated product
    div = next(op for op in bg.ops if op.op_type == "div")
    assert div.outputs[0].after_accum and {t.op.op_type for t in div.inputs} == {"forloop_accum"}
    x, w = torch.randn(batch, hidden), torch.randn(hidden, out)
    t0 = time.perf_counter()
    (o,) = mi.run_reference(fused, [x, w])
    elapsed = time.perf_counter() - t0
    ref = torch_rms_norm_linear(x, w)
    assert o.dtype == torch.float32 and o.shape == (batch, out)
    assert rel(o, ref) < TOL
    assert elapsed < 10  # batched interpreter: well under a second on a laptop
    # the unfused program agrees too
    (p,) = mi.run_reference(ex.rms_norm_linear_program(batch, hidden, out, dtype=mi.float32), [x, w])
    assert rel(p, ref) < TOL


def test_gqa_two_kernel_flashdecoding(rel):
    f = ex.gqa_flashdecoding(dtype=mi.float32)
    assert len(f.customized_ops) == 2
    q = torch.randn(2, 256, 64) / 8   # scaled as attention scales QK by 1/sqrt(d)
    k = torch.randn(2, 64, 4096)
    v = torch.randn(2, 4096, 64)
    (o,) = mi.run_reference(f, [q, k, v])
    ref = torch_gqa(q, k, v)
    assert o.shape == (2, 256, 64)
    assert rel(o, ref) < TOL
    (p,) = mi.run_reference(ex.gqa_program(dtype=mi.float32), [q, k, v])
    assert rel(p, ref) < TOL
    # and against a float64 computation of softmax attention, as a sanity anchor
    ref64 = torch.softmax(q.double() @ k.double(), dim=-1) @ v.double()
    assert rel(o, ref64) < TOL


def test_gated_mlp_fused(rel):
    f = ex.gated_mlp_fused(dtype=mi.float32)
    bg = f.customized_ops[0].block_graph
    assert bg.grid_dim == (128, 1, 1) and bg.forloop_range == 64
    silu = next(op for op in bg.ops if op.op_type == "silu")
    assert silu.outputs[0].after_accum       # silu runs after the loop
    x = torch.randn(8, 4096)
    w1, w2 = torch.randn(4096, 4096) / 64, torch.randn(4096, 4096) / 64
    (o,) = mi.run_reference(f, [x, w1, w2])
    ref = torch_gated_mlp(x, w1, w2)
    assert rel(o, ref) < TOL
    (p,) = mi.run_reference(ex.gated_mlp_program(dtype=mi.float32), [x, w1, w2])
    assert rel(p, ref) < TOL


def test_wrong_fused_graph_is_caught(rel):
    """The check can fail: a μGraph that forgets the division is far from the program."""
    g = mi.new_kernel_graph()
    X = g.new_input((16, 1024), dtype=mi.float32); W = g.new_input((1024, 256), dtype=mi.float32)
    bg = mi.new_threadblock_graph((16, 1, 1), forloop_range=8)
    x = bg.new_input(X, (-1, -1, -1), 1); w = bg.new_input(W, (1, -1, -1), 0)
    bg.new_output(bg.forloop_accum(bg.matmul(x, w)), (1, -1, -1))
    (O,) = g.customized([X, W], bg)
    g.mark_output(O)
    x_, w_ = torch.randn(16, 1024) * 3, torch.randn(1024, 256)
    (o,) = mi.run_reference(g, [x_, w_])
    assert rel(o, torch_rms_norm_linear(x_, w_)) > 0.5


def test_half_precision_inputs_compute_in_float32_and_return_half(rel):
    f = ex.rms_norm_linear_fused(16, 4096, 4096)   # declared float16
    x = torch.randn(16, 4096).half()
    w = (torch.randn(4096, 4096) / 64).half()
    (o,) = mi.run_reference(f, [x, w])
    assert o.dtype == torch.float16
    ref = torch_rms_norm_linear(x.double(), w.double())
    assert rel(o, ref) < 2e-3   # fp16 output rounding only; the sums ran in float32
    (ob,) = mi.run_reference(f, [x.bfloat16(), w.bfloat16()])
    assert ob.dtype == torch.bfloat16 and rel(ob, ref) < 2e-2


def test_float64_inputs_stay_float64(rel):
    f = ex.gqa_flashdecoding(batch=1, q_len=32, head_dim=16, kv_len=256, kv_splits=4, q_blocks=2, forloop_range=2)
    q, k, v = torch.randn(1, 32, 16, dtype=torch.float64), torch.randn(1, 16, 256, dtype=torch.float64), \
        torch.randn(1, 256, 16, dtype=torch.float64)
    (o,) = mi.run_reference(f, [q / 4, k, v])
    assert o.dtype == torch.float64
    assert rel(o, torch_gqa(q / 4, k, v)) < 1e-12
