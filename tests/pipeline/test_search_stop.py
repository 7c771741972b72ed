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
    p = Plateau(min_quiet_s=5, quiet_ratio=0.5, min_quiet_states=0, quiet_states_ratio=0)
    p.progress(2.0, states=1)
    p.candidate(30.0, 50.0)                   # found 28 s after the first state: wait 14 s, not 5
    assert p.quiet_needed() == pytest.approx(14.0)
    assert not p.should_stop(43.0) and p.should_stop(44.0)


def test_a_small_improvement_does_not_restart_the_spell_but_a_large_one_does():
    # 1 % below it, 19 % above; seconds only
    p = Plateau(min_quiet_s=5, quiet_ratio=0.0, significant=0.02, min_quiet_states=0, quiet_states_ratio=0)
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

    monkeypatch.setattr(pl, "Plateau",
                        lambda: Plateau(min_quiet_s=0.5, quiet_ratio=0.0, min_quiet_states=0, quiet_states_ratio=0))
    g = ex.rms_norm_linear_program(4, 64, 64)
    t0 = time.monotonic()
    best = pl.superoptimize(g, workers=2, tune=False, cache=False, progress=False, search_seconds=120)
    res = best.search_result
    assert time.monotonic() - t0 < 60 and res.cancelled and res.candidates
    assert res.stop_reason and "has not improved" in res.stop_reason


def test_the_quiet_spell_is_counted_in_states_too_so_a_slow_machine_searches_as_far():
    # on two cores the seconds pass with an eighth of the host's work: the spell waits for the states as well
    p = Plateau(min_quiet_s=5, quiet_ratio=0.0, min_quiet_states=10_000, quiet_states_ratio=1.0)
    p.progress(0.0, states=1)
    p.progress(10.0, states=1_700)
    p.candidate(10.0, 127.0)
    p.progress(30.0, states=9_000)                 # 20 s quiet, 7,300 states: not enough work yet
    assert not p.should_stop(30.0)
    p.progress(40.0, states=11_700)
    assert p.should_stop(40.0) and "max(10,000, 1 × 1,700) states" in p.reason(40.0)
    q = Plateau(min_quiet_s=5, quiet_ratio=0.0, min_quiet_states=100, quiet_states_ratio=1.0)
    q.progress(0.0, states=1)
    q.progress(5.0, states=40_000)
    q.candidate(5.0, 50.0)                         # the best after 40,000 states: as many again before stopping
    q.progress(20.0, states=70_000)
    assert not q.should_stop(20.0)
    q.progress(25.0, states=80_000)
    assert q.should_stop(25.0)
