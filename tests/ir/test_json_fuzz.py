"""Property-based: whatever text ``mi.from_json`` is given, it returns a μGraph or raises a MirageLabError.

The cases: valid μGraph files with one value replaced (by any JSON value or by a raw token
such as ``1e400``, a 5,000-digit int, ``NaN`` or deep nesting), valid files cut short,
arbitrary text and bytes, and deep nesting alone. ``benchmarks/reliability_fuzz.py`` runs
the same properties with more examples (``check_text`` and ``CASES`` are shared).
"""
from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mirage_lab as mi
from mirage_lab import examples as ex
from mirage_lab.errors import MirageLabError

CI_EXAMPLES = 150   # the benchmark script runs >= 1,000

_PROGRAMS = [ex.rms_norm_linear_fused(4, 64, 64, grid=4, forloop_range=2), ex.rms_norm_linear_program(4, 64, 64),
             ex.gated_mlp_fused(4, 64, 64)]
_TEXTS = [g.to_json() for g in _PROGRAMS]
_PLACEHOLDER = "__fuzz_value__"
RAW_TOKENS = ["1e400", "-1e400", "9" * 5000, "-" + "9" * 400, "NaN", "Infinity", "-Infinity", "1.5", "0.5", "-1",
              "0", "true", "null", "2147483648", "1" + "0" * 30, "[" * 3000 + "]" * 3000, "{}", "[]", '"x"',
              "[[[[[[[[[[[[]]]]]]]]]]]]", '"\\ud800"', "1e-400", "4e9"]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)


def _paths(d, prefix=()):
    """Every path (a tuple of keys / indices) into the nested dict/list ``d``."""
    out = [prefix]
    if isinstance(d, dict):
        for k, v in d.items():
            out += _paths(v, prefix + (k,))
    elif isinstance(d, list):
        for i, v in enumerate(d):
            out += _paths(v, prefix + (i,))
    return out


@st.composite
def mutated_files(draw):
    """A valid μGraph file with one value (or the whole file) replaced."""
    d = json.loads(draw(st.sampled_from(_TEXTS)))
    paths = _paths(d)[1:]
    path = draw(st.sampled_from(paths))
    node = d
    for k in path[:-1]:
        node = node[k]
    raw = draw(st.one_of(st.sampled_from(RAW_TOKENS), json_values.map(json.dumps)))
    node[path[-1]] = _PLACEHOLDER
    return json.dumps(d).replace(json.dumps(_PLACEHOLDER), raw, 1)


@st.composite
def truncated_files(draw):
    text = draw(st.sampled_from(_TEXTS))
    return text[:draw(st.integers(0, len(text)))]


CASES = st.one_of(
    mutated_files(),
    truncated_files(),
    st.text(max_size=200),
    st.binary(max_size=200),
    st.integers(1, 5000).map(lambda n: "[" * n + "]" * n),
    st.integers(1, 5000).map(lambda n: '{"a":' * n + "1" + "}" * n),
)


def check_text(text) -> str:
    """Load ``text``: 'loaded' or 'refused'; any exception but a MirageLabError propagates (a failure)."""
    try:
        g = mi.from_json(text)
    except MirageLabError as e:
        assert str(e), "an error must say what is wrong"
        return "refused"
    assert mi.from_json(g.to_json()).content_hash() == g.content_hash()
    return "loaded"


@settings(max_examples=CI_EXAMPLES, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(CASES)
def test_any_text_loads_or_is_a_clean_error(text):
    check_text(text)


def test_the_cases_of_issue_21_are_clean_errors():
    for text, needle in [("[" * 1000 + "]" * 1000, "nested more than"),
                         (_TEXTS[0].replace('"dims": [4, 64]', '"dims": [1e400, 64]', 1), "overflows a float"),
                         (_TEXTS[0].replace('"dims": [4, 64]', '"dims": [' + "9" * 5000 + ', 64]', 1), "5000 digits"),
                         (_TEXTS[0].replace('"dims": [4, 64]', '"dims": [4.0, 64]', 1), "must be an int")]:
        assert text != _TEXTS[0] or needle == "nested more than"
        try:
            mi.from_json(text)
        except MirageLabError as e:
            assert needle in str(e), str(e)
        else:
            raise AssertionError(f"{text[:60]} loaded")


def test_the_unmutated_files_load():
    assert all(check_text(t) == "loaded" for t in _TEXTS)
