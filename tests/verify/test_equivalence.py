"""No false negatives: hand-built μGraphs equivalent to their programs are accepted; the
corpus is itself checked against the float reference interpreter. Plus the result object
and the error cases."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import mirage_lab as mi
from mirage_lab import examples
from mirage_lab.errors import MirageLabError
from mirage_lab.verify import VerifyError, equivalent, fingerprint_graph, random_inputs

import verify_graphs as vg

PAIRS = {**vg.pairs("small"), **vg.scalar_pairs("small")}


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_hand_built_mugraph_is_equivalent_to_its_program(name):
    make_prog, make_fused = PAIRS[name]
    prog, fused = make_prog(), make_fused()
    for seed in (0, 1):
        r = equivalent(prog, fused, seed=seed, backend="numpy")
        assert r, f"{name}: {r.reason}"
        assert r.tests == 2 and r.seed == seed and r.backend == "numpy"
    # The corpus itself is right: the float interpreter agrees (positive inputs keep sqrt/pow real).
    xs = [torch.rand(t.dims, dtype=torch.float64) + 0.5 for t in prog.inputs]
    want = mi.run_reference(prog, xs)
    got = mi.run_reference(fused, xs)
    for i, j in enumerate(r.permutation):
        torch.testing.assert_close(got[j], want[i], rtol=1e-9, atol=1e-9)


def test_permuted_outputs_report_the_permutation():
    prog, fused = PAIRS["two_outputs_swapped"][0](), PAIRS["two_outputs_swapped"][1]()
    r = equivalent(prog, fused, seed=3)
    assert r and r.permutation == (1, 0) and r.matched == [(0, 1), (1, 0)]


def test_more_tests_and_auto_backend():
    prog, fused = PAIRS["gqa_flashdecoding"][0](), PAIRS["gqa_flashdecoding"][1]()
    r = equivalent(prog, fused, tests=5, seed=11, backend="auto")
    assert r and r.tests == 5


def test_random_inputs_are_reproducible_and_shaped():
    g = examples.rms_norm_linear_program(4, 64, 32)
    a = random_inputs(g, tests=3, seed=7)
    b = random_inputs(g, tests=3, seed=7)
    assert [x.shape for x in a] == [(3, 4, 64), (3, 64, 32)]
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert all(x.dtype == np.uint16 and x.max() < mi.verify.PQ for x in a)
    assert not np.array_equal(a[0], random_inputs(g, tests=3, seed=8)[0])
    with pytest.raises(MirageLabError, match="positive int"):
        random_inputs(g, tests=0)


def test_field_values_are_uniform_over_the_field_across_chunks(monkeypatch):
    """The multiply-shift draw covers every value of Z_PQ about equally (no residue class starved, as a
    16-bit shift would leave some values twice as likely), the same across chunk boundaries as in one pass."""
    from mirage_lab.verify import fingerprint

    pq = mi.verify.PQ
    x = fingerprint.field_values(fingerprint.field_rng(3), (40, pq))
    counts = np.bincount(x.reshape(-1), minlength=pq)
    assert x.dtype == np.uint16 and counts.size == pq and counts.min() > 10 and counts.max() < 75
    chi2 = float(((counts - 40) ** 2).sum() / 40)
    assert abs(chi2 - (pq - 1)) < 6 * (2 * (pq - 1)) ** 0.5   # within 6 sigma of the chi-square's mean
    monkeypatch.setattr(fingerprint, "DRAW_CHUNK", 1000)   # many chunks: the same stream of values
    assert np.array_equal(fingerprint.field_values(fingerprint.field_rng(3), (40, pq)), x)


def test_fingerprint_mismatch_names_the_first_differing_index():
    prog = examples.rms_norm_linear_program(4, 64, 32)
    g = mi.new_kernel_graph()
    X = g.new_input((4, 64)); W = g.new_input((64, 32))
    g.mark_output(g.matmul(X, W))  # the normalisation is missing
    r = equivalent(prog, g, seed=0)
    assert not r and "fingerprint mismatch" in r.reason
    assert r.mismatch["output"] == 0 and len(r.mismatch["index"]) == 3
    fa = fingerprint_graph(prog, random_inputs(prog, 2, 0))[0]
    fb = fingerprint_graph(g, random_inputs(prog, 2, 0))[0]
    assert fa[r.mismatch["index"]] != fb[r.mismatch["index"]]
    assert "NOT equivalent" in repr(r)


def test_output_count_and_shape_mismatch_are_reported():
    prog = PAIRS["two_outputs_swapped"][0]()
    g = mi.new_kernel_graph()
    X = g.new_input(prog.inputs[0].dims, dtype=mi.float32); W = g.new_input(prog.inputs[1].dims, dtype=mi.float32)
    M = g.matmul(X, W)
    g.mark_output(g.exp(M))
    r = equivalent(prog, g, seed=0)
    assert not r and "output count mismatch: 2 vs 1" in r.reason
    g2 = mi.new_kernel_graph()
    X = g2.new_input(prog.inputs[0].dims, dtype=mi.float32); W = g2.new_input(prog.inputs[1].dims, dtype=mi.float32)
    M = g2.matmul(X, W)
    g2.mark_output(g2.exp(M))
    g2.mark_output(g2.reduction(M, 1))
    r = equivalent(prog, g2, seed=0)
    assert not r and "output shape mismatch" in r.reason


def test_graphs_over_different_inputs_raise_a_clear_error():
    a = examples.rms_norm_linear_program(4, 64, 32)
    b = examples.rms_norm_linear_program(4, 64, 16)
    with pytest.raises(VerifyError, match=r"input 1 has shape \[64,32\] in g1 but \[64,16\] in g2"):
        equivalent(a, b)
    c = examples.gated_mlp_program(4, 64, 32)
    with pytest.raises(MirageLabError, match="different numbers of inputs"):
        equivalent(a, c)
    with pytest.raises(MirageLabError, match="must be a KernelGraph"):
        equivalent(a, "graph")
    with pytest.raises(MirageLabError, match="tests must be a positive int"):
        equivalent(a, a, tests=0)
    with pytest.raises(MirageLabError, match="expected"):
        fingerprint_graph(a, random_inputs(b, 2, 0))
