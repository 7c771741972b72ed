"""On one real GPU: two worker processes share it through the cluster tuner, with the real timer.

Same winner as the one-process tune (within the timings' noise), and one worker killed mid-run
loses no variant. The one-GPU machine checks the protocol and the fault handling; the speed-up
needs several GPUs (benchmarks/multi_gpu_bench.py)."""
from __future__ import annotations

import pytest

from mirage_lab import examples as ex
from mirage_lab.pipeline import gpu_available

from pipe_helpers import SMALL_SEARCH

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU")]

NOISE = 0.05   # two timings of one kernel in two processes sharing a GPU agree within this


def test_two_workers_on_one_gpu_pick_the_one_process_winner_and_survive_a_killed_worker(tmp_path):
    from dask.distributed import Client

    from mirage_lab.pipeline.autotune import VariantDone, autotune
    from mirage_lab.pipeline.distributed import autotune_on_cluster, gpu_workers, kill_worker, local_gpu_cluster

    g = ex.rms_norm_linear_program(16, 256, 512)
    found = g.superoptimize(tune=False, progress=False, **{**SMALL_SEARCH, "griddims": [(16, 1, 1), (32, 1, 1)]})
    cands = found.search_result.candidates[:2]
    kw = dict(max_variants=8, stop_margin=None, program_lowerings=("torch",), cache_dir=tmp_path / "kernels")
    one = autotune(g, cands, tune_seconds=300, **kw)
    assert one.timed and one.best is not None
    killed: list[str] = []
    with local_gpu_cluster([0], per_gpu=2) as lc, Client(lc) as client:
        def kill_one(ev):
            if isinstance(ev, VariantDone) and not killed:
                victim = gpu_workers(client)[-1]
                killed.append(victim)
                kill_worker(client, victim)

        rep = autotune_on_cluster(g, cands, client, tune_seconds=300, unit_variants=1, on_event=kill_one, **kw)
    run = rep.cluster
    lost = [w.address for w in run.workers if w.lost]
    assert killed and lost == killed, (killed, lost)
    untried = [r.variant.tag for r in rep.results if r.compile_s is None]
    assert rep.untried == 0 and not untried, (rep.untried, untried, rep.stop_reason)   # nothing lost
    assert all(m.from_worker == killed[0] and m.to_worker not in (None, killed[0]) for m in run.moved), run.moved
    assert all(w.calibration and w.calibration["copy_us"] > 0 for w in run.workers if not w.lost), \
        [(w.address, w.calibration) for w in run.workers]
    # the cluster's winner, as the one-process run timed it, is within the noise of that run's winner
    theirs = {r.variant.tag: r.median_us for r in one.results if r.ok and r.timings}
    ours = {r.variant.tag: r.median_us for r in rep.results if r.ok and r.timings}
    assert rep.best is not None, [(r.variant.tag, r.error) for r in rep.results]
    assert theirs[rep.best.variant.tag] <= one.best.median_us * (1 + NOISE), (rep.best.variant.tag, one.best.variant.tag,
                                                                           theirs, ours)
