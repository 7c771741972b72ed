"""The search's candidates and state counts with this branch's CPU fast paths forced on at the
small shapes of ``test_search_unchanged.py`` (whose size floor otherwise keeps it off there):
the compiled ``scale`` changes no fingerprint."""
import pytest

from mirage_lab.search import arrays, cpu_ops, layout_copy, run_search

from .test_search_unchanged import EXPECTED


@pytest.mark.skipif(not cpu_ops.HAVE_NUMBA, reason="numba does not import here")
@pytest.mark.parametrize("name", ["rmsnorm_linear_4x64x64_customized"])
def test_same_with_the_compiled_scale_forced_on(name, monkeypatch):
    monkeypatch.setattr(cpu_ops.SearchFieldOps, "SCALE_MIN_ELEMENTS", 0)
    monkeypatch.setattr(cpu_ops.SearchFieldOps, "MEMO_MIN_MACS", 0)
    monkeypatch.setattr(layout_copy, "MIN_ELEMENTS", 0)
    monkeypatch.setattr(arrays, "_INSTANCES", {})
    make, settings, (states, hashes) = EXPECTED[name]
    res = run_search(make(), workers=1, fingerprint_backend="numpy", **settings)
    assert sorted(c.content_hash() for c in res.candidates) == hashes
    assert res.stats.states == states
