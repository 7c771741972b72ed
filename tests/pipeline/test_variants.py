"""A candidate's lowering variants: every distinct generated module, made once per graph content."""
from mirage_lab import examples as ex
from mirage_lab.pipeline import variants as vmod
def test_lowering_variants_are_generated_once_per_graph_content():
    # asked for by the search's stop rule, the speculative compiles, the shortlist and the tuner:
    # the generated modules of one candidate are made once; each caller gets its own Variants
    g = ex.rms_norm_linear_fused(grid=128)
    calls = []
    real = vmod._source_key
    vmod._MEMO.clear()
    try:
        vmod._source_key = lambda *a: calls.append(1) or real(*a)
        first = vmod.lowering_variants(g, candidate=0)
        n = len(calls)
        again = vmod.lowering_variants(g, candidate=3)
        assert n > 0 and len(calls) == n                       # no module generated the second time
        assert [v.tag.split("/", 1)[1] for v in again] == [v.tag.split("/", 1)[1] for v in first]
        assert {v.candidate for v in again} == {3} and again[0] is not first[0]
        again[0].estimate_us = 1.0
        assert first[0].estimate_us is None                    # callers do not share mutable Variants
    finally:
        vmod._source_key = real
