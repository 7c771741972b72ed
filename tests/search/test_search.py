"""The search finds the known fused μGraphs, and every candidate is really equivalent."""
import pytest
import torch

import mirage_lab as mi
from mirage_lab import examples as ex
from mirage_lab.search import NoCandidateError, SearchInputError, run_search, static_cost

from .helpers import SMALL, small_program


def _float_check(program, cand, scale=1.0, rel=None):
    ins = [torch.randn(t.dims, dtype=torch.float64) * scale for t in program.inputs]
    want = mi.run_reference(program, ins)
    got = mi.run_reference(cand, ins)
    for w, g in zip(want, got):
        assert float((g - w).norm() / w.norm()) < 1e-9


def test_finds_fused_rms_norm_linear_and_all_candidates_are_equivalent():
    g = small_program()
    res = run_search(g, workers=1, **SMALL)
    assert res.candidates, res.stats
    best = res.best
    assert static_cost(best).kernels == 1
    (op,) = best.customized_ops
    kinds = [o.op_type for o in op.block_graph.ops]
    assert "matmul" in kinds
    for c in res.candidates:
        assert mi.verify.equivalent(g, c, tests=3, seed=123)
        _float_check(g, c)
    # The division after the matmul's accumulation (Mirage's RMSNorm μGraph) is among them.
    def div_after_loop(c):
        bg = c.customized_ops[0].block_graph
        return any(o.op_type == "div" and o.outputs[0].after_accum for o in bg.ops) and \
            any(o.op_type == "forloop_accum" and o.attrs["acc"] == "rms" for o in bg.ops)
    assert any(div_after_loop(c) for c in res.candidates)


def test_finds_single_kernel_gated_mlp():
    g = ex.gated_mlp_program(4, 64, 64)
    # Mirage-style overrides narrow the space the way a user would: X replicated, W split by columns.
    res = run_search(g, workers=2, max_kernel_ops=4, imaps=[(-1, -1, -1), (1, -1, -1)], franges=[4])
    one = [c for c in res.candidates if static_cost(c).kernels == 1]
    assert one, res.stats
    for c in one[:3]:
        _float_check(g, c)


def test_superoptimize_returns_best_with_result_attached():
    g = small_program()
    best = g.superoptimize(workers=1, tune=False, **SMALL)   # the cost model decides (a GPU would time them)
    res = best.search_result
    assert res.program is g and not res.cancelled and not res.errors
    assert len(res.costs) == len(res.candidates) > 1
    # the winner is a lowering (a block size) of one of the candidates found
    from mirage_lab.pipeline import with_block_dim

    threads = best.graph.customized_ops[0].block_graph.block_dim[0]
    assert best.graph.content_hash() in {with_block_dim(c, threads).content_hash() for c in res.candidates}
    _float_check(g, best.graph)


def test_no_candidate_gives_a_clear_error():
    g = small_program()
    with pytest.raises(NoCandidateError, match="found no equivalent"):
        g.superoptimize(workers=1, max_kernel_ops=3, max_block_ops=3)


def test_no_candidate_after_workers_died_says_so():
    # a worker killed by the system (out of memory: Gemma 7B's prefill search on a 23 GB box) breaks the pool and
    # every queued chunk with it; "widen it" alone would send the user the wrong way
    from mirage_lab.search import SearchResult, SearchStats

    lost = "a search worker failed: BrokenProcessPool: A process in the process pool was terminated abruptly " \
           "while the future was running or pending."
    res = SearchResult(small_program(), [], [], SearchStats(states=3), errors=[lost] * 97)
    with pytest.raises(NoCandidateError, match=r"97 chunks of its subtrees were lost.*BrokenProcessPool.*out of memory"):
        res.best
    with pytest.raises(NoCandidateError) as e:   # no worker lost: the plain message
        SearchResult(small_program(), [], [], SearchStats(states=3)).best
    assert "lost" not in str(e.value) and "visited 3 states" in str(e.value)


def test_bad_programs_are_refused():
    g = mi.new_kernel_graph()
    g.new_input((4, 4))
    with pytest.raises(SearchInputError, match="no outputs"):
        list(g.search())
    f = ex.rms_norm_linear_fused(4, 64, 64, grid=4, forloop_range=4)
    with pytest.raises(SearchInputError, match="customized"):
        list(f.search())


def test_dedup_prunes_without_losing_candidates():
    g = small_program()
    with_dedup = run_search(g, workers=1, **SMALL)
    without = run_search(g, workers=1, dedup=False, **SMALL)
    assert with_dedup.stats.pruned_dedup > 0 and without.stats.pruned_dedup == 0
    assert with_dedup.stats.states < without.stats.states
    hashes = lambda r: {c.content_hash() for c in r.candidates}  # noqa: E731
    assert hashes(with_dedup) <= hashes(without)
    assert any(static_cost(c).kernels == 1 for c in with_dedup.candidates)


def test_flashdecoding_gqa_is_found_below_its_root():
    # The full attention search is long on 2 cores (benchmarks/search_bench.py times it on 16);
    # here the generator explores, from scratch, the one subtree that starts with the
    # FlashDecoding tiling (grid (2,16,4); Q split by z, K and V by y and looped): it must
    # build both kernels itself (exp, partial sums, then sum / sum_todimx and the division).
    from mirage_lab.search.config import SearchConfig
    from mirage_lab.search.build import build_graph
    from mirage_lab.search.generator import BlockRoot, Generator, Target, Task

    g = ex.gqa_program(2, 32, 64, 256)
    cfg = SearchConfig.from_args("attention")
    gen = Generator(Target(g, cfg), cfg)
    root = BlockRoot((0, 1, 2), (2, 16, 4), ((0, -1, 1), (0, 2, -1), (0, 1, -1)), (-1, 2, 1), 4)
    hits = gen.run_task(Task(0, "block", root))
    assert hits, gen.stats
    # Recorded before the search was made faster (commit 55b9285; see test_search_unchanged.py). One 86-state
    # subtree is merged by dedup or not depending on the random draw (seeds 0-5, numpy's PCG64 and the SFC64
    # draws since: 21890 or 21804, the same hits either way).
    assert gen.stats.states in (21890, 21804)
    assert sorted(build_graph(g, h.ops, h.leaves, h.output_perm).content_hash() for h in hits) == [
        "24254b747fcb38b5f47edbf5803969ba57a7df396bc0d7d2019754d91694abbb",
        "27e3760190f96223244d6f8ea30304bf7462110360363df3b42dd7df007b2921",
    ]
    for h in hits:
        c = build_graph(g, h.ops, h.leaves, h.output_perm)
        assert len(c.customized_ops) == 2
        assert mi.verify.equivalent(g, c, tests=3, seed=7)
        _float_check(g, c, scale=0.1)
        k1, k2 = c.customized_ops
        assert any(o.op_type == "exp" for o in k1.block_graph.ops)
        assert any(o.op_type == "forloop_accum" and o.attrs["acc"] == "sum_todimx" for o in k2.block_graph.ops)
