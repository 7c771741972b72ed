"""The compile pool superoptimize starts with its search: warm processes, bounded speculative compiles."""
from __future__ import annotations

import os
import time

import pytest

from mirage_lab import examples as ex
from mirage_lab.pipeline.compile_pool import COMPILE_NICE, SPECULATIVE_VARIANTS, CompilePool, start_early
from mirage_lab.search.events import CandidateFound


def _wait(pool: CompilePool, n: int, limit: float = 240.0) -> None:
    t0 = time.monotonic()
    while len(pool.done) < n and time.monotonic() - t0 < limit:
        time.sleep(0.2)


@pytest.mark.timeout(400)
def test_speculation_compiles_a_found_candidate_and_stays_within_its_bounds(tmp_path, monkeypatch):
    # the pool's processes are spawned: they inherit this environment (the CUDA simulator, a private cache)
    monkeypatch.setenv("NUMBA_ENABLE_CUDASIM", "1")
    monkeypatch.setenv("MIRAGE_LAB_CACHE", str(tmp_path))
    fused = ex.rms_norm_linear_fused(4, 64, 64, grid=4, forloop_range=4)
    seen = []
    with CompilePool(workers=1, speculative=1, max_candidates=2) as pool:
        cb = pool.on_candidates(seen.append)
        cb(CandidateFound(0, fused, stats=None))
        assert len(seen) == 1 and len(pool.submitted) == SPECULATIVE_VARIANTS   # passed through, and sent
        assert pool.speculate(fused) == 0            # one compile already in flight: the search keeps the CPU
        _wait(pool, SPECULATIVE_VARIANTS)
        assert set(pool.done) == set(pool.submitted)
        assert all(err is None for _, err in pool.done.values()), pool.done
        assert pool.speculate(fused) == SPECULATIVE_VARIANTS
        _wait(pool, SPECULATIVE_VARIANTS)            # keys repeat: the same variants, now from numba's disk cache
        assert pool.speculate(fused) == 0            # max_candidates reached
        if hasattr(os, "getpriority"):               # its processes run behind the search's workers
            me = os.getpriority(os.PRIO_PROCESS, 0)
            assert pool.pool.apply(os.getpriority, (os.PRIO_PROCESS, 0)) == min(19, me + COMPILE_NICE)
    pool.close()                                     # closing twice is harmless
    assert pool.speculate(fused) == 0


def test_no_early_pool_where_nothing_will_be_timed():
    assert start_early(2, 8) is None                 # the CUDA simulator (or no GPU): tuning cannot time here


def test_no_speculative_compile_for_a_candidate_the_shortlist_will_leave_out(monkeypatch):
    """A candidate rated past SHORTLIST_BAND times the best found so far gets no compile (it will not be tuned)."""
    from mirage_lab.pipeline import SHORTLIST_BAND, estimate, lowering_variants

    good = ex.rms_norm_linear_fused(16, 1024, 1024, grid=64, forloop_range=8)
    bad = ex.rms_norm_linear_fused(16, 1024, 1024, grid=4, forloop_range=8)    # 4 blocks: 4 SMs busy
    rated = [min(estimate(v.graph, v.options).us for v in lowering_variants(g, candidate=0)) for g in (good, bad)]
    assert rated[1] > SHORTLIST_BAND * rated[0]
    with CompilePool(workers=1, speculative=8, max_candidates=8) as pool:
        sent = []
        monkeypatch.setattr(pool.pool, "apply_async", lambda *a, **k: sent.append(a))   # record, compile nothing
        assert pool.speculate(good) == SPECULATIVE_VARIANTS
        assert pool.speculate(bad) == 0 and len(sent) == SPECULATIVE_VARIANTS
        assert pool.speculate(good) == SPECULATIVE_VARIANTS       # the bad one did not count towards max_candidates


def test_compile_feed_skips_variants_ruled_out_and_keeps_its_depth():
    """The tuner's feed: at most ``depth`` compiles in flight, in plan order; a variant the stopping rule rules
    out before its turn is never compiled, every one still possible is."""
    from mirage_lab.pipeline.compile_pool import CompileFeed
    from mirage_lab.pipeline.stopping import possible_winners

    # plan: group "a" (estimates 10, 11, 30, 31) then group "b" (20, 40); measured = 2 x estimate
    plan = [("a", 10.0), ("b", 20.0), ("a", 11.0), ("a", 30.0), ("b", 40.0), ("a", 31.0)]
    measured: dict[int, float] = {}
    sent: list[int] = []
    feed = CompileFeed(sent.append, depth=2)

    def possible() -> list[int]:
        items = [(g, est, measured.get(i)) for i, (g, est) in enumerate(plan)]
        pending = [i for i in range(len(plan)) if i not in measured]
        return possible_winners(items, best_us=min(measured.values(), default=float("inf")), margin=0.25,
                                pending=pending)

    assert feed.top_up(range(len(plan))) == 2 and sent == [0, 1]
    while possible():
        feed.top_up(possible())
        assert len(feed.in_flight) <= 2
        i = min(feed.in_flight)          # the oldest compile lands first
        feed.landed(i)
        measured[i] = 2 * plan[i][1]
    # best 20 µs (variant 0): a's 11 (22 <= 25) stays possible and is compiled; a's 30, 31 and b's 40 are not
    assert sent == [0, 1, 2]
    assert not feed.in_flight
