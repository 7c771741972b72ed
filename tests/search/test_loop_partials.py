"""A loop's partial products are explored at prefill sizes (issue 19).

The search holds a block tensor for every block and loop iteration at once, and refused any over
2^26 elements. A fused norm + linear's tile product before its accumulator is ``frange`` times the
program's output: at a 128-token prefill (Phi-3: 128 x 9216 output, 64 iterations) that is 75M, so
every fused μGraph was cut and the search found nothing in 90 s on the H100 host. The guard now
allows ``frange`` x the output (up to 2^27). Tested at a small shape with the guard scaled down to
the output's size, so that the same arithmetic decides, on the fused tiling's own subtree.
"""
import pytest

import mirage_lab as mi
from mirage_lab.search import shapes
from mirage_lab.search.build import build_graph
from mirage_lab.search.config import SearchConfig
from mirage_lab.search.generator import Generator, Target

ROWS, HIDDEN, OUT = 8, 64, 64


def norm_linear_with_weight():
    g = mi.new_kernel_graph()
    X = g.new_input((ROWS, HIDDEN)); G = g.new_input((1, HIDDEN)); W = g.new_input((HIDDEN, OUT))
    g.mark_output(g.matmul(g.rms_norm(X, G), W))
    return g


def fused_subtree_hits(program):
    """Candidates of the first task of a customized op over X, G and W that loops over the hidden dim."""
    cfg = SearchConfig.from_args()
    gen = Generator(Target(program, cfg), cfg, fingerprint_backend="numpy")
    # X, G and W each looped along the hidden dim (G's dim 1, W's dim 0): RMSNorm + Linear's tiling
    task = next(t for t in gen.all_tasks() if t.kind == "block" and t.op.inputs == (0, 1, 2)
                and t.op.fmaps == (1, 1, 0) and t.op.frange > 1)
    return gen, gen.run_task(task)


@pytest.fixture
def guard_at_output_size(monkeypatch):
    """The 2^26 guard scaled to this program: the output's size, as at Phi-3's prefill."""
    monkeypatch.setattr(shapes, "MAX_FP_ELEMENTS", ROWS * OUT)


def test_limit_is_the_loop_times_the_output():
    assert shapes.block_fp_limit(64, 128 * 9216) == 64 * 128 * 9216      # Phi-3 prefill's partials
    assert shapes.block_fp_limit(1, 10) == shapes.MAX_FP_ELEMENTS
    assert shapes.block_fp_limit(64, 256 * 24576) == shapes.MAX_LOOP_FP_ELEMENTS


def test_fused_loop_found_when_partials_exceed_the_old_guard(guard_at_output_size):
    program = norm_linear_with_weight()
    gen, hits = fused_subtree_hits(program)
    assert hits, gen.stats
    cand = build_graph(program, hits[0].ops, hits[0].leaves, hits[0].output_perm)
    assert mi.verify.equivalent(program, cand, tests=3, seed=5)


def test_old_guard_cut_the_fused_loop(guard_at_output_size, monkeypatch):
    # the rule before: no allowance for a loop's iterations
    monkeypatch.setattr(shapes, "MAX_LOOP_FP_ELEMENTS", ROWS * OUT)
    gen, hits = fused_subtree_hits(norm_linear_with_weight())
    assert not hits, gen.stats
