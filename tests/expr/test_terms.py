"""Abstract-expression terms: interning, printing, normal forms, errors."""
from __future__ import annotations

import pickle

import pytest

from mirage_lab.errors import MirageLabError
from mirage_lab.expr import terms as T


def test_terms_are_interned_and_hashable():
    a = T.red(64, T.mul(T.var(0), T.var(1)))
    b = T.red(64, T.mul(T.var(0), T.var(1)))
    assert a is b and a == b and hash(a) == hash(b)
    assert T.mul(T.var(1), T.var(0)) is not T.mul(T.var(0), T.var(1))  # syntax, not algebra
    assert {a: 1}[b] == 1
    assert pickle.loads(pickle.dumps(a)) is a


def test_printing_follows_the_spec_style():
    x, w = T.var(0), T.var(1)
    e = T.red(4096, T.mul(T.div(x, T.rms(4096, x)), w))
    assert str(e) == "sum(4096, mul(div(x0, rms(4096, x0)), x1))"
    assert str(T.clamp(0, 1, T.exp(x))) == "clamp(0.0, 1.0, exp(x0))"
    assert repr(T.silu(x)) == "Expr(silu(x0))"
    assert str(T.concat(x, w, 1, 64, 8)) == "concat(x0, x1, dim=1)"


def test_reduction_normal_forms():
    x = T.var(0)
    assert T.red(1, x) is x
    assert T.red(32, T.red(128, x)) is T.red(4096, x)
    assert T.red(4, T.rms(8, x)).n == 4


def test_symbols_variables_and_size():
    e = T.div(T.exp(T.var(2)), T.red(8, T.exp(T.var(2))))
    assert T.symbols(e) == {"div", "exp"}
    assert T.variables(e) == {2}
    assert e.size == 6  # tree nodes, shared subterms counted each time
    assert len(e.subterms()) == 4
    assert [n.op for n in e.walk()][:2] == ["div", "exp"]


def test_bad_terms_raise_mirage_errors():
    with pytest.raises(MirageLabError, match="positive int"):
        T.red(0, T.var(0))
    with pytest.raises(MirageLabError, match="expected an abstract expression"):
        T.mul(T.var(0), 3)
    with pytest.raises(MirageLabError, match="non-negative"):
        T.var(-1)
