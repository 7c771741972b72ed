"""A time-bounded search stops once the cost model's best candidate has stopped improving."""
import math
import time

import pytest

from mirage_lab import examples as ex
from mirage_lab.pipeline.search_stop import Plateau


def test_no_candidate_never_stops_early():
    p = Plateau()
    p.progress(0.5, states=100)
    assert not p.should_stop(1e6)


def test_the_quiet_spell_grows_with_the_time_the_best_took_to_appear():
    p = Plateau(min_quiet_s=5, quiet_ratio=0.5)
    p.progress(2.0, states=1)
    p.candidate(30.0, 50.0)                   # found 28 s after the first state: wait 14 s, not 5
    assert p.quiet_needed() == pytest.approx(14.0)
    assert not p.should_stop(43.0) and p.should_stop(44.0)


def test_a_small_improvement_does_not_restart_the_spell_but_a_large_one_does():
    p = Plateau(min_quiet_s=5, quiet_ratio=0.0, significant=0.02)   # 1 % below it, 19 % above
    p.progress(0.0, states=1)
    p.candidate(1.0, 100.0)
    p.candidate(4.0, 99.0)                    # 1 %: noise of the model, not news
    assert p.should_stop(6.0) and p.best_us == 99.0
    p.candidate(6.5, 80.0)                    # 19 % better: wait again
    assert not p.should_stop(10.0) and p.should_stop(11.5)
    assert [us for _, us in p.history] == [100.0, 80.0]
    assert "80.0 µs" in p.reason(11.5)


def test_unlowerable_candidates_count_as_found_but_not_as_improvements():
    p = Plateau()
    p.candidate(1.0, math.inf)
    assert p.first_state_t == 1.0 and p.improved_t is None and not p.should_stop(100.0)


def test_superoptimize_stops_the_search_before_its_ceiling_and_says_why(monkeypatch):
    import mirage_lab.pipeline as pl

    monkeypatch.setattr(pl, "Plateau", lambda: Plateau(min_quiet_s=0.5, quiet_ratio=0.0))
    g = ex.rms_norm_linear_program(4, 64, 64)
    t0 = time.monotonic()
    best = pl.superoptimize(g, workers=2, tune=False, cache=False, progress=False, search_seconds=120)
    res = best.search_result
    assert time.monotonic() - t0 < 60 and res.cancelled and res.candidates
    assert res.stop_reason and "has not improved" in res.stop_reason
