"""The persistent cache of superoptimize: hits, misses on every key part, corrupt entries, races, cache=False.

Every test keeps the cache under its own ``tmp_path`` (``MIRAGE_LAB_CACHE``), never the user's.
"""
from __future__ import annotations

import json
import multiprocessing as mp
import os
import subprocess
import sys
import warnings

import pytest
from pathlib import Path

import mirage_lab as mi
from mirage_lab import examples as ex
from mirage_lab.pipeline import cache as mc
from mirage_lab.pipeline.cache import CacheHit, CacheWarning
from mirage_lab.pipeline.codec import CodecError, decode, dumps, encode
from mirage_lab.search import Finished
from pipe_helpers import ROOT, SMALL_SEARCH


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MIRAGE_LAB_CACHE", str(tmp_path / "mlc"))


def run(g, **kw):
    """superoptimize without a GPU (the cost model picks); the events it sent."""
    events: list = []
    best = g.superoptimize(tune=False, progress=False, on_event=events.append, **{**SMALL_SEARCH, **kw})
    return best, events


def searched(events) -> bool:
    return any(isinstance(e, Finished) for e in events)


def hits(events) -> list[str]:
    return [e.layer for e in events if isinstance(e, CacheHit)]


def entries(layer: str):
    return sorted((mc.results_dir() / layer).glob("*.json"))


def test_a_second_superoptimize_is_a_hit_with_the_same_result():
    g = ex.rms_norm_linear_program(4, 64, 64)
    first, ev1 = run(g)
    assert searched(ev1) and not hits(ev1) and first.from_cache is None
    g2 = ex.rms_norm_linear_program(4, 64, 64)            # the same program, another object
    second, ev2 = run(g2)
    assert not searched(ev2) and hits(ev2) == ["search", "tuning"]
    assert second.from_cache == str(entries("tuning")[0])
    assert second.graph.content_hash() == first.graph.content_hash() and second.options == first.options
    res1, res2 = first.search_result, second.search_result
    assert [c.content_hash() for c in res2.candidates] == [c.content_hash() for c in res1.candidates]
    assert res2.costs == res1.costs and res2.stats == res1.stats and res2.program is g2
    assert mi.cache.info().entries == {"search": 1, "tuning": 1}


@pytest.mark.parametrize("change", ["shape", "dtype", "search setting", "mirage_lab version"])
def test_a_changed_key_part_misses(change, monkeypatch):
    run(ex.rms_norm_linear_program(4, 64, 64))
    g, kw = ex.rms_norm_linear_program(4, 64, 64), {}
    if change == "shape":
        g = ex.rms_norm_linear_program(4, 128, 64)
    elif change == "dtype":
        g = ex.rms_norm_linear_program(4, 64, 64, dtype=mi.bfloat16)
    elif change == "search setting":
        kw = {"franges": [4, 16]}
    else:
        monkeypatch.setattr(mc, "_version", lambda scope="all": "99.0")
    _, events = run(g, **kw)
    assert searched(events) and not hits(events)
    assert len(entries("search")) == 2


def test_settings_that_only_change_how_the_search_runs_hit():
    run(ex.rms_norm_linear_program(4, 64, 64))
    _, events = run(ex.rms_norm_linear_program(4, 64, 64), workers=2, progress_interval=1.0)
    assert not searched(events) and hits(events) == ["search", "tuning"]


def test_a_new_codegen_version_reuses_the_search_and_chooses_again(monkeypatch):
    import mirage_lab.codegen as cg

    run(ex.rms_norm_linear_program(4, 64, 64))
    monkeypatch.setattr(cg, "CODEGEN_VERSION", cg.CODEGEN_VERSION + 1)
    best, events = run(ex.rms_norm_linear_program(4, 64, 64))
    assert not searched(events) and hits(events) == ["search"] and best.from_cache is None
    assert len(entries("search")) == 1 and len(entries("tuning")) == 2


def test_the_search_key_digests_the_search_sources_only(tmp_path, monkeypatch):
    """A change to code generation keeps the search (its key digests search sources only); the tuning key
    digests every source."""
    g = ex.rms_norm_linear_program(4, 64, 64)
    skey = mc.search_key(g, None, dict(SMALL_SEARCH), None)
    tune = dict(tune=False, max_candidates=8, tune_seconds=60.0, baselines="eager", inputs=None)
    tkey = mc.tuning_key(skey, **tune)
    import shutil

    import mirage_lab

    root = Path(mirage_lab.__file__).parent
    copy = tmp_path / "mirage_lab"
    shutil.copytree(root, copy, ignore=shutil.ignore_patterns("__pycache__", "*.so", "static", "node_modules"))
    monkeypatch.setattr(mirage_lab, "__file__", str(copy / "__init__.py"))
    for rel, same_search in [("codegen/plan.py", True), ("search/generator.py", False)]:
        monkeypatch.setattr(mc, "_VERSIONS", {})
        f = copy / rel
        f.write_text(f.read_text() + "\n# changed\n")
        assert (mc.search_key(g, None, dict(SMALL_SEARCH), None) == skey) is same_search, rel
        assert mc.tuning_key(mc.search_key(g, None, dict(SMALL_SEARCH), None), **tune) != tkey, rel


def test_the_tuning_key_names_the_gpu_and_its_versions_and_the_search_key_does_not(monkeypatch):
    g = ex.rms_norm_linear_program(4, 64, 64)
    skey = mc.search_key(g, None, dict(SMALL_SEARCH), None)
    tune = dict(tune=True, max_candidates=8, tune_seconds=60.0, baselines="eager", inputs=None)
    gpu = {"gpu": "NVIDIA H100 80GB HBM3", "driver": "550.54.15", "cuda": "12.4", "numba_cuda": "0.30"}
    monkeypatch.setattr(mc, "device_info", lambda: dict(gpu))
    base = mc.tuning_key(skey, **tune)
    for part, other in [("gpu", "NVIDIA H200"), ("driver", "560.1"), ("cuda", "12.6"), ("numba_cuda", "0.31")]:
        monkeypatch.setattr(mc, "device_info", lambda part=part, other=other: {**gpu, part: other})
        assert mc.tuning_key(skey, **tune) != base, part
        assert mc.search_key(g, None, dict(SMALL_SEARCH), None) == skey
    monkeypatch.setattr(mc, "device_info", lambda: dict(gpu))
    assert mc.tuning_key(skey, **{**tune, "tune_seconds": 30.0}) != base
    assert mc.tuning_key(skey, **tune) == base
    from mirage_lab.pipeline import library

    monkeypatch.setitem(library.LIBRARIES, "another", library.LIBRARIES["sdpa"])   # a library kernel added later
    assert mc.tuning_key(skey, **tune) != base
    monkeypatch.delitem(library.LIBRARIES, "another")
    unbounded = mc.tuning_key(skey, **{**tune, "tune_seconds": float("inf")})   # a key may hold inf
    assert mc.store(unbounded, {"x": float("inf")}) is not None and mc.load(unbounded)[0] == {"x": float("inf")}
    assert mc.load(base) is None


def test_a_corrupt_entry_is_ignored_with_a_warning_and_rebuilt():
    first, _ = run(ex.rms_norm_linear_program(4, 64, 64))
    (t,) = entries("tuning")
    t.write_text('{"format": 1, "key": ')                                 # cut short
    with pytest.warns(CacheWarning, match="not JSON"):
        best, events = run(ex.rms_norm_linear_program(4, 64, 64))
    assert hits(events) == ["search"] and best.graph.content_hash() == first.graph.content_hash()
    assert json.loads(t.read_text())["format"] == mc.FORMAT                # rebuilt

    (s,) = entries("search")
    entry = json.loads(s.read_text())
    fields = entry["payload"]["__dict__"]
    cands = next(v for k, v in fields if k == "candidates")
    cands.pop()                                                           # tampered: a candidate dropped
    s.write_text(json.dumps(entry))
    with pytest.warns(CacheWarning, match="checksum"):
        _, events = run(ex.rms_norm_linear_program(4, 64, 64))
    assert searched(events)

    entry = json.loads(s.read_text())
    entry["key"]["program"] = "0" * 64                                     # another program's entry in its place
    s.write_text(json.dumps(entry))
    with pytest.warns(CacheWarning, match="key is not the one"):
        _, events = run(ex.rms_norm_linear_program(4, 64, 64))
    assert searched(events)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheWarning)
        _, events = run(ex.rms_norm_linear_program(4, 64, 64))
    assert hits(events) == ["search", "tuning"]


def test_stored_records_build_only_mirage_lab_dataclasses():
    with pytest.raises(CodecError, match="not a mirage_lab record"):
        decode({"__dataclass__": "subprocess:Popen", "fields": {"args": "true"}})
    with pytest.raises(CodecError, match="lacks"):
        decode({"__dataclass__": "mirage_lab.codegen.plan:CodegenOptions", "fields": [["no_such_field", 1]]})
    with pytest.raises(CodecError, match="cannot store"):
        encode({"f": object()})


def test_report_fields_round_trip_with_shared_objects_and_added_fields():
    from mirage_lab.codegen import CodegenOptions
    from mirage_lab.pipeline import TuneReport, Variant, VariantResult
    from mirage_lab.pipeline.cost_model import Estimate
    from mirage_lab.runtime.profile import Timing

    g = ex.rms_norm_linear_fused(4, 64, 64, grid=4, forloop_range=4)
    r = VariantResult(Variant(0, g, CodegenOptions(mma=True), 128, "k", 3.5),
                      Estimate(3.5, 3.0, 0.5, 1, 0.1), compile_s=1.5, rel_err=1e-4,
                      timings={"cuda_graph": Timing("v", "cuda_graph", 4.0, 3.9, float("inf"), 100)})
    rep = TuneReport([r], r, {}, 1.0, "randn", 1.0, 60.0, 0, "NVIDIA H100", timed=True)
    back = decode(json.loads(dumps(encode(rep))))        # sorted keys (as digests see it): "best" before "results"
    assert back.best is back.results[0]                                    # one object, as before
    b = back.best
    assert b.variant.graph.content_hash() == g.content_hash() and b.variant.options == r.variant.options
    assert b.timings["cuda_graph"].p90_us == float("inf") and b.median_us == 4.0 and b.estimate == r.estimate


def test_cache_false_neither_reads_nor_writes():
    run(ex.rms_norm_linear_program(4, 64, 64))
    before = {p: p.stat().st_mtime_ns for p in mc.results_dir().rglob("*.json")}
    events: list = []
    ex.rms_norm_linear_program(4, 64, 64).superoptimize(tune=False, progress=False, cache=False,
                                                        on_event=events.append, **SMALL_SEARCH)
    assert searched(events) and not hits(events)
    assert {p: p.stat().st_mtime_ns for p in mc.results_dir().rglob("*.json")} == before


def test_info_and_clear():
    run(ex.rms_norm_linear_program(4, 64, 64))
    info = mi.cache.info()
    assert info.path == os.environ["MIRAGE_LAB_CACHE"] and info.entries == {"search": 1, "tuning": 1}
    assert info.bytes > 0 and "1 search" in repr(info)
    assert mi.cache.clear() == 2 and mi.cache.info().entries == {"search": 0, "tuning": 0}
    _, events = run(ex.rms_norm_linear_program(4, 64, 64))
    assert searched(events)


def test_the_cache_follows_xdg_cache_home(monkeypatch, tmp_path):
    monkeypatch.delenv("MIRAGE_LAB_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert mc.root() == tmp_path / "xdg" / "mirage_lab"
    assert mi.runtime.default_cache_dir() == tmp_path / "xdg" / "mirage_lab" / "kernels"


# ----------------------------------------------------------------------------- two processes, one entry
def _race(args):
    """In a fresh process: superoptimize (both miss and store), then store and read one entry 20 times."""
    cache_dir, barrier = args
    os.environ["MIRAGE_LAB_CACHE"] = cache_dir
    warnings.simplefilter("error", CacheWarning)   # any torn or foreign read would warn
    from mirage_lab import examples as ex2
    from mirage_lab.pipeline import cache as c2

    g = ex2.rms_norm_linear_program(4, 64, 64)
    barrier.wait()
    best = g.superoptimize(tune=False, progress=False, **SMALL_SEARCH)
    key = {"layer": "search", "race": 1}
    big = {"rows": [[os.getpid(), i] * 2000 for i in range(20)]}
    for _ in range(20):
        assert c2.store(key, big) is not None
        payload, _, _ = c2.load(key)
        assert len(payload["rows"]) == 20
    return best.graph.content_hash()


def test_two_processes_writing_one_entry_at_once(tmp_path):
    ctx = mp.get_context("spawn")
    cache_dir = str(tmp_path / "shared")
    with ctx.Manager() as m:
        barrier = m.Barrier(2)
        with ctx.Pool(2) as pool:
            h1, h2 = pool.map(_race, [(cache_dir, barrier)] * 2)
    assert h1 == h2
    os.environ["MIRAGE_LAB_CACHE"] = cache_dir   # restored by the fixture's monkeypatch
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheWarning)
        payload, _, _ = mc.load({"layer": "search", "race": 1})
        _, events = run(ex.rms_norm_linear_program(4, 64, 64))
    assert len(payload["rows"]) == 20 and hits(events) == ["search", "tuning"]
    assert not list((tmp_path / "shared").rglob("*.tmp"))


# ----------------------------------------------------------------------------- tuning under the simulator
SIM_GPUS = '''
import json, mirage_lab as mi
from mirage_lab import examples as ex
from mirage_lab.pipeline import cache as mc
from mirage_lab.pipeline.autotune import TuneStarted
from mirage_lab.pipeline.cache import CacheHit
runs = []
for gpu in ["GPU A", "GPU B", "GPU A"]:
    mc.device_info = lambda gpu=gpu: {"gpu": gpu, "driver": "1", "cuda": "12"}
    ev = []
    best = ex.rms_norm_linear_program(4, 64, 64).superoptimize(
        tune=True, tune_seconds=600, max_candidates=1, on_event=ev.append, progress=False, **SMALL)
    runs.append({"hits": [e.layer for e in ev if isinstance(e, CacheHit)],
                 "tuned": any(isinstance(e, TuneStarted) for e in ev),
                 "winner": best.report.best.variant.tag, "device": best.report.device})
print("RESULTS " + json.dumps(runs))
'''


def test_another_gpu_reuses_the_search_and_tunes_again(tmp_path):
    from proc_helpers import run_python

    runs = run_python(SIM_GPUS.replace("**SMALL", f"**{SMALL_SEARCH!r}"), tmp_path, timeout=900)
    a, b, a_again = runs
    assert a["hits"] == [] and a["tuned"]
    assert b["hits"] == ["search"] and b["tuned"]                         # GPU B: the search reused, tuning redone
    assert a_again["hits"] == ["search", "tuning"] and not a_again["tuned"]
    assert a_again["winner"] == a["winner"] and a_again["device"] == "CUDA simulator"


def test_a_cached_report_survives_a_new_process_and_prints_where_it_came_from(tmp_path):
    """A new process: the second superoptimize prints one line naming the entry, and has the report back."""
    code = ('import json, mirage_lab as mi\nfrom mirage_lab import examples as ex\n'
            f'best = ex.rms_norm_linear_program(4, 64, 64).superoptimize(tune=True, max_candidates=1, **{SMALL_SEARCH!r})\n'
            'print("RESULTS " + json.dumps({"rows": best.report.rows(), "from": best.from_cache, '
            '"meas": len(best.search_result.measurements)}))\n')
    env = dict(os.environ, MIRAGE_LAB_CACHE=str(tmp_path / "c"), NUMBA_ENABLE_CUDASIM="1",
               PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    outs = [subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=900,
                           cwd=str(tmp_path)) for _ in range(2)]
    res = [json.loads(next(ln for ln in o.stdout.splitlines() if ln.startswith("RESULTS "))[8:]) for o in outs]
    assert res[0]["from"] is None and res[1]["from"] and res[1]["rows"] == res[0]["rows"]
    assert res[1]["meas"] == res[0]["meas"]
    said = [ln for ln in outs[1].stdout.splitlines() if "from the cache" in ln]
    assert len(said) == 1 and res[1]["from"] in said[0] and "CUDA simulator" in said[0]
    assert "tuning" in outs[0].stderr and "search" in outs[0].stderr      # the first run's bars
    assert "tuning:" not in outs[1].stderr and "search:" not in outs[1].stderr


COMPILED = '''
import json
from mirage_lab import examples as ex
from mirage_lab.pipeline import OptimizedGraph
from mirage_lab.pipeline.cache import Lookup
from mirage_lab.runtime.kernel import compile as rt_compile
from mirage_lab.codegen import CodegenOptions
prog = ex.rms_norm_linear_program(4, 64, 64)
fused = ex.rms_norm_linear_fused(4, 64, 64, grid=4, forloop_range=4)
opts = CodegenOptions(max_stream_acc=64)
settings = dict(workers=1)
lk = Lookup(prog, None, dict(settings), search_seconds=None)
assert lk.tuned(None, tune=False, max_candidates=1, tune_seconds=1.0, baselines=False, inputs=None) is None
lk.save_tuned(OptimizedGraph(fused, opts, program=prog, kernel=rt_compile(fused, options=opts)), [0])
back = Lookup(prog, None, dict(settings), search_seconds=None).tuned(
    "RES", tune=False, max_candidates=1, tune_seconds=1.0, baselines=False, inputs=None)
print("RESULTS " + json.dumps({"compiled": back._kernel is not None, "opts": back.kernel.options.tag(),
      "same": back.kernel.graph.content_hash() == fused.content_hash(), "res": back.search_result}))
'''


def test_a_winner_stored_compiled_is_compiled_on_load(tmp_path):
    from proc_helpers import run_python

    r = run_python(COMPILED, tmp_path, timeout=600)
    assert r == {"compiled": True, "opts": "pw0-regNone-acc64", "same": True, "res": "RES"}


def test_a_search_cut_short_is_kept_under_its_seconds_unless_it_found_nothing():
    from mirage_lab.search import NoCandidateError

    g = ex.rms_norm_linear_program(4, 64, 64)
    _, events = run(g, search_seconds=600)                       # finishes well inside: kept under that key
    assert searched(events) and len(entries("search")) == 1
    _, events = run(ex.rms_norm_linear_program(4, 64, 64), search_seconds=600)
    assert hits(events) == ["search", "tuning"]
    from mirage_lab.search import CancelToken

    for _ in range(2):                                          # cut before it found any: nothing kept
        token = CancelToken()
        token.cancel()
        with pytest.raises(NoCandidateError):
            run(ex.rms_norm_linear_program(4, 64, 64), search_seconds=1.0, cancel=token)
    assert len(entries("search")) == 1


def test_the_quiet_rule_stops_a_search_without_a_ceiling_and_its_result_is_kept(monkeypatch):
    # superoptimize() with no search_seconds stops once the best estimate is quiet (here at once), and
    # that result is cached like one cut by a ceiling; stop_when_quiet=False searches to the end
    import mirage_lab.pipeline as pl
    from mirage_lab.pipeline.search_stop import Plateau

    monkeypatch.setattr(pl, "Plateau", lambda: Plateau(min_quiet_s=0.0, quiet_ratio=0.0, min_quiet_states=0,
                                                       quiet_states_ratio=0.0))
    g = ex.rms_norm_linear_program(4, 64, 64)
    quiet, events = run(g)
    assert searched(events) and quiet.search_result.cancelled
    assert "has not improved" in quiet.search_result.stop_reason
    again, events = run(g)
    assert not searched(events)                          # from the cache
    assert again.search_result.stats.candidates == quiet.search_result.stats.candidates
    full, events = run(g, stop_when_quiet=False)
    assert searched(events) and not full.search_result.cancelled     # another key: searched, to the end
    # to the end: every subtree, where the quiet stop left some (it may already hold every candidate)
    assert full.search_result.stats.subtrees_done == full.search_result.stats.subtrees_total
    assert quiet.search_result.stats.subtrees_done < full.search_result.stats.subtrees_done
    assert full.search_result.stats.candidates >= quiet.search_result.stats.candidates


def test_the_quiet_rules_key_part_leaves_earlier_keys_as_they_were():
    g = ex.rms_norm_linear_program(4, 64, 64)
    k = lambda *a: mc.search_key(g, None, dict(SMALL_SEARCH), *a)   # noqa: E731
    assert k(None) == k(None, False) and k(30.0) == k(30.0, True)    # the combinations that existed before
    assert k(None, True) != k(None) and k(30.0, False) != k(30.0)
