"""Tuning work handed out in units: a faster worker takes more, a lost worker's units move and none is lost,
and the merged results pick the winner the one-process tuner picks (plain functions, fake workers, no Dask)."""
from __future__ import annotations

import json
import random

import pytest

from mirage_lab import examples as ex
from mirage_lab.codegen import CodegenOptions
from mirage_lab.errors import MirageLabError
from mirage_lab.pipeline import TuneReport, VariantResult
from mirage_lab.pipeline.autotune import _Tuning, plan_variants
from mirage_lab.pipeline.calibration import calibration_outliers
from mirage_lab.pipeline.codec import decode, dumps, encode
from mirage_lab.pipeline.cost_model import Estimate
from mirage_lab.pipeline.distributed import (ClusterRun, WorkerRecord, best_variant, first_correct_settled,
                                             still_possible)
from mirage_lab.pipeline.scheduling import TAKEN, Move, UnitScheduler, make_units, unit_size
from mirage_lab.pipeline.variants import Variant
from mirage_lab.runtime.profile import Timing


def simulate(sched: UnitScheduler, speed: dict[str, float], *, die: dict[str, float] | None = None,
             join: dict[str, float] | None = None, first_extra: dict[str, float] | None = None,
             take: bool = False, clock: list[float] | None = None) -> dict[int, list[str]]:
    """Fake workers on a fake clock: a unit of n variants takes n / speed; a worker in ``die`` leaves at that time.

    ``first_extra``: seconds a worker's first unit takes beyond that (its first torch.compile build); ``take``:
    idle workers take units waiting in others' hands (:meth:`UnitScheduler.take_waiting`); ``clock`` gets the
    time the last unit ended. Returns, for each variant, the workers that finished it (exactly one each when
    nothing is lost).
    """
    die, join, first_extra = die or {}, join or {}, dict(first_extra or {})
    now, busy_until, queue = 0.0, {}, {}   # worker -> time its current unit ends; worker -> units in hand, in order
    measured: dict[int, list[str]] = {}
    for _ in range(10_000):
        live = [w for w in speed if join.get(w, 0.0) <= now and not (w in die and die[w] <= now)]
        for w in [w for w in list(sched.held) if w not in live and w not in sched.lost]:
            sched.lose(w)
            queue.pop(w, None)
        for w, unit in sched.assign(live):
            queue.setdefault(w, []).append(unit)
        if take:
            for victim, w, unit in sched.take_waiting([w for w in live if not queue.get(w)]):
                queue[victim].remove(unit)
                queue.setdefault(w, []).append(unit)
        for w in live:
            if queue.get(w) and w not in busy_until:
                busy_until[w] = now + len(queue[w][0].variants) / speed[w] + first_extra.pop(w, 0.0)
        if sched.complete:
            if clock is not None:
                clock.append(now)
            return measured
        events = [t for w, t in busy_until.items()] + [t for t in [*die.values(), *join.values()] if t > now]
        now = min(events)
        for w, t in list(busy_until.items()):
            if t <= now:
                del busy_until[w]
                if w in die and die[w] <= now:
                    continue   # died at the very moment it would have finished: the unit is lost with it
                unit = queue[w].pop(0)
                sched.done(w, unit.id)
                for v in unit.variants:
                    measured.setdefault(v, []).append(w)
    raise AssertionError("the fake cluster did not finish")


def test_a_short_plan_is_cut_finer_so_every_worker_gets_units():
    assert unit_size(130, 2, size=4, depth=2) == 4          # a long plan keeps the asked size
    assert unit_size(8, 2, size=4, depth=2) == 2            # 4 units: two for each worker's depth
    assert unit_size(8, 4, size=4, depth=2) == 1
    assert unit_size(3, 8, size=4, depth=2) == 1            # never below one variant
    sched = UnitScheduler(make_units(8, size=unit_size(8, 2, size=4, depth=2)), depth=2)
    given = sched.assign(["a", "b"]) + sched.assign(["b", "a"])
    assert sorted(w for w, _ in given) == ["a", "a", "b", "b"]    # both GPUs busy from the start
    with pytest.raises(MirageLabError, match="unit_variants >= 1"):
        unit_size(8, 2, size=0, depth=2)


def test_units_cover_the_plan_in_order():
    units = make_units(10, size=4)
    assert [u.variants for u in units] == [(0, 1, 2, 3), (4, 5, 6, 7), (8, 9)]
    with pytest.raises(MirageLabError, match="unit_variants >= 1"):
        make_units(3, size=0)
    with pytest.raises(MirageLabError, match="at least one unit"):
        UnitScheduler(units, depth=0)


def test_a_faster_worker_takes_more_units_and_each_variant_is_measured_once():
    sched = UnitScheduler(make_units(40, size=2), depth=2)
    measured = simulate(sched, {"fast": 3.0, "slow": 1.0})
    assert sorted(measured) == list(range(40)) and all(len(w) == 1 for w in measured.values())
    per = sched.units_per_worker()
    assert per["fast"] >= 2 * per["slow"] and sum(per.values()) == 20 and not sched.moves


def test_an_idle_worker_takes_the_units_waiting_behind_a_slow_first_unit():
    # 2026-11-29, 2 H200s: a unit stuck 19 s behind its worker's first torch.compile build kept the unit
    # after it, while the other GPU sat idle; now the idle worker takes what waits
    ends = {}
    for take in (False, True):
        sched = UnitScheduler(make_units(8, size=unit_size(8, 2, size=4, depth=2)), depth=2)
        clock: list[float] = []
        measured = simulate(sched, {"a": 1.0, "b": 1.0}, first_extra={"a": 20.0}, take=take, clock=clock)
        assert sorted(measured) == list(range(8)) and all(len(w) == 1 for w in measured.values())
        ends[take] = clock[0]
        taken = [m for m in sched.moves if m.reason == TAKEN]
        if take:
            assert taken and all(m.from_worker == "a" and m.to_worker == "b" for m in taken)
            assert all(sched.finished[m.unit] == "b" for m in taken) and sched.units_per_worker()["a"] == 1
        else:
            assert not taken
    assert ends[True] < ends[False]          # 22 s against 24 s on this fake clock: b measured a's waiting unit
    # a unit whose results are already back stays where it is; a taken unit never counts as a lost worker's
    sched = UnitScheduler(make_units(4, size=1), depth=2)
    sched.assign(["a", "b"])
    sched.done("b", 1), sched.done("b", 3)
    assert sched.take_waiting(["b"], can_take=lambda w, u: False) == []
    [(frm, to, unit)] = sched.take_waiting(["b"])
    assert (frm, to, unit.id) == ("a", "b", 2) and sched.held == {"a": [0], "b": [2]}
    assert sched.lose("b") == [unit]                       # one real move: still handed on (max_moves 3)


def test_a_worker_lost_mid_run_gives_its_units_to_the_others_and_nothing_is_lost():
    sched = UnitScheduler(make_units(30, size=3), depth=2)
    measured = simulate(sched, {"a": 1.0, "b": 1.0, "c": 1.0}, die={"b": 4.5})
    assert sorted(measured) == list(range(30)) and all(len(w) == 1 for w in measured.values())
    assert sched.lost == ["b"] and sched.moves
    for m in sched.moves:   # each move says which variants, from the lost worker, to a live one that did them
        assert m.from_worker == "b" and m.to_worker in ("a", "c") and m.variants == list(sched.by_id[m.unit].variants)
        assert sched.finished[m.unit] == m.to_worker and all(measured[v] == [m.to_worker] for v in m.variants)


def test_a_worker_that_joins_late_takes_work_and_a_lost_units_go_first():
    sched = UnitScheduler(make_units(20, size=1), depth=1)
    assert [u.id for _, u in sched.assign(["a", "b"])] == [0, 1]
    assert [u.id for u in sched.lose("b")] == [1]
    assert [(w, u.id) for w, u in sched.assign(["a", "c"])] == [("c", 1)]   # a is full; the lost unit goes first
    assert sched.moves == [Move(1, [1], "b", "c")]
    with pytest.raises(MirageLabError, match="not held by"):
        sched.done("b", 1)
    sched.done("a", 0)
    sched.done("c", 1)
    measured = simulate(sched, {"a": 1.0, "c": 2.0, "d": 1.0}, join={"d": 3.0})
    assert sorted(measured) == list(range(2, 20)) and all(len(w) == 1 for w in measured.values())
    assert "d" in sched.units_per_worker() and sched.units_per_worker()["c"] > sched.units_per_worker()["a"]


def test_a_unit_that_kills_every_worker_it_meets_is_given_up_after_max_moves():
    sched = UnitScheduler(make_units(6, size=1), depth=1, max_moves=2)
    workers = iter(f"w{i}" for i in range(10))
    for _ in range(2):   # unit 0 always goes first (a lost unit goes back to the front) and kills its worker
        w = next(workers)
        assert sched.assign([w]) == [(w, sched.by_id[0])]
        sched.lose(w)
    assert sched.given_up == {0} and 0 not in sched.pending and len(sched.moves) == 2
    measured = simulate(sched, {"a": 1.0, "b": 1.0})
    assert sorted(measured) == [1, 2, 3, 4, 5] and sched.complete


# ---------------------------------------------------------------------------- the winner
def _results(timings: list[float | None], estimates: list[float]) -> list[VariantResult]:
    g = ex.rms_norm_linear_fused(4, 64, 64, grid=4, forloop_range=4)
    out = []
    for i, (us, est) in enumerate(zip(timings, estimates)):
        r = VariantResult(Variant(i % 3, g, CodegenOptions(), 128 * (1 + i % 2)), Estimate(est, est, 0.0, 1, 1.0))
        if us is not None:
            r.compile_s, r.rel_err = 1.0, 1e-4
            r.timings = {"cuda_graph": Timing(f"v{i}", "cuda_graph", us, us, us, 100)}
        out.append(r)
    return out


def one_process_pick(results: list[VariantResult]) -> VariantResult:
    """What the one-process tuner returns for these results, in plan order: its report's ``chosen``."""
    rep = TuneReport(results, None, {}, 1.0, "randn", 1.0, 60.0, 0, "fake GPU", timed=True)
    return rep.chosen


@pytest.mark.parametrize("seed", range(5))
def test_the_merged_results_pick_the_one_process_winner_whatever_the_order_units_come_back(seed):
    rng = random.Random(seed)
    # ties on purpose: equal times, equal estimates; the one-process rule breaks them by estimate, then plan order
    timings = [rng.choice([7.0, 7.0, 8.5, 9.0, 12.0]) for _ in range(24)]
    estimates = [rng.choice([5.0, 6.0]) for _ in range(24)]
    sched = UnitScheduler(make_units(24, size=rng.choice([1, 2, 5])), depth=2)
    simulate(sched, {"a": rng.uniform(0.5, 3), "b": rng.uniform(0.5, 3), "c": 1.0}, die={"c": rng.uniform(1, 6)})
    # each worker's results come back in the order its units finished; the caller files them by plan index
    merged: list[VariantResult | None] = [None] * 24
    fresh = _results(timings, estimates)
    for uid in sorted(sched.finished, key=lambda u: rng.random()):
        for i in sched.by_id[uid].variants:
            merged[i] = fresh[i]
    assert all(r is not None for r in merged)
    reference = _results(timings, estimates)
    pick = best_variant(merged, timed=True)  # type: ignore[arg-type]
    want = one_process_pick(reference)
    assert merged.index(pick) == reference.index(want)


def test_the_stopping_rule_over_every_workers_results_is_the_one_process_rule():
    cand = ex.rms_norm_linear_fused(4, 64, 64, grid=4, forloop_range=4)
    planned = plan_variants([cand, ex.rms_norm_linear_fused(4, 64, 64, grid=4, forloop_range=4)])
    results = [VariantResult(v, e) for v, e in planned]
    for i in (0, 1, 3):   # some measured, one much faster than its estimate says
        results[i].compile_s, results[i].rel_err = 1.0, 1e-4
        us = results[i].estimate.us * (0.3 if i == 3 else 1.1)
        results[i].timings = {"cuda_graph": Timing("v", "cuda_graph", us, us, us, 100)}
    tn = _Tuning(program=None, results=results, mi=None, timer=object(), cache_dir=None, repeats=1, stop_margin=0.1,
                 emit=lambda ev: None, t0=0.0)
    tn.finished = {0, 1, 3}
    assert still_possible(results, float("inf"), 0.1) == set(tn.possible())
    assert still_possible(results, float("inf"), None) == set(range(len(results))) - {0, 1, 3}
    assert len(still_possible(results, float("inf"), 0.1)) < len(results) - 3   # the rule does drop some


def test_untimed_runs_stop_at_the_first_correct_variant_once_every_earlier_one_was_tried():
    rs = _results([None, 5.0, None], [1.0, 1.0, 1.0])
    assert not first_correct_settled(rs)           # variant 0 not tried yet: it could be the first correct
    rs[0].compile_s, rs[0].error = 1.0, "compile/launch: boom"
    assert first_correct_settled(rs)


# ---------------------------------------------------------------------------- calibration and the record
def test_a_gpu_more_than_three_percent_from_the_median_is_named():
    base = {"copy_us": 1000.0, "matmul_us": 30.0}
    table = {"w0": base, "w1": {"copy_us": 1029.0, "matmul_us": 30.0}, "w2": {"copy_us": 1000.0, "matmul_us": 31.0},
             "cpu": None}
    lines = calibration_outliers(table)
    assert len(lines) == 1 and lines[0].startswith("w2: matmul_us 31.00 µs is 3.3 %")
    assert calibration_outliers({"w0": base}) == []   # one GPU cannot differ from itself


def test_the_cluster_record_travels_with_the_report_through_the_cache_codec():
    rs = _results([5.0], [1.0])
    run = ClusterRun([WorkerRecord("tcp://a:1", "H100", {"copy_us": 1000.0, "matmul_us": 30.0}, 3, 9),
                      WorkerRecord("tcp://b:1", "H100", None, 0, 0, lost=True)],
                     [Move(2, [4, 5], "tcp://b:1", "tcp://a:1")], 2, [], "each GPU worker's host", "tcp://a:1")
    rep = TuneReport(rs, rs[0], {}, 1.0, "randn", 1.0, 60.0, 0, "H100", timed=True, cluster=run)
    back = decode(json.loads(dumps(encode(rep))))
    assert back.cluster == run and back.cluster.rows()[0]["copy_us"] == 1000.0 and back.cluster.rows()[1]["lost"]
