"""Workers reuse what the caller computed for the search (target fingerprints, task list)."""
from mirage_lab import examples as ex
from mirage_lab.search import worker
from mirage_lab.search.config import SearchConfig
from mirage_lab.search.generator import Generator, Target


def test_workers_reuse_the_callers_fingerprints_and_tasks_and_find_the_same():
    g = ex.rms_norm_linear_program(4, 64, 64)
    cfg = SearchConfig.from_args(max_kernel_ops=4, fingerprint_backend="numpy")
    gj = g.to_json()
    worker._PRIMED.clear()
    worker._WORKER_CACHE.clear()
    fresh = worker.run_tasks(gj, cfg, [0, 1, 2])
    caller = Generator(Target(g, cfg), cfg, fingerprint_backend="numpy")
    worker.prime(gj, cfg, caller)
    worker._WORKER_CACHE.clear()
    gen = worker._generator_for(gj, cfg)
    assert gen.t.inputs_fp is caller.t.inputs_fp and gen.all_tasks() is caller.all_tasks()
    primed = worker.run_tasks(gj, cfg, [0, 1, 2])
    assert [r["candidates"] for r in primed] == [r["candidates"] for r in fresh]
    assert any(r["candidates"] for r in primed)
    # another program or other settings are not served the primed data
    other = SearchConfig.from_args(max_kernel_ops=3, fingerprint_backend="numpy")
    worker._WORKER_CACHE.clear()
    assert worker._generator_for(gj, other).t.inputs_fp is not caller.t.inputs_fp
    worker._PRIMED.clear()
    worker._WORKER_CACHE.clear()
