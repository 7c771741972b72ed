"""Confirming hits in the search's tile layout gives the verifier's fingerprints exactly."""
import numpy as np
import pytest

from mirage_lab import examples as ex
from mirage_lab.search import run_search
from mirage_lab.search.confirm_ops import TileLayoutOps
from mirage_lab.verify.fingerprint import fingerprint_graph, random_inputs

GRAPHS = {   # hand-written μGraphs of the seeds: loops, replicated and split tiles, accumulators
    "rmsnorm_fused": lambda: ex.rms_norm_linear_fused(4, 64, 128),
    "rmsnorm_fused_grid2": lambda: ex.rms_norm_linear_fused(8, 64, 64, grid=2),
    "gated_mlp_fused": lambda: ex.gated_mlp_fused(4, 64, 128),
    "flashdecoding": lambda: ex.gqa_flashdecoding(2, 16, 64, 256, kv_splits=4, q_blocks=4, forloop_range=2),
    "gqa_program": lambda: ex.gqa_program(2, 8, 16, 32),
}


def _same(g, ops, seed):
    xs = random_inputs(g, 2, seed=seed)
    for got, want in zip(fingerprint_graph(g, xs, ops=ops), fingerprint_graph(g, xs), strict=True):
        assert np.asarray(got).shape == np.asarray(want).shape
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_seed_graphs_fingerprint_as_the_verifier(name):
    ops = TileLayoutOps()
    for seed in (1, 2):          # the second round is served by the product memo
        _same(GRAPHS[name](), ops, seed)


def test_every_candidate_of_a_search_fingerprints_as_the_verifier():
    # many tilings of one product: the memo derives coarser chunkings from finer ones
    res = run_search(ex.rms_norm_linear_program(4, 64, 64), workers=1, fingerprint_backend="numpy", max_kernel_ops=3)
    assert len(res.candidates) >= 5
    ops = TileLayoutOps()
    ops.arrays.MEMO_MIN_DEPTH = 0        # every product through the memo at these small shapes
    for g in res.candidates:
        _same(g, ops, 7)
