"""The one op table (mirage_lab/ops.py): every stage has an entry for every op it must know, and
``sigmoid`` — added as one table entry plus one entry per stage — works through all of them."""
from __future__ import annotations

import math

import pytest
import torch

import mirage_lab as mi
from mirage_lab import ops
from mirage_lab.codegen import elementwise as cg_elementwise
from mirage_lab.codegen import host as cg_host
from mirage_lab.expr import terms
from mirage_lab.interp import reference
from mirage_lab.ir.block_graph import BlockGraph
from mirage_lab.ir.kernel_graph import KernelGraph
from mirage_lab.verify import field

from proc_helpers import ROOT, run_python

# ops whose meaning is not a lookup in a per-op dict (attributes, or built by the graph code)
ATTRIBUTED = {"clamp", "mul_scalar"}


def test_every_stage_knows_every_elementwise_op_and_no_other():
    unary = set(ops.unary_ops()) - ATTRIBUTED
    binary = set(ops.binary_ops())
    assert set(reference.UNARY) == unary, "interp.reference.UNARY (torch meaning)"
    assert set(reference.BINARY) == binary, "interp.reference.BINARY"
    assert set(cg_elementwise.UNARY) == unary, "codegen.elementwise.UNARY (generated code)"
    assert set(cg_elementwise.BINARY) == binary, "codegen.elementwise.BINARY"
    kernel_level = set(ops.elementwise_ops(level=ops.KERNEL)) - ATTRIBUTED
    assert kernel_level <= set(cg_host._TORCH_OPS), "codegen.host (torch text of kernel-level ops)"
    assert set(ops.unary_ops(attrs=False)) <= set(terms.CONSTRUCTORS), "expr.terms.CONSTRUCTORS"
    assert set(ops.binary_ops(level=ops.KERNEL)) <= set(terms.CONSTRUCTORS)
    for name in ops.unary_ops(attrs=False):  # a finite-field table for each
        assert len(field.unary_table(name)) == field.PQ, name
    for s in ops.OPS:  # builder methods at every level the table names
        if s.kind in ("unary", "binary") and s.name not in ATTRIBUTED:
            if ops.KERNEL in s.levels:
                assert callable(getattr(KernelGraph, s.name, None)), f"KernelGraph.{s.name}"
            if ops.BLOCK in s.levels:
                assert callable(getattr(BlockGraph, s.name, None)), f"BlockGraph.{s.name}"


def test_stage_lists_are_the_tables():
    from mirage_lab.ir import block_graph, kernel_graph
    from mirage_lab.search import config, prefilter, state

    assert config.KERNEL_OPS == ("matmul", "exp", "square", "sqrt", "silu", "gelu", "relu", "clamp", "add", "mul",
                                 "div", "pow")  # the search's order: unchanged by ops outside the default search
    assert config.BLOCK_OPS == config.KERNEL_OPS + ("rms_norm",)
    assert [state.TYPE_RANK[t] for t in config.BLOCK_OPS] == list(range(13))
    assert "sigmoid" in kernel_graph.KERNEL_OP_TYPES and "sigmoid" in block_graph.BLOCK_OP_TYPES
    assert "sigmoid" in prefilter.ATOMIC and "sigmoid" in terms.RIGID and "sigmoid" in field.UNARY_OPS
    with pytest.raises(KeyError, match="unknown op 'tanh'"):
        ops.spec("tanh")


def sigmoid_program(n: int = 8, k: int = 32, m: int = 16) -> mi.KernelGraph:
    g = mi.new_kernel_graph()
    X = g.new_input(dims=(n, k), dtype=mi.float16)
    W = g.new_input(dims=(k, m), dtype=mi.float16)
    g.mark_output(g.sigmoid(g.matmul(X, W)))
    return g


def test_sigmoid_builds_round_trips_and_interprets():
    g = sigmoid_program()
    g2 = mi.ir.serialize.from_json(g.to_json())
    assert [op.op_type for op in g2.ops] == [op.op_type for op in g.ops]
    xs = [torch.randn(8, 32).half(), torch.randn(32, 16).half() / 4]
    (out,) = mi.run_reference(g2, [x.double() for x in xs])
    want = torch.sigmoid(xs[0].double() @ xs[1].double())
    assert torch.allclose(out, want, atol=1e-12)


def test_sigmoid_fingerprints_and_abstract_expressions_tell_it_apart():
    from mirage_lab.expr.abstract import abstract
    from mirage_lab.verify import equivalent

    g = sigmoid_program()
    same = sigmoid_program()
    other = mi.new_kernel_graph()
    X = other.new_input(dims=(8, 32), dtype=mi.float16)
    W = other.new_input(dims=(32, 16), dtype=mi.float16)
    other.mark_output(other.exp(other.matmul(X, W)))  # sigmoid's p-part is e^x: the q-part must differ
    assert equivalent(g, same).equivalent
    assert not equivalent(g, other).equivalent
    assert str(abstract(g.outputs[0])) == "sigmoid(sum(32, mul(x0, x1)))"
    assert abstract(g.outputs[0]) != abstract(other.outputs[0])


def test_search_finds_a_fused_kernel_for_a_sigmoid_program():
    # sigmoid is outside the default search lists: the search adds it because the program uses it
    g = sigmoid_program()
    res = mi.search.run_search(g, workers=1, max_kernel_ops=4, max_block_ops=5, fingerprint_backend="numpy",
                               griddims=[(2, 1, 1)], generate_grids=False)
    assert res.candidates, "no candidate for sigmoid(X @ W)"
    assert any(op.op_type == "sigmoid" for c in res.candidates for op in c.customized_ops[0].block_graph.ops)


SIM_SCRIPT = """
import json, torch, mirage_lab as mi
from mirage_lab.examples import new_kernel_graph, new_threadblock_graph
g = mi.new_kernel_graph()
X = g.new_input(dims=(16, 64), dtype=mi.float16)
W = g.new_input(dims=(64, 32), dtype=mi.float16)
bg = new_threadblock_graph(grid_dim=(2, 1, 1), block_dim=(128, 1, 1), forloop_range=2, reduction_dimx=64)
x = bg.new_input(X, input_map=(-1, -1, -1), forloop_dim=1)
w = bg.new_input(W, input_map=(1, -1, -1), forloop_dim=0)
m = bg.forloop_accum(bg.matmul(x, w))
bg.new_output(bg.sigmoid(m), output_map=(1, -1, -1))
(O,) = g.customized([X, W], bg)
g.mark_output(O)
gen = torch.Generator().manual_seed(3)
xs = [torch.randn(16, 64, generator=gen).half(), (torch.randn(64, 32, generator=gen) / 8).half()]
(out,) = mi.runtime.compile(g)(inputs=xs, poison=True)
want = torch.sigmoid(xs[0].double() @ xs[1].double())
print("RESULTS " + json.dumps({"err": float((out.double() - want).abs().max())}))
"""


def test_generated_sigmoid_kernel_matches_torch_under_the_simulator(tmp_path):
    script = tmp_path / "sigmoid_sim.py"
    script.write_text(SIM_SCRIPT)
    r = run_python(script, tmp_path, simulator=True, timeout=600, cwd=ROOT)
    assert not math.isnan(r["err"]) and r["err"] < 2e-3, r
