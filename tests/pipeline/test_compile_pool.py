"""The compile pool superoptimize starts with its search: warm processes, bounded speculative compiles."""
from __future__ import annotations

import time

import pytest

from mirage_lab import examples as ex
from mirage_lab.pipeline.compile_pool import SPECULATIVE_VARIANTS, CompilePool, start_early
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
    pool.close()                                     # closing twice is harmless
    assert pool.speculate(fused) == 0


def test_no_early_pool_where_nothing_will_be_timed():
    assert start_early(2, 8) is None                 # the CUDA simulator (or no GPU): tuning cannot time here
