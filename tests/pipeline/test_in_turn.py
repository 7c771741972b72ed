"""The final round times contenders in turn, and the choice reads their rounds' ratios (issue 19).

A GPU whose clocks drift during the final round must not decide which contender wins: timed
one after another, the later one reads slower; timed in turn, each round compares them under
the same clocks. The timers here are fakes with a drifting clock; the real CUDA-graph timer runs
the same rounds (``runtime.profile.time_captured_in_turn``, GPU tests).
"""
from __future__ import annotations

import pytest

from mirage_lab.pipeline.autotune import CHOICE_MARGIN, TuneReport
from mirage_lab.pipeline.contenders import ProgramResult, time_in_turn
from mirage_lab.runtime.profile import Timing, paired_ratio


class DriftingTimer:
    """True times per name; every timing taken reads 1 % slower than the one before (clocks falling)."""

    def __init__(self, true_us: dict[str, float], drift: float = 0.01):
        self.true_us, self.drift, self.calls, self.asked = true_us, drift, 0, []

    def graph(self, name, check_inputs, capture, inputs, repeats):
        self.asked.append((name, repeats))
        us = self.true_us[name] * (1 + self.drift) ** self.calls
        self.calls += 1
        return Timing(name, "cuda_graph", us, us * 0.99, us * 1.01, repeats)


def _entries(*names):
    return [(n, lambda xs: xs, lambda s: (lambda: None)) for n in names]


def test_equal_contenders_timed_in_turn_read_equal_despite_drift():
    timer = DriftingTimer({"a": 10.0, "b": 10.0})
    ta, tb = time_in_turn(timer, _entries("a", "b"), [], repeats=300, rounds=10)
    assert [r for _, r in timer.asked] == [30] * 20                     # 10 rounds of 30 repeats each
    assert [n for n, _ in timer.asked[:4]] == ["a", "b", "b", "a"]      # forward, then backward
    assert ta.repeats == tb.repeats == 300 and ta.extra["turn"] == tb.extra["turn"]
    assert paired_ratio(ta, tb) == pytest.approx(1.0, abs=0.011)      # one step of drift at most
    # one after the other, the same two read 10 % apart: what the in-turn rounds take out
    seq = DriftingTimer({"a": 10.0, "b": 10.0})
    first = seq.graph("a", None, None, [], 300)
    seq.calls += 9                                                       # a's ten rounds' worth of drift
    second = seq.graph("b", None, None, [], 300)
    assert second.median_us / first.median_us > 1.09
    assert paired_ratio(first, second) is None                           # not timed in turn: no paired ratio


def test_paired_ratio_needs_the_same_turn():
    ta, tb = time_in_turn(DriftingTimer({"a": 9.0, "b": 10.0}), _entries("a", "b"), [], repeats=100, rounds=4)
    assert paired_ratio(ta, tb) == pytest.approx(0.9, rel=0.02)
    tc, = time_in_turn(DriftingTimer({"c": 10.0}), _entries("c"), [], repeats=100, rounds=4)
    assert paired_ratio(ta, tc) is None


def _report(programs):
    return TuneReport(results=[], best=None, baselines={}, floor_us=1.0, input_policy="test", seconds=1.0,
                      budget_s=1.0, untried=0, device="fake GPU", timed=True, programs=programs)


def _prog(lowering, t):
    p = ProgramResult(lowering, rel_err=0.0)
    p.timings["cuda_graph"] = t
    return p


def test_the_choice_reads_the_rounds_ratio_not_the_medians():
    # a library kernel 5 % faster than torch.compile round by round, timed while the clocks fell: in turn,
    # it is chosen; its medians alone would say 2 % (inside CHOICE_MARGIN)
    timer = DriftingTimer({"torch.compile": 10.0, "sdpa": 9.5}, drift=0.0)
    tc, ts = time_in_turn(timer, _entries("torch.compile", "sdpa"), [], repeats=100, rounds=4)
    assert paired_ratio(ts, tc) == pytest.approx(0.95)
    slow = Timing("sdpa", "cuda_graph", 9.8, 9.7, 9.9, 100, 1, dict(ts.extra))   # a median taken on slower clocks
    rep = _report([_prog("torch.compile", tc), _prog("sdpa", slow)])
    assert rep.vs_program(rep.programs[1]) == pytest.approx(0.95) and rep.winner == "sdpa"
    # the same medians without rounds: 2 % faster is not enough
    plain = _report([_prog("torch.compile", Timing("torch.compile", "cuda_graph", 10.0, 9.9, 10.1, 100)),
                     _prog("sdpa", Timing("sdpa", "cuda_graph", 9.8, 9.7, 9.9, 100))])
    assert plain.vs_program(plain.programs[1]) == pytest.approx(0.98) and plain.winner == "torch.compile"


def test_a_win_inside_the_margin_round_by_round_returns_the_program():
    # medians that look 5 % faster, but round by round only 1 % (the rounds say what the clocks hid)
    timer = DriftingTimer({"torch.compile": 10.0, "sdpa": 9.9}, drift=0.0)
    tc, ts = time_in_turn(timer, _entries("torch.compile", "sdpa"), [], repeats=100, rounds=4)
    fast = Timing("sdpa", "cuda_graph", 9.5, 9.4, 9.6, 100, 1, dict(ts.extra))
    rep = _report([_prog("torch.compile", tc), _prog("sdpa", fast)])
    assert 1 - CHOICE_MARGIN < rep.vs_program(rep.programs[1]) < 1
    assert rep.winner == "torch.compile"
