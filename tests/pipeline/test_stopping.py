"""The stopping rule's kind calibration: groups with nothing timed judged by their kind's measured groups."""
from __future__ import annotations

import math

from mirage_lab.pipeline.stopping import kind_ratios, possible_winners, group_ratios

KIND = {"m1": "mma", "m2": "mma", "f1": "fma", "f2": "fma", "f3": "fma"}.__getitem__


def test_a_group_far_above_the_best_by_its_kinds_calibration_is_pruned_a_near_one_kept():
    # fma kind measured once: 30 µs for an estimate of 20 (ratio 1.5); the best is an mma 10 µs
    items = [("m1", 8.0, 10.0), ("f1", 20.0, 30.0), ("f2", 50.0, None), ("f2", 7.0, None)]
    # bound 10 * 1.25 * 2 = 25 µs: 50 * 1.5 = 75 is out, 7 * 1.5 = 10.5 is in
    assert possible_winners(items, best_us=10.0, margin=0.25, kind=KIND, safety=2.0) == [3]
    # without kinds (the old rule) both stay: f2 has nothing timed
    assert possible_winners(items, best_us=10.0, margin=0.25) == [2, 3]


def test_the_safety_factor_is_what_lets_a_group_beat_its_kinds_calibration():
    items = [("m1", 8.0, 10.0), ("f1", 20.0, 30.0), ("f2", 12.0, None)]   # 12 * 1.5 = 18 µs against 12.5
    assert possible_winners(items, best_us=10.0, margin=0.25, kind=KIND, safety=1.0) == []
    assert possible_winners(items, best_us=10.0, margin=0.25, kind=KIND, safety=1.5) == [2]   # 18 <= 18.75


def test_the_kinds_most_optimistic_group_calibrates_it():
    items = [("f1", 20.0, 40.0), ("f3", 20.0, 10.0), ("f2", 30.0, None), ("m1", 5.0, 9.0)]
    assert group_ratios(items) == {"f1": 2.0, "f3": 0.5, "m1": 1.8}
    assert kind_ratios(group_ratios(items), KIND) == {"fma": 0.5, "mma": 1.8}
    # f2: 30 * 0.5 = 15 <= 9 * 1.25 * 2 = 22.5 (by f1's ratio alone, 60, it would be out)
    assert possible_winners(items, best_us=9.0, margin=0.25, kind=KIND, safety=2.0) == [2]


def test_a_kind_with_nothing_timed_stays_a_possible_winner_and_sends_its_first_pending_variant():
    # mma measured fast; nothing fma timed: every fma variant can still win, the first (plan order) is sent
    items = [("m1", 8.0, 10.0), ("f1", 500.0, None), ("f2", 900.0, None), ("f1", 600.0, None)]
    assert possible_winners(items, best_us=10.0, margin=0.25, kind=KIND) == [1, 2, 3]
    assert possible_winners(items, best_us=10.0, margin=0.25, kind=KIND, wait=True) == [1]
    assert possible_winners(items, best_us=10.0, margin=0.25, kind=KIND, wait=True, probes=2) == [1, 2]
    # still compiling (pending), the probe keeps its place: nothing else of fma is sent meanwhile
    assert possible_winners(items, best_us=10.0, margin=0.25, kind=KIND, wait=True, pending=[1, 2, 3]) == [1]
    # once it failed (no longer pending, no time), the next one of the kind probes
    assert possible_winners(items, best_us=10.0, margin=0.25, kind=KIND, wait=True, pending=[2, 3]) == [2]
    # once it is timed (far off), the kind's calibration rules out the others: 900 * 1.2 > 10 * 1.25 * 2.5
    items[1] = ("f1", 500.0, 600.0)
    assert possible_winners(items, best_us=10.0, margin=0.25, kind=KIND, safety=2.5) == []


def test_a_group_measured_itself_is_judged_by_its_own_calibration_not_its_kinds():
    items = [("f1", 10.0, 100.0), ("f3", 10.0, 10.0), ("f1", 9.0, None), ("f3", 11.0, None)]
    # f1's own ratio 10: 90 µs, out even though the kind's ratio (1) would keep it; f3: 11 <= 12.5
    assert possible_winners(items, best_us=10.0, margin=0.25, kind=KIND, safety=100.0) == [3]


def test_nothing_measured_yet_keeps_everything_and_sends_one_probe_per_kind():
    items = [("m1", 8.0, None), ("m2", 9.0, None), ("f1", 20.0, None)]
    assert possible_winners(items, best_us=math.inf, margin=0.25, kind=KIND) == [0, 1, 2]
    assert possible_winners(items, best_us=math.inf, margin=0.25, kind=KIND, wait=True) == [0, 2]


def test_a_group_calibrated_by_its_kind_sends_its_first_pending_variant_the_rest_wait_for_its_time():
    items = [("m1", 8.0, 10.0), ("m2", 9.0, None), ("m2", 9.5, None), ("m2", 30.0, None)]
    # by the kind's calibration (ratio 1.25, bound 10 * 1.25 * 2.5 = 31.25): 9 and 9.5 can win, 30 (37.5) not
    assert possible_winners(items, best_us=10.0, margin=0.25, kind=KIND, safety=2.5) == [1, 2]
    assert possible_winners(items, best_us=10.0, margin=0.25, kind=KIND, safety=2.5, wait=True) == [1]
    # once m2's first is timed, its own calibration rules on the others: 9.5 * 1.2 = 11.4 in, 30 * 1.2 = 36 out
    items[1] = ("m2", 9.0, 10.8)
    assert possible_winners(items, best_us=10.0, margin=0.25, kind=KIND, safety=2.5, wait=True) == [2]


def test_a_time_far_above_its_estimate_is_taken_again_and_the_faster_stands():
    # On the H200 two readings 20-27x their estimates (a busy host) calibrated the stopping rule and
    # ruled out the other 77 variants of the README example.
    from types import SimpleNamespace

    from mirage_lab.pipeline.autotune import OUTLIER_FACTOR, _time
    from mirage_lab.runtime.profile import Timing

    def run(readings, estimate):
        calls = []

        class Timer:
            def graph(self, name, check_inputs, capture, inputs, repeats):
                us = readings[len(calls)]
                calls.append(us)
                return Timing(name, "cuda_graph", us, us, us, repeats)

        res = SimpleNamespace(variant=SimpleNamespace(tag="v"), estimate=SimpleNamespace(us=estimate),
                              timings={}, error=None)
        _time(res, SimpleNamespace(check_inputs=None, capture=None), SimpleNamespace(inputs=[]), 10, Timer())
        return res.timings["cuda_graph"], calls

    t, calls = run([448.0, 18.8], 16.3)
    assert calls == [448.0, 18.8] and t.median_us == 18.8 and t.extra["retimed_us"] == [448.0, 18.8]
    t, calls = run([448.0, 450.0], 16.3)                  # slow both times: it is slow
    assert t.median_us == 448.0 and len(calls) == 2
    t, calls = run([OUTLIER_FACTOR * 10 - 1, 5.0], 10.0)   # within the factor: timed once
    assert calls == [19.0] and "retimed_us" not in t.extra
