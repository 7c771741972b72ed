"""Library kernels as contenders (issue 19): the attention matcher on exact and near-miss graphs, the
sdpa lowering against the float64 reference (whole program, and attention inside a larger one), its
export as a torch-only module, and the race returning it when the (injected) timer says it is fastest."""
from __future__ import annotations

import importlib.util
import json

import pytest
import torch

import mirage_lab as mi
from mirage_lab import examples as ex
from mirage_lab.errors import MirageLabError
from mirage_lab.pipeline.contenders import program_lowerings_for
from mirage_lab.pipeline.library import LIBRARIES, library_function, library_lowerings, match_attention
from mirage_lab.runtime.export import export_program
from mirage_lab.runtime.torch_fn import Substitute, to_torch_fn
from proc_helpers import run_python


def _attention(g, Q, K, V, *, dim=None, exp=True, probs_right=False, out=True):
    """Build softmax(Q K) V the builder's way, with the knobs the near-misses turn."""
    A = g.matmul(Q, K)
    E = g.exp(A) if exp else A
    S = g.reduction(E, E.num_dims - 1 if dim is None else dim)
    D = g.div(E, S)
    O = g.matmul(V, D) if probs_right else g.matmul(D, V)
    if out:
        g.mark_output(O)
    return O


def _qkv(g, b, L, d, S, dtype=mi.float32):
    lead = (b,) if b else ()
    return (g.new_input(dims=(*lead, L, d), dtype=dtype), g.new_input(dims=(*lead, d, S), dtype=dtype),
            g.new_input(dims=(*lead, S, d), dtype=dtype))


def _inputs(g, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(*t.dims, generator=gen).to(t.dtype.torch) / 4 for t in g.inputs]


def _rel(a, b):
    return float((a.double() - b.double()).norm() / b.double().norm())


# ----------------------------------------------------------------------------- the matcher
@pytest.mark.parametrize("batch", [None, 3])
def test_attention_matches_with_or_without_a_batch_dim(batch):
    g = mi.new_kernel_graph()
    Q, K, V = _qkv(g, batch, 4, 8, 16)
    O = _attention(g, Q, K, V)
    (m,) = match_attention(g)
    assert m.inputs == (Q.guid, K.guid, V.guid) and m.output == O.guid and len(m.ops) == 5
    assert library_lowerings(g) == ["sdpa"]


def test_the_seed_gqa_program_and_two_attentions_in_one_program_match():
    assert len(match_attention(ex.gqa_program(2, 8, 16, 32))) == 1
    g = mi.new_kernel_graph()
    Q, K, V = _qkv(g, 2, 4, 8, 16)
    O1 = _attention(g, Q, K, V, out=False)
    K2, V2 = g.new_input(dims=(2, 8, 12), dtype=mi.float32), g.new_input(dims=(2, 12, 8), dtype=mi.float32)
    O2 = _attention(g, O1, K2, V2)
    assert sorted(m.output for m in match_attention(g)) == sorted([O1.guid, O2.guid])


def test_attention_inside_a_larger_program_matches_its_attention_part():
    # QK-norm decode: Q RMS-normed with a weight before the attention, a gate multiplied after it
    g = mi.new_kernel_graph()
    Q, K, V = _qkv(g, 2, 4, 8, 16)
    Gq = g.new_input(dims=(1, 1, 8), dtype=mi.float32)
    Qn = g.rms_norm(Q, Gq)
    O = _attention(g, Qn, K, V, out=False)
    Gate = g.new_input(dims=(2, 4, 8), dtype=mi.float32)
    g.mark_output(g.mul(O, Gate))
    (m,) = match_attention(g)
    assert m.inputs[0] == Qn.guid and m.output == O.guid


def _scaled_attention(g, Q, K, V, S, *, scale_first=False):
    QK = g.matmul(Q, K)
    E = g.exp(g.mul(S, QK) if scale_first else g.mul(QK, S))
    O = g.matmul(g.div(E, g.reduction(E, E.num_dims - 1)), V)
    g.mark_output(O)
    return O


@pytest.mark.parametrize("scale_first", [False, True])
def test_a_one_element_scale_of_the_scores_is_part_of_the_match_and_runs_right(scale_first, tmp_path):
    # QK-norm attention: exp(g * q^ k^) with a learned scalar gain g, an input [1, 1, 1]
    g = mi.new_kernel_graph()
    Q, K, V = _qkv(g, 2, 4, 8, 16)
    S = g.new_input(dims=(1, 1, 1), dtype=mi.float32)
    O = _scaled_attention(g, Q, K, V, S, scale_first=scale_first)
    (m,) = match_attention(g)
    assert m.inputs == (Q.guid, K.guid, V.guid, S.guid) and m.output == O.guid and len(m.ops) == 6
    xs = _inputs(g)
    xs[3] = torch.tensor([[[2.5]]])
    (o,) = library_function(g, "sdpa")(xs)
    (ref,) = mi.run_reference(g, [x.double() for x in xs])
    assert _rel(o, ref) < 1e-5
    path = export_program(g, tmp_path / "scaled.py", substitutes=LIBRARIES["sdpa"].substitutes(g))
    assert f"t{O.guid} = sdpa_attention(t{Q.guid}, t{K.guid}, t{V.guid}, t{S.guid})" in path.read_text()
    spec = importlib.util.spec_from_file_location("scaled", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert torch.equal(mod.forward(*xs)[0], o)


def test_a_scale_of_more_than_one_element_is_no_match():
    g = mi.new_kernel_graph()
    Q, K, V = _qkv(g, 2, 4, 8, 16)
    _scaled_attention(g, Q, K, V, g.new_input(dims=(1, 1, 16), dtype=mi.float32))   # a per-key weight: not a scale
    assert match_attention(g) == []


def _near_miss(kind):
    g = mi.new_kernel_graph()
    Q, K, V = _qkv(g, 2, 16, 16, 16)   # square, so the wrong-operand variants still build
    if kind == "wrong reduction dim":
        _attention(g, Q, K, V, dim=1)
    elif kind == "missing exp":
        _attention(g, Q, K, V, exp=False)
    elif kind == "probabilities as the right operand":
        _attention(g, Q, K, V, probs_right=True)
    elif kind == "normaliser of another tensor":
        E = g.exp(g.matmul(Q, K))
        g.mark_output(g.matmul(g.div(E, g.reduction(g.exp(g.matmul(V, K)), 2)), V))
    elif kind == "probabilities also an output":
        A = g.matmul(Q, K)
        E = g.exp(A)
        D = g.div(E, g.reduction(E, 2))
        g.mark_output(g.matmul(D, V))
        g.mark_output(D)
    elif kind == "exp read elsewhere":
        E = g.exp(g.matmul(Q, K))
        g.mark_output(g.matmul(g.div(E, g.reduction(E, 2)), V))
        g.mark_output(g.add(E, E))
    elif kind == "sum in the numerator":
        E = g.exp(g.matmul(Q, K))
        g.mark_output(g.matmul(g.div(g.reduction(E, 2), E), V))
    return g


@pytest.mark.parametrize("kind", ["wrong reduction dim", "missing exp", "probabilities as the right operand",
                                  "normaliser of another tensor", "probabilities also an output", "exp read elsewhere",
                                  "sum in the numerator"])
def test_near_misses_get_no_library_contender(kind):
    g = _near_miss(kind)
    assert match_attention(g) == [] and library_lowerings(g) == []
    assert "sdpa" not in program_lowerings_for(g, ("torch", "torch.compile", "library"), timed=True)
    with pytest.raises(MirageLabError, match="computes no part of this program"):
        library_function(g, "sdpa")


def test_library_contenders_race_only_where_timing_decides_and_after_the_plain_ops():
    g = ex.gqa_program(2, 8, 16, 32)
    assert program_lowerings_for(g, ("library", "torch", "torch.compile"), timed=True) == \
        ["torch", "torch.compile", "sdpa"]
    assert program_lowerings_for(g, ("torch", "torch.compile", "library"), timed=False) == ["torch"]
    assert program_lowerings_for(g, ("torch",), timed=True) == ["torch"]


# ----------------------------------------------------------------------------- the lowering runs right
@pytest.mark.parametrize("dtype,tol", [(mi.float32, 1e-5), (mi.bfloat16, 2e-2)])
def test_sdpa_lowering_equals_the_reference(dtype, tol):
    g = ex.gqa_program(2, 8, 16, 32, dtype=dtype)
    xs = _inputs(g)
    (o,) = library_function(g, "sdpa")(xs)
    (ref,) = mi.run_reference(g, [x.double() for x in xs])
    assert o.dtype == dtype.torch and o.shape == ref.shape and _rel(o, ref) < tol


def test_the_rest_of_the_program_runs_as_torch_ops_around_the_library_call(tmp_path):
    g = mi.new_kernel_graph()
    Q, K, V = _qkv(g, 3, 4, 8, 16)
    Gq = g.new_input(dims=(1, 1, 8), dtype=mi.float32)
    O = _attention(g, g.rms_norm(Q, Gq), K, V, out=False)
    Gate = g.new_input(dims=(3, 4, 8), dtype=mi.float32)
    g.mark_output(g.mul(O, Gate))
    g.mark_output(g.exp(Gate))   # a second output, untouched by the call
    xs = _inputs(g)
    refs = mi.run_reference(g, [x.double() for x in xs])
    f = library_function(g, "sdpa")
    assert f.lowering == "sdpa"
    outs = f(xs)
    assert len(outs) == 2 and all(_rel(o, r) < 1e-5 for o, r in zip(outs, refs))
    # the exported module: torch only, the library function's source in it, same numbers after a reimport
    path = export_program(g, tmp_path / "lib_mod.py", substitutes=LIBRARIES["sdpa"].substitutes(g))
    src = path.read_text()
    assert "def sdpa_attention(" in src and "mirage_lab" not in src.split('"""')[-1] and "numba" not in src
    spec = importlib.util.spec_from_file_location("lib_mod", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    outs2 = mod.forward(*xs)
    assert all(torch.equal(a, b) for a, b in zip(outs, outs2))


def test_a_substitute_whose_hidden_tensor_is_read_elsewhere_is_refused():
    g = _near_miss("exp read elsewhere")    # the matcher refuses it; a substitute forced on it is refused too
    m = match_attention(ex.gqa_program(2, 16, 16, 16, dtype=mi.float32))[0]  # the same op guids
    subs = [Substitute("sdpa", m.ops, m.inputs, m.output, LIBRARIES["sdpa"].function, "")]
    with pytest.raises(MirageLabError, match="reads t4, which the call does not produce"):
        to_torch_fn(g, subs)


# ----------------------------------------------------------------------------- the race returns it
# autotune on a real μGraph candidate (one variant, under the CUDA simulator) with the program's lowerings and
# the sdpa contender; an injected timer (the tuner's one timing function) says which is fastest.
RACE = '''
import json, warnings, torch, mirage_lab as mi
from mirage_lab import examples as ex
from mirage_lab.pipeline import autotune
from mirage_lab.pipeline.result import result_from_report
from mirage_lab.runtime import program as rp
from mirage_lab.runtime.profile import Timing
from mirage_lab.runtime.torch_fn import Substitute, to_torch_fn
US = json.loads(US_JSON)
asked = []
class FakeTimer:
    def graph(self, name, check_inputs, capture, inputs, repeats):
        check_inputs(inputs)
        asked.append((name, id(inputs)))
        us = US.get(name, US["variant"])
        return Timing(name, "cuda_graph", us, us, us, repeats)
    def eager(self, name, fn, inputs, repeats):
        return Timing(name, "eager", US["eager"], US["eager"], US["eager"], repeats)
rp.compile_program_fn = lambda program, mode=None: torch.compile(to_torch_fn(program), backend="eager")
dt = mi.float16
g = ex.gqa_program(1, 4, 16, 32, dtype=dt)
cand = ex.gqa_flashdecoding(1, 4, 16, 32, kv_splits=2, q_blocks=1, forloop_range=2, dtype=dt)
with warnings.catch_warnings(record=True) as warned:
    warnings.simplefilter("always")
    rep = autotune(g, [cand], timer=FakeTimer(), max_variants=1)
    best = result_from_report(g, None, rep)
gen = torch.Generator().manual_seed(3)
xs = [(torch.randn(*t.dims, generator=gen) / 4).to(torch.float16) for t in g.inputs]
(ref,) = mi.run_reference(g, [x.double() for x in xs])
err = lambda a: float((a.double() - ref).norm() / ref.norm())
(o,) = best(xs)
path = best.export("exported_sdpa.py")
import importlib.util
spec = importlib.util.spec_from_file_location("exported_sdpa", path); mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
(o2,) = mod.forward(*xs)
src = open(path).read()
print("RESULTS " + json.dumps({
    "winner": best.winner, "is_library": best.is_library, "is_program": best.is_program, "latency_us": best.latency_us,
    "speedup": best.speedup, "speedup_vs_compile": best.speedup_vs_compile, "repr": repr(best),
    "summary": rep.summary(), "programs": [p.row() for p in rep.programs], "variants": [r.row() for r in rep.results],
    "err": [err(o), err(o2)], "same": bool(torch.equal(o, o2)), "inputs_seen": len({i for _, i in asked}),
    "numba_in_export": "numba" in src, "sdpa_in_export": "scaled_dot_product_attention" in src,
    "warned": [str(w.message) for w in warned], "rho": rep.rank_correlation(), "pairs": rep.rank_pairs(),
    "rows": [(r.label, r.median_us) for r in rep.baseline_rows()]}))
'''


def _race(tmp_path, us):
    return run_python(RACE.replace("US_JSON", repr(json.dumps(us))), tmp_path, timeout=900)


def test_the_library_contender_is_returned_when_it_is_fastest(tmp_path):
    r = _race(tmp_path, {"torch": 8.0, "torch.compile": 7.0, "sdpa": 3.0, "variant": 5.0, "eager": 12.0})
    progs = {p["lowering"]: p for p in r["programs"]}
    assert set(progs) == {"torch", "torch.compile", "sdpa"} and progs["sdpa"]["error"] is None
    assert progs["sdpa"]["rel_err"] < 2e-3 and progs["sdpa"]["median_us"] == 3.0
    assert [v["error"] for v in r["variants"]] == [None] and r["variants"][0]["median_us"] == 5.0   # a real μGraph lost
    assert r["winner"] == "sdpa" and r["is_library"] and not r["is_program"] and r["latency_us"] == 3.0
    assert r["speedup"] == pytest.approx(4.0) and r["speedup_vs_compile"] == pytest.approx(7.0 / 3.0)
    phrase = "returning FlashAttention (sdpa): no μGraph beat it"
    assert phrase in r["summary"] and phrase in r["repr"] and "best μGraph 5.00 µs" in r["summary"]
    assert "4.00× faster than torch eager (12.00 µs)" in r["summary"] and "2.33× faster than torch.compile" in r["summary"]
    assert r["inputs_seen"] == 1                           # every contender timed on the same inputs
    assert max(r["err"]) < 2e-3 and r["same"]             # called, and the exported module gives the same
    assert r["sdpa_in_export"] and not r["numba_in_export"] and not r["warned"]
    assert r["rho"] is None and len(r["pairs"]) == 1       # one timed variant: no ranking to judge
    assert ["FlashAttention (sdpa) + CUDA graph", 3.0] in r["rows"]   # the latency plot's row


def test_a_faster_mugraph_still_beats_the_library(tmp_path):
    r = _race(tmp_path, {"torch": 8.0, "torch.compile": 7.0, "sdpa": 6.0, "variant": 5.0, "eager": 12.0})
    assert r["winner"] == "μGraph" and not r["is_library"] and r["latency_us"] == 5.0
    assert "FlashAttention" not in r["summary"]


def test_a_library_winner_rebuilds_from_its_stored_record():
    # what the persistent cache stores of a result (its state through the codec) rebuilds the same library call
    from mirage_lab.codegen import DEFAULT_OPTIONS
    from mirage_lab.pipeline.codec import decode, encode
    from mirage_lab.pipeline.result import OptimizedGraph

    g = ex.gqa_program(2, 8, 16, 32, dtype=mi.float32)
    best = OptimizedGraph(g, DEFAULT_OPTIONS, program=g, lowering="sdpa")
    state = {k: v for k, v in vars(best).items() if k not in ("program", "search_result", "_kernel", "_fast")}
    again = OptimizedGraph.__new__(OptimizedGraph)
    again.__dict__.update(decode(json.loads(json.dumps(encode(state)))))
    again.program, again.search_result, again._kernel, again._fast = g, None, None, None
    assert again.winner == "sdpa" and again.is_library and not again.is_program
    assert "FlashAttention (sdpa), the rest as torch ops, not measured" in repr(again)
    xs = _inputs(g)
    (o,) = again.kernel(xs)
    (ref,) = mi.run_reference(g, [x.double() for x in xs])
    assert again.kernel.lowering == "sdpa" and _rel(o, ref) < 1e-5
