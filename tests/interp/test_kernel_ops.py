"""Kernel-level ops in the reference interpreter, and its checks on the inputs it is given."""
from __future__ import annotations

import pytest
import torch

import mirage_lab as mi

F = torch.nn.functional


def _one_op(build, *shapes):
    g = mi.new_kernel_graph()
    ins = [g.new_input(s, dtype=mi.float32) for s in shapes]
    g.mark_output(build(g, *ins))
    return g


CASES = {
    "matmul": (lambda g, a, b: g.matmul(a, b), [(3, 5, 7), (3, 7, 2)], lambda a, b: a @ b),
    "reduction": (lambda g, a: g.reduction(a, 1), [(3, 5, 7)], lambda a: a.sum(1, keepdim=True)),
    "exp": (lambda g, a: g.exp(a), [(4, 6)], torch.exp),
    "silu": (lambda g, a: g.silu(a), [(4, 6)], F.silu),
    "gelu": (lambda g, a: g.gelu(a), [(4, 6)], F.gelu),
    "relu": (lambda g, a: g.relu(a), [(4, 6)], torch.relu),
    "sqrt": (lambda g, a: g.sqrt(a), [(4, 6)], torch.sqrt),
    "square": (lambda g, a: g.square(a), [(4, 6)], torch.square),
    "clamp": (lambda g, a: g.clamp(a, -0.5, 0.25), [(4, 6)], lambda a: a.clamp(-0.5, 0.25)),
    "add": (lambda g, a, b: g.add(a, b), [(4, 6), (1, 6)], torch.add),
    "mul": (lambda g, a, b: g.mul(a, b), [(4, 1), (4, 6)], torch.mul),
    "div": (lambda g, a, b: g.div(a, b), [(4, 6), (4, 1)], torch.div),
    "pow": (lambda g, a, b: g.pow(a, b), [(4, 6), (4, 6)], torch.pow),
    "rms_norm": (lambda g, a: g.rms_norm(a, normalized_shape=(6,)), [(4, 6)],
                 lambda a: F.rms_norm(a, (6,), eps=0.0)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_kernel_op_matches_torch(name):
    build, shapes, ref = CASES[name]
    g = _one_op(build, *shapes)
    # positive inputs keep sqrt/pow real
    xs = [torch.rand(*s) + 0.5 for s in shapes]
    (out,) = mi.run_reference(g, xs)
    torch.testing.assert_close(out, ref(*xs), rtol=1e-6, atol=1e-6)


def test_outputs_follow_mark_output_order():
    g = mi.new_kernel_graph()
    a = g.new_input((2, 3), dtype=mi.float32)
    e, s = g.exp(a), g.square(a)
    g.mark_output(s)
    g.mark_output(e)
    x = torch.randn(2, 3)
    out_s, out_e = mi.run_reference(g, [x])
    assert torch.equal(out_s, x.square()) and torch.equal(out_e, x.exp())


def test_input_errors_are_clear():
    g = mi.new_kernel_graph()
    a = g.new_input((2, 3), dtype=mi.float32)
    b = g.new_input((3, 4), dtype=mi.float32)
    with pytest.raises(mi.ReferenceRunError, match="no outputs; call graph.mark_output"):
        mi.run_reference(g, [torch.zeros(2, 3), torch.zeros(3, 4)])
    g.mark_output(g.matmul(a, b))
    with pytest.raises(mi.ReferenceRunError, match=r"takes 2 inputs \(\[2,3\], \[3,4\]\) but got 1"):
        mi.run_reference(g, [torch.zeros(2, 3)])
    with pytest.raises(mi.ReferenceRunError, match=r"input 1 has shape \[4,3\] but the graph declares \[3,4\]"):
        mi.run_reference(g, [torch.zeros(2, 3), torch.zeros(4, 3)])
    with pytest.raises(mi.ReferenceRunError, match="input 0 must be a torch.Tensor"):
        mi.run_reference(g, [[[0.0] * 3] * 2, torch.zeros(3, 4)])
    with pytest.raises(mi.ReferenceRunError, match="floating point"):
        mi.run_reference(g, [torch.zeros(2, 3, dtype=torch.int32), torch.zeros(3, 4)])
    with pytest.raises(mi.ReferenceRunError, match="expected a KernelGraph"):
        mi.run_reference("g", [])
    assert issubclass(mi.ReferenceRunError, mi.MirageLabError)


def test_inputs_are_not_modified():
    from mirage_lab.examples import rms_norm_linear_fused

    g = rms_norm_linear_fused(4, 256, 64, grid=4, forloop_range=4, dtype=mi.float32)
    x, w = torch.randn(4, 256), torch.randn(256, 64)
    x0, w0 = x.clone(), w.clone()
    mi.run_reference(g, [x, w])
    mi.run_reference(g, [x, w], per_block=True)
    assert torch.equal(x, x0) and torch.equal(w, w0)
