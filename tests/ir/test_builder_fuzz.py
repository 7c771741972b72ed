"""Property-based: every builder argument, given any value, builds exactly or raises a GraphBuildError.

Each call puts one drawn value into one argument slot of a builder call (dims, strides,
clamp bounds, grids, maps, loop ranges, scalars...). The value either fits the slot's kind
(an int slot takes ints, numpy ints included, never bools or floats; a number slot takes
finite ints and floats) and the call may succeed, or the call raises a GraphBuildError and
leaves the graph as it was. ``benchmarks/reliability_fuzz.py`` runs it with more examples.
"""
from __future__ import annotations

import math

import numpy as np
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mirage_lab as mi
from mirage_lab.errors import GraphBuildError

CI_EXAMPLES = 150   # the benchmark script runs >= 1,000 (of which >= 200 bad calls)

BAD_VALUES = [True, False, None, 0.5, 1.5, 16.0, -1.0, math.nan, math.inf, -math.inf, 10**400, -10**400, 10**30,
              2**31, 0, -1, -2, "16", "a", b"4", [4], (4, 4), {}, {"x": 1}, 3 + 0j, np.float64(2.0), np.bool_(True),
              np.int64(4), np.float32(math.nan), np.array([4, 4]), torch.tensor(2.0), torch.tensor([1, 2]),
              torch.tensor(True), torch.tensor(3), torch.tensor(math.inf), np.array(2.5), object()]
values = st.one_of(st.sampled_from(BAD_VALUES), st.integers(), st.floats(), st.text(max_size=4),
                   st.lists(st.integers(-2, 8), max_size=5), st.booleans())


def _is_int(v) -> bool:
    if isinstance(v, torch.Tensor):   # a one-element int tensor is an int (operator.index takes it)
        return v.dim() == 0 and not v.dtype.is_floating_point and not v.dtype.is_complex and v.dtype != torch.bool
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _is_number(v) -> bool:
    if isinstance(v, (torch.Tensor, np.ndarray)):   # a 0-d numeric tensor or array is a number
        return v.ndim == 0 and v.dtype not in (torch.bool, np.bool_) and not str(v.dtype).startswith(
            ("torch.complex", "complex")) and math.isfinite(float(v))
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)):
        return False
    try:
        return math.isfinite(float(v))
    except OverflowError:
        return False


def _kernel():
    g = mi.new_kernel_graph()
    return g, g.new_input((8, 16), dtype=mi.float32), g.new_input((16, 32), dtype=mi.float32)


def _block(g, x):
    bg = mi.new_threadblock_graph((2, 1, 1), (128, 1, 1), forloop_range=2, reduction_dimx=4)
    t = bg.new_input(x, (0, -1, -1), 1)
    return bg, t, bg.forloop_accum(t)


# slot name -> (kind of value it takes, the call with the value in it). A call returns the
# graph that an error must leave unchanged.
def _k(fn):
    def call(v):
        g, a, w = _kernel()
        before = (len(g.ops), len(g.tensors))
        try:
            fn(g, a, w, v)
        except GraphBuildError:
            assert (len(g.ops), len(g.tensors)) == before, "an error must leave the graph unchanged"
            raise
    return call


def _b(fn):
    def call(v):
        g, a, w = _kernel()
        bg, x, acc = _block(g, a)
        before = (len(bg.ops), len(bg.tensors))
        try:
            fn(bg, x, acc, a, v)
        except GraphBuildError:
            assert (len(bg.ops), len(bg.tensors)) == before, "an error must leave the graph unchanged"
            raise
    return call


SLOTS = {
    "new_input dims[0]": ("int", _k(lambda g, a, w, v: g.new_input((v, 4)))),
    "new_input dims": ("seq", _k(lambda g, a, w, v: g.new_input(v))),
    "new_input strides[0]": ("int", _k(lambda g, a, w, v: g.new_input((4, 4), strides=(v, 1)))),
    "new_input dtype": ("other", _k(lambda g, a, w, v: g.new_input((4, 4), dtype=v))),
    "clamp lo": ("number", _k(lambda g, a, w, v: g.clamp(a, v, 10**6))),
    "clamp hi": ("number", _k(lambda g, a, w, v: g.clamp(a, -10**6, v))),
    "rms_norm normalized_shape": ("int or None", _k(lambda g, a, w, v: g.rms_norm(a, v))),
    "reduction dim": ("int", _k(lambda g, a, w, v: g.reduction(a, v))),
    "matmul B": ("other", _k(lambda g, a, w, v: g.matmul(a, v))),
    "customized inputs": ("other", _k(lambda g, a, w, v: g.customized(v, mi.new_threadblock_graph((1, 1, 1))))),
    "grid_dim[0]": ("int", lambda v: mi.new_threadblock_graph((v, 1, 1))),
    "grid_dim": ("seq", lambda v: mi.new_threadblock_graph(v)),
    "block_dim[0]": ("int", lambda v: mi.new_threadblock_graph((1, 1, 1), (v, 1, 1))),
    "forloop_range": ("int", lambda v: mi.new_threadblock_graph((1, 1, 1), forloop_range=v)),
    "reduction_dimx": ("int", lambda v: mi.new_threadblock_graph((1, 1, 1), reduction_dimx=v)),
    "input_map[0]": ("int", _b(lambda bg, x, acc, a, v: bg.new_input(a, (v, -1, -1)))),
    "input_map": ("map", _b(lambda bg, x, acc, a, v: bg.new_input(a, v))),
    "forloop_dim": ("int", _b(lambda bg, x, acc, a, v: bg.new_input(a, (0, -1, -1), v))),
    "store_in_dmem": ("bool", _b(lambda bg, x, acc, a, v: bg.new_input(a, (0, -1, -1), 1, v))),
    "output_map[0]": ("int", _b(lambda bg, x, acc, a, v: bg.new_output(acc, (v, -1, -1)))),
    "mul_scalar": ("number", _b(lambda bg, x, acc, a, v: bg.mul_scalar(x, v))),
    "block clamp lo": ("number", _b(lambda bg, x, acc, a, v: bg.clamp(x, v, 10**6))),
    "block reduction dim": ("int", _b(lambda bg, x, acc, a, v: bg.reduction(x, v))),
    "concat dim": ("int", _b(lambda bg, x, acc, a, v: bg.concat(x, x, v))),
    "forloop_accum acc": ("other", _b(lambda bg, x, acc, a, v: bg.forloop_accum(x, v))),
}


def check_call(slot: str, value) -> str:
    """Run one call: 'built' or 'refused'; a raw exception, or a wrong-kind value built silently, fails."""
    kind, call = SLOTS[slot]
    try:
        call(value)
    except GraphBuildError as e:
        assert str(e)
        return "refused"
    fits = {"int": _is_int, "int or None": lambda v: v is None or _is_int(v), "number": _is_number,
            "bool": lambda v: isinstance(v, bool),
            "seq": lambda v: isinstance(v, (list, tuple, np.ndarray, torch.Tensor)) and all(_is_int(x) for x in v) or
            slot == "grid_dim" and _is_int(v),   # grid_dim=64 means (64, 1, 1)
            "map": lambda v: v is None or isinstance(v, dict) and all(_is_int(x) for x in v.values()) or
            isinstance(v, (list, tuple, np.ndarray, torch.Tensor)) and all(_is_int(x) for x in v),
            "other": lambda v: True}[kind](value)
    assert fits, f"{slot}: {value!r} ({type(value).__name__}) was accepted silently"
    return "built"


CASES = st.tuples(st.sampled_from(sorted(SLOTS)), values)


@settings(max_examples=CI_EXAMPLES, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(CASES)
def test_any_argument_builds_or_is_a_clean_error(case):
    check_call(*case)


def test_the_calls_of_issue_21_are_clean_errors():
    g, a, w = _kernel()
    calls = [lambda: g.new_input((float("inf"), 4)), lambda: g.new_input((4, 4), strides=("a", 1)),
             lambda: g.clamp(a, -10**400, 1), lambda: g.rms_norm(a, 3.5),
             lambda: mi.new_threadblock_graph((math.nan, 1, 1)), lambda: g.new_input((True, 4)),
             lambda: g.new_input((10**30, 4)), lambda: mi.new_threadblock_graph((10**30, 1, 1)),
             lambda: g.new_input((4, 4), strides=(1.5, 1))]
    bg, x, _ = _block(g, a)
    calls += [lambda: bg.new_input(a, ("a", -1, -1)), lambda: bg.new_input(a, (0.5, -1, -1)),
              lambda: bg.mul_scalar(x, 10**400), lambda: bg.mul_scalar(x, math.nan)]
    for c in calls:
        try:
            c()
        except GraphBuildError as e:
            assert "; " in str(e) or "pass" in str(e), f"no fix named: {e}"
        else:
            raise AssertionError("accepted")


def test_every_slot_with_every_listed_bad_value():
    """The exhaustive grid (25 slots x the listed values, ~900 calls): each builds exactly or is refused."""
    from collections import Counter

    seen = Counter(check_call(slot, v) for slot in SLOTS for v in BAD_VALUES)
    assert seen["refused"] >= 200 and sum(seen.values()) == len(SLOTS) * len(BAD_VALUES)
