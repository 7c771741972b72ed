"""The cost model's ranking quality (issue 19: Spearman's rho >= 0.8 between estimate and measurement):
Spearman with ties by hand, and a tuning report's (estimate, measured) pairs and rho."""
from __future__ import annotations

import math

import pytest

from mirage_lab.codegen import CodegenOptions
from mirage_lab.errors import MirageLabError
from mirage_lab.pipeline import Estimate, TuneReport, Variant, VariantResult
from mirage_lab.pipeline.ranking import average_ranks, pooled_spearman, spearman
from mirage_lab.runtime.profile import Timing


def _textbook(xs, ys):
    """1 - 6 sum d^2 / (n (n^2 - 1)): Spearman for distinct values."""
    n = len(xs)
    rx = {v: i + 1 for i, v in enumerate(sorted(xs))}
    ry = {v: i + 1 for i, v in enumerate(sorted(ys))}
    return 1 - 6 * sum((rx[x] - ry[y]) ** 2 for x, y in zip(xs, ys)) / (n * (n * n - 1))


def test_spearman_matches_the_textbook_formula_without_ties():
    xs = [3.1, 1.2, 7.7, 4.4, 9.0, 2.5, 6.3]
    ys = [30.0, 14.0, 61.0, 70.0, 88.0, 12.0, 40.0]
    assert spearman(xs, ys) == pytest.approx(_textbook(xs, ys), abs=1e-3)
    assert spearman(xs, xs) == 1.0 and spearman(xs, [-y for y in xs]) == -1.0
    assert spearman(xs, [math.exp(x) for x in xs]) == 1.0      # ranks only: any monotone map is perfect


def test_ties_share_their_average_rank():
    assert list(average_ranks([5.0, 1.0, 5.0, 3.0, 5.0])) == [4.0, 1.0, 4.0, 2.0, 4.0]
    # Pearson of ranks [1.5, 1.5, 3] and [1, 2, 3]: sqrt(3)/2
    assert spearman([1.0, 1.0, 2.0], [5.0, 6.0, 7.0]) == pytest.approx(math.sqrt(3) / 2, abs=1e-3)


def test_no_ranking_no_rho_and_bad_input_says_so():
    assert spearman([], []) is None and spearman([1.0], [2.0]) is None
    assert spearman([1.0, 1.0, 1.0], [1.0, 2.0, 3.0]) is None   # every estimate equal: nothing ranked
    with pytest.raises(MirageLabError, match="in pairs"):
        spearman([1.0, 2.0], [1.0])
    with pytest.raises(MirageLabError, match="finite"):
        spearman([1.0, float("inf")], [1.0, 2.0])


def test_pooled_and_mean_over_programs():
    s = pooled_spearman([[(1, 2), (2, 3), (3, 5)], [(10, 30), (20, 20)], [(4, 4)]])
    # program 1 ranks right (rho 1, 3 pairs), program 2 wrong (-1, 2 pairs), program 3 has one pair (no rho)
    assert s["mean"] == pytest.approx((3 * 1 - 2 * 1) / 5) and s["programs"] == 2 and s["pairs"] == 6
    assert s["pooled"] == spearman([1, 2, 3, 10, 20, 4], [2, 3, 5, 30, 20, 4])


def _variant(i, est_us, us=None, err=None):
    t = {} if us is None else {"cuda_graph": Timing(f"v{i}", "cuda_graph", us, us, us, 100)}
    return VariantResult(Variant(0, None, CodegenOptions(), 128 * (i + 1)), Estimate(est_us, 1.0, 1.0, 1, 1.0),
                         rel_err=None if err else 1e-4, error=err, timings=t)


def test_a_reports_rank_correlation_uses_its_timed_correct_variants_only():
    vs = [_variant(0, 2.0, 11.0), _variant(1, 3.0, 12.5), _variant(2, 1.0, 10.0), _variant(3, 4.0, 9.0),
          _variant(4, 0.5, None, err="relative error 0.3 exceeds 0.002"), _variant(5, 6.0, None)]
    rep = TuneReport(vs, vs[3], {}, 1.0, "randn", 1.0, 60.0, 1, "NVIDIA H100", True, stop_reason="test")
    assert rep.rank_pairs() == [(2.0, 11.0), (3.0, 12.5), (1.0, 10.0), (4.0, 9.0)]
    assert rep.rank_correlation() == spearman([2.0, 3.0, 1.0, 4.0], [11.0, 12.5, 10.0, 9.0]) == -0.2   # d = -1, -1, -1, 3
    rep.results = vs[4:]
    assert rep.rank_pairs() == [] and rep.rank_correlation() is None
