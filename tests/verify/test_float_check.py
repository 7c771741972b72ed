"""Scalars in the verifier (issue 21): the cases the issue found, the second check, bounded caches."""
from __future__ import annotations

import multiprocessing as mp

import numpy as np
import pytest
import torch

import mirage_lab as mi
from mirage_lab.verify import field
from mirage_lab.verify.float_check import float_equivalent, inexact_scalars, loose_ops


def _in_block(y, f):
    """``f(bg, tile)`` applied to the whole of ``y`` in a one-block customized op."""
    g = y.graph
    bg = mi.new_threadblock_graph((1, 1, 1), (128, 1, 1), 1, 64)
    t = bg.new_input(y, (-1, -1, -1), -1)
    bg.new_output(bg.forloop_accum(f(bg, t)), (-1, -1, -1))
    return g.customized([y], bg)[0]


def _prog(f, m: int = 8, k: int = 16, n: int = 8):
    g = mi.new_kernel_graph()
    x, w = g.new_input((m, k)), g.new_input((k, n))
    g.mark_output(f(g, g.matmul(x, w)))
    return g


def test_clamp_bounds_never_collide():
    a = _prog(lambda g, y: g.clamp(y, -0.5, 0.5))
    b = _prog(lambda g, y: g.clamp(y, -3.125, 0.5))      # crc32 % 56 made these equal
    assert not mi.verify.equivalent(a, b, seed=1)
    assert not mi.verify.equivalent(a, b, seed=1, float_check="never")   # the field alone too
    tables = [field.unary_table("clamp", (lo, 0.5)) for lo in np.linspace(-4, 0, 200)]
    assert len({t.tobytes() for t in tables}) == 200
    t = tables[0]
    assert np.array_equal(t[t], t)                      # idempotent, as clamp∘clamp = clamp
    assert mi.verify.equivalent(a, _prog(lambda g, y: g.clamp(g.clamp(y, -0.5, 0.5), -0.5, 0.5)), seed=2)


@pytest.mark.parametrize("s", [1.113, 0.887, 2.13, 114.0, 1 / 114, 25652.0])
def test_exp_of_a_scaled_argument_is_not_exp(s):
    plain = _prog(lambda g, y: g.exp(y))
    scaled = _prog(lambda g, y: g.exp(_in_block(y, lambda bg, t: bg.mul_scalar(t, s))))
    assert mi.verify.equivalent(plain, scaled, seed=1, float_check="never")  # the field's blind spot ...
    r = mi.verify.equivalent(plain, scaled, seed=1)
    assert not r and r.second_check == "rejected"                            # ... closed by the second check
    assert "float64" in r.reason


def test_equal_programs_with_constants_are_accepted():
    silu = _prog(lambda g, y: g.silu(y))
    x_sig = _prog(lambda g, y: g.mul(y, g.sigmoid(y)))
    r = mi.verify.equivalent(silu, x_sig, seed=1)
    assert r and r.second_check == "confirmed"
    assert mi.verify.equivalent(silu, x_sig, seed=1, float_check="never")   # exact in the field
    half = _prog(lambda g, y: _in_block(y, lambda bg, t: bg.mul_scalar(t, 0.5)))
    twice = _prog(lambda g, y: _in_block(y, lambda bg, t: bg.mul_scalar(bg.mul_scalar(t, 2 ** -0.5), 2 ** -0.5)))
    assert inexact_scalars(twice) == (2 ** -0.5, 2 ** -0.5) and not inexact_scalars(half)
    r = mi.verify.equivalent(half, twice, seed=1)
    assert r and r.second_check == "decided"
    off = _prog(lambda g, y: _in_block(y, lambda bg, t: bg.mul_scalar(t, 0.5000001)))
    assert not mi.verify.equivalent(twice, off, seed=1)


def test_scalars_are_exact_rationals():
    assert field.scalar_fraction(0.1) == (__import__("fractions").Fraction(1, 10), True)
    f, nice = field.scalar_fraction(2 ** -0.5)
    assert not nice and float(f) == 2 ** -0.5                     # its own binary value, not rounded
    assert field.field_scalar(1 / 3) * 3 % field.PQ == 1
    with pytest.raises(mi.MirageLabError, match="finite"):
        field.field_scalar(float("nan"))
    with pytest.raises(mi.MirageLabError, match="finite"):
        field.attrs_key("mul_scalar", {"scalar": float("inf")})


def test_loose_ops_and_no_check_without_them():
    lin = _prog(lambda g, y: g.add(y, y))
    assert not loose_ops(lin) and loose_ops(_prog(lambda g, y: g.exp(y))) == {"exp"}
    assert mi.verify.equivalent(lin, lin, seed=0).second_check == ""
    assert mi.verify.equivalent(lin, lin, seed=0, float_check="always").second_check == "confirmed"
    with pytest.raises(mi.MirageLabError, match="float_check"):
        mi.verify.equivalent(lin, lin, float_check="sometimes")


def test_float_check_finds_the_output_permutation():
    g = mi.new_kernel_graph()
    x = g.new_input((4, 4))
    g.mark_output(g.exp(x))
    g.mark_output(g.silu(x))
    h = mi.new_kernel_graph()
    x = h.new_input((4, 4))
    h.mark_output(h.silu(x))
    h.mark_output(h.exp(x))
    assert float_equivalent(g, h, seed=0).permutation == (1, 0)
    assert float_equivalent(g, h, seed=0, permutations=[(0, 1)]).equal is False


def test_unary_table_cache_is_bounded():
    for i in range(field.TABLE_CACHE_SIZE + 50):
        field.unary_table("mul_scalar", (1.0 + i / 1024,))
    assert field.unary_table.cache_info().currsize <= field.TABLE_CACHE_SIZE
    assert field.unary_table.cache_info().maxsize == field.TABLE_CACHE_SIZE


def _confirm_in_child(_):
    # big enough for a multi-threaded matmul in torch (that is where the child hung)
    silu = _prog(lambda g, y: g.silu(y), 4, 256, 128)
    return bool(mi.verify.equivalent(silu, _prog(lambda g, y: g.mul(y, g.sigmoid(y)), 4, 256, 128), seed=3))


def test_second_check_in_a_forked_worker_after_the_parent_used_torch_threads():
    """The search confirms hits in forked workers: the check must not deadlock in torch's OpenMP."""
    if "fork" not in mp.get_all_start_methods():
        pytest.skip("no fork on this platform")
    n = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        a = torch.randn(256, 256, dtype=torch.float64)
        (a @ a).sum()                      # starts the parent's OpenMP team
        with mp.get_context("fork").Pool(2) as pool:
            assert pool.map_async(_confirm_in_child, range(2)).get(timeout=60) == [True, True]
    finally:
        torch.set_num_threads(n)


def test_decide_is_the_rule_of_equivalent_and_of_the_search_confirmation(monkeypatch):
    """The search confirms a hit with ``verify.equivalence.decide``: the second check included, as ``equivalent``."""
    from mirage_lab import examples as ex
    from mirage_lab.verify import equivalence
    from mirage_lab.verify.fingerprint import fingerprint_graph, random_inputs

    plain = _prog(lambda g, y: g.exp(y))
    scaled = _prog(lambda g, y: g.exp(_in_block(y, lambda bg, t: bg.mul_scalar(t, 1.113))))
    xs = random_inputs(plain, 2, 1)
    perm, second, reason = equivalence.decide(plain, scaled, fingerprint_graph(plain, xs), fingerprint_graph(scaled, xs), 1)
    assert perm is None and second == "rejected" and "float64" in reason
    calls = []

    def refuse(g1, g2, f1, f2, seed, float_check="auto"):
        calls.append(g2)
        return None, "rejected", "refused by the test"

    monkeypatch.setattr(equivalence, "decide", refuse)
    from mirage_lab.search import run_search

    res = run_search(ex.rms_norm_linear_program(4, 64, 64), workers=1)
    assert calls and not res.candidates     # every hit went through decide, and none was accepted against it


def test_draws_refill_one_set_of_arrays_and_outputs_never_alias_them(monkeypatch):
    """The float check's three draws reuse the same input arrays (at full size a fresh allocation cost more
    than the drawing); an output that is an input's memory is copied before the next draw overwrites it."""
    from mirage_lab.interp import reference
    from mirage_lab.verify import float_check

    g = _prog(lambda g, y: y)
    draws = [[x.clone() for x in xs] for xs in float_check._draws(g, 5)]
    assert len(draws) == 3 and all(x.dtype == torch.float64 for xs in draws for x in xs)
    assert float(draws[0][0].abs().max()) <= 1.0 and float(draws[1][0].abs().max()) <= 2.0 ** -8
    assert 0.5 <= float(draws[2][0].min()) and float(draws[2][0].max()) <= 1.5
    assert all(torch.equal(a, b) for a, b in zip(draws[0], next(float_check._draws(g, 5))))   # seeded
    monkeypatch.setattr(reference, "run_reference", lambda graph, xs: [xs[0]])   # an output that is an input
    outs = [float_check._run(g, xs) for xs in float_check._draws(g, 5)]
    assert [torch.equal(o[0], d[0]) for o, d in zip(outs, draws)] == [True, True, True]
