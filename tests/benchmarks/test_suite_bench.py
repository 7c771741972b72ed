"""The benchmark suite (benchmarks/suite, issue 19): listed without a GPU, every program built with the public
API, a representative few through search and call on CPU, one through codegen under the CUDA simulator, one
end to end on a GPU."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

import mirage_lab as mi
from mirage_lab.pipeline import measuring_inputs
from mirage_lab.search import CancelToken, CandidateFound

from proc_helpers import run_python

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks"
sys.path.insert(0, str(BENCH))
import suite  # noqa: E402  (benchmarks/suite)

KINDS = {"norm_linear", "l2_norm_linear", "residual_norm_linear", "gated_mlp", "attention", "qknorm_decode_attention",
         "qknorm_attention", "lora", "softmax_linear", "ntrans"}

# Narrowed search settings (a user's Mirage-style overrides) that reach a first candidate of the small variant
# in seconds on a 2-core CPU; the search stops at that candidate.
NARROW = {
    "norm": dict(imaps=[(-1, -1, -1), (1, -1, -1)], griddims=[(4, 1, 1)], franges=[4]),
    "softmax": dict(imaps=[(-1, -1, -1), (0, -1, -1)], griddims=[(4, 1, 1)], franges=[4]),
    "attention": {},
}
# one program per kind that a CPU search reaches quickly; bf16 and fp16 both
CPU_CASES = [("gqa_decode_llama32_1b_b16_kv2048", "attention"), ("l2norm_linear_ngpt_0_5b_qkv_b32", "norm"),
             ("softmax_linear_mixtral_router_b64", "softmax")]


def _list_lines() -> list[str]:
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, str(BENCH / "suite_bench.py"), "--list"], env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout.splitlines()


def test_list_runs_without_a_gpu_and_names_every_program_with_its_model():
    lines = _list_lines()
    body = [ln for ln in lines if ln.split() and ln.split()[0] in {p.name for p in suite.PROGRAMS}]
    assert len(body) == len(suite.PROGRAMS) >= 24 and lines[-1] == f"{len(suite.PROGRAMS)} programs"
    for p, ln in zip(suite.PROGRAMS, body):
        assert ln.split()[:3] == [p.name, p.dtype, p.phase] and p.source in ln and p.shapes_text() in ln


def test_the_suite_covers_the_issues_kinds_dtypes_and_shapes():
    ps = suite.PROGRAMS
    assert {p.kind for p in ps} == KINDS and {p.dtype for p in ps} == {"float16", "bfloat16"}
    assert {p.phase for p in ps} == {"decode", "prefill"}
    attn = [p.shape for p in ps if p.kind == "attention"]
    assert {a["head_dim"] for a in attn} == {64, 128}
    assert min(a["kv_len"] for a in attn) <= 512 and max(a["kv_len"] for a in attn) >= 8192
    ranks = [p.shape["rank"] for p in ps if p.kind == "lora"]
    assert min(ranks) <= 8 and max(ranks) >= 64
    assert {p.shape["act"] for p in ps if p.kind == "gated_mlp"} == {"silu", "gelu", "relu"}
    assert {p.shape["weight"] for p in ps if p.kind == "norm_linear"} == {True, False}
    # every program says where it comes from, and the settings are the README's
    for p in ps:
        assert len(p.source) > 20 and (p.config, p.search_seconds) in {(None, None), ("attention", 30.0), ("lora", 30.0)}


@pytest.mark.parametrize("p", suite.PROGRAMS, ids=lambda p: p.name)
def test_every_program_builds_at_full_and_small_size_with_the_public_api(p):
    full, small = p.build(), p.build(small=True)
    assert [t.dtype.name for t in full.inputs] == [p.dtype] * len(full.inputs)
    assert [op.op_type for op in full.ops] == [op.op_type for op in small.ops]   # the structure is kept
    assert [t.dims.count(1) for t in full.inputs] == [t.dims.count(1) for t in small.inputs]
    assert sum(t.numel() for t in small.inputs) < 20_000 and not full.customized_ops
    assert len(full.outputs) == len(small.outputs) == 1


def test_selection_by_name_and_glob_and_a_clear_error():
    assert [p.name for p in suite.select("gqa_decode_*")] == [p.name for p in suite.PROGRAMS
                                                              if p.name.startswith("gqa_decode_")]
    assert len(suite.select("lora_gpt3_q_r8_b4,ntrans_*")) == 3
    with pytest.raises(mi.MirageLabError, match="--list"):
        suite.select("no_such_program")


def _first_candidate(program, config, **narrow):
    token = CancelToken()

    def stop(ev):
        if isinstance(ev, CandidateFound):
            token.cancel()

    return program.superoptimize(config, tune=False, workers=1, cancel=token, on_event=stop, search_seconds=120,
                                 **narrow)


@pytest.mark.parametrize("name, narrow", CPU_CASES)
def test_small_variant_superoptimizes_and_calls_correctly_on_cpu(name, narrow):
    p = suite.by_name(name)
    g = p.build(small=True)
    t0 = time.monotonic()
    best = _first_candidate(g, p.config, **NARROW[narrow])
    assert best.customized_ops and time.monotonic() - t0 < 90
    m = measuring_inputs(g, device="cpu", seed=1)
    (out,) = best(inputs=m.inputs)   # no GPU: the reference interpreter runs the μGraph
    err = float((out.double() - m.reference[0]).norm() / m.reference[0].norm())
    assert err < (2e-2 if p.dtype == "bfloat16" else 2e-3), err


SIM = textwrap.dedent('''
    import json, sys, torch
    sys.path.insert(0, BENCH)
    import suite
    from mirage_lab.pipeline import measuring_inputs
    from mirage_lab.search import CancelToken, CandidateFound
    p = suite.by_name("rmsnormw_linear_qwen25_7b_qkv_b1")
    g = p.build(small=True)
    tok = CancelToken()
    best = g.superoptimize(p.config, tune=False, workers=1, cancel=tok, search_seconds=120,
                           on_event=lambda e: tok.cancel() if isinstance(e, CandidateFound) else None,
                           imaps=[(-1, -1, -1), (1, -1, -1)], griddims=[(4, 1, 1)], franges=[4])
    m = measuring_inputs(g, device="cpu", seed=1)
    (out,) = best(inputs=m.inputs)            # the generated kernels, under the CUDA simulator
    err = float((out.double() - m.reference[0]).norm() / m.reference[0].norm())
    print("RESULTS " + json.dumps({"err": err, "dtype": str(out.dtype), "sim": best.kernel.simulator,
                                   "kernels": len(best.customized_ops)}))
''')


def test_a_bf16_program_goes_through_search_codegen_and_call_under_the_simulator(tmp_path):
    res = run_python(f"BENCH = {str(BENCH)!r}\n" + SIM, tmp_path)
    assert res["sim"] and res["kernels"] >= 1 and res["dtype"] == "torch.bfloat16"
    assert res["err"] < 2e-2, res


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_one_suite_program_end_to_end_on_the_gpu(tmp_path):
    rec_file = tmp_path / "suite.jsonl"
    name = "rmsnormw_linear_qwen25_7b_qkv_b1"
    r = subprocess.run([sys.executable, str(BENCH / "suite_bench.py"), "--only", name, "--resume", str(rec_file),
                        "--tune-seconds", "30", "--search-cap", "90", "--out", str(tmp_path / "suite.md")],
                       env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    (rec,) = [json.loads(ln) for ln in rec_file.read_text().splitlines()]
    assert "error" not in rec, rec
    assert rec["program"] == name and rec["rel_err"] < 2e-2
    for key in ("returned_us", "eager_us", "compile_us", "copy_floor_us"):
        assert rec[key] and rec[key] > 0, key
    assert rec["vs_compile"] == pytest.approx(rec["returned_us"] / rec["compile_us"])
    assert "geometric mean" in (tmp_path / "suite.md").read_text()
    # resumed: the program is skipped, the table still shows it
    again = subprocess.run([sys.executable, str(BENCH / "suite_bench.py"), "--only", name, "--resume", str(rec_file)],
                           env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True, text=True, timeout=300)
    assert "0 to run" in again.stdout and name in again.stdout


def test_resume_file_keeps_the_last_record_and_marks_a_killed_run_as_failed(tmp_path):
    import suite_bench

    f = tmp_path / "r.jsonl"
    suite_bench.append_record(f, {"program": "a", "mode": "gpu", "started": True})
    suite_bench.append_record(f, {"program": "a", "mode": "gpu", "returned_us": 3.0})
    suite_bench.append_record(f, {"program": "b", "mode": "gpu", "started": True})     # killed mid-run
    suite_bench.append_record(f, {"program": "a", "mode": "search-only", "candidates": 2})
    recs = {(r["program"], r["mode"]): r for r in suite_bench.load_records(f)}
    assert recs[("a", "gpu")] == {"program": "a", "mode": "gpu", "returned_us": 3.0}
    assert "never finished" in recs[("b", "gpu")]["error"] and recs[("a", "search-only")]["candidates"] == 2


def test_a_suite_run_in_parts_gets_one_table_of_every_program_in_its_resume_file(tmp_path):
    # the issue's advice: run the suite in parts (--only, --resume); the last part's --out held only that part
    import suite_bench

    f = tmp_path / "r.jsonl"
    names = [p.name for p in suite_bench.suite.PROGRAMS]
    for n in (names[5], names[0]):
        suite_bench.append_record(f, {"program": n, "mode": "gpu", "returned_us": 1.0})
    done = suite_bench.load_records(f)
    assert [r["program"] for r in suite_bench.table_rows(done, {names[5]}, whole_file=True)] == [names[0], names[5]]
    assert [r["program"] for r in suite_bench.table_rows(done, {names[5]}, whole_file=False)] == [names[5]]


def _gpu_record(name, returned, *, is_program=False, is_library=False, winner="μGraph", pairs=(), rho=None):
    return {"program": name, "dtype": "float16", "rel_err": 3e-4, "superoptimize_s": 40.0, "returned_us": returned,
            "eager_us": 20.0, "compile_us": 10.0, "max_autotune_us": None, "library_us": 8.0, "library": "sdpa",
            "copy_floor_us": 2.0, "vs_best_torch": returned / 10.0, "vs_compile": returned / 10.0,
            "vs_floor": returned / 2.0, "target_us": 8.0, "meets_target": returned <= 8.0, "is_program": is_program,
            "is_library": is_library, "winner": winner, "rank_pairs": [list(p) for p in pairs], "rho": rho}


def test_the_table_says_which_contender_was_returned_and_the_cost_models_rho():
    import suite_bench
    from mirage_lab.pipeline.ranking import pooled_spearman

    a = [(1.0, 5.0), (2.0, 6.0), (3.0, 9.0)]
    b = [(1.0, 7.0), (2.0, 6.0)]
    rows = [_gpu_record("attn", 8.0, is_library=True, winner="sdpa", pairs=b, rho=-1.0),
            _gpu_record("mlp", 9.0, pairs=a, rho=1.0),
            _gpu_record("norm", 10.0, is_program=True, winner="torch.compile"),
            {"program": "lost", "dtype": "bfloat16", "error": "started but never finished"}]
    md = suite_bench.gpu_table(rows).splitlines()
    row = {ln.split(" | ")[0].lstrip("| "): ln for ln in md if ln.startswith("| ")}
    assert "| library (sdpa) | -1.00 (2) |" in row["attn"] and "| μGraph | 1.00 (3) |" in row["mlp"]
    assert "| program (torch.compile) | — |" in row["norm"] and "failed" in row["lost"]
    assert all(ln.count("|") == md[0].count("|") for ln in row.values())   # every row has every column
    summary = "\n".join(md)
    assert "a μGraph won on **1**, a library kernel on 1, the program itself on 1" in summary
    pooled = pooled_spearman([b, a])
    assert f"pooled **{pooled['pooled']:.2f}** over 5 variants of 2 programs" in summary
    assert f"mean within a program {pooled['mean']:.2f}" in summary


def test_the_library_contender_races_on_exactly_the_suites_attention_programs():
    from mirage_lab.pipeline.library import library_lowerings, match_attention

    attention = {"attention", "qknorm_decode_attention", "qknorm_attention"}
    for p in suite.PROGRAMS:
        g = p.build()
        assert library_lowerings(g) == (["sdpa"] if p.kind in attention else []), p.name
        if p.kind == "qknorm_attention":   # the learned gain scales the scores: part of the match
            assert [len(m.inputs) for m in match_attention(g)] == [4]


def test_rank_quality_reads_e2e_and_suite_records(tmp_path):
    import rank_quality

    e2e = tmp_path / "e2e.json"
    e2e.write_text(json.dumps([{"program": "p", "tuning": [
        {"estimate_us": 1.0, "median_us": 10.0, "error": None}, {"estimate_us": 2.0, "median_us": 30.0, "error": None},
        {"estimate_us": 3.0, "median_us": 20.0, "error": None},
        {"estimate_us": 0.5, "median_us": None, "error": "relative error 0.3 exceeds 0.002"}]}]))
    jsonl = tmp_path / "suite.jsonl"
    jsonl.write_text(json.dumps({"program": "q", "started": True}) + "\n"
                     + json.dumps({"program": "q", "rank_pairs": [[1.0, 5.0], [2.0, 6.0]]}) + "\n")
    assert rank_quality.read_pairs(e2e) == [("p", [(1.0, 10.0), (2.0, 30.0), (3.0, 20.0)])]
    assert rank_quality.read_pairs(jsonl) == [("q", [(1.0, 5.0), (2.0, 6.0)])]
    text = rank_quality.report([e2e, jsonl])
    assert "| e2e.json | p | 3 | 0.50 |" in text and "| suite.jsonl | q | 2 | 1.00 |" in text
    # pooled: ranks (1.5, 3.5, 5, 1.5, 3.5) vs (3, 5, 4, 1, 2): 5.5 / sqrt(9 * 10)
    assert "pooled rho 0.58 over 5 variants; mean within a program 0.70 (2 programs with a ranking)" in text


def test_a_dump_names_the_tuned_candidates_by_the_rows_numbers(tmp_path):
    # the tuner numbers candidates by their place in the shortlist, not in the search's list: the dump keeps
    # the tuned graphs under the rows' numbers, so a row can be profiled off the GPU without guessing
    from types import SimpleNamespace as NS

    import suite_bench
    from mirage_lab.examples import rms_norm_linear_fused

    search_order = [rms_norm_linear_fused(4, 256, 256, grid=g, forloop_range=4) for g in (2, 4, 8)]
    tuned = [NS(variant=NS(candidate=0, graph=search_order[2]), row=lambda: {"candidate": 0}),
             NS(variant=NS(candidate=1, graph=search_order[0]), row=lambda: {"candidate": 1})]
    rep = NS(stop_reason="done", results=tuned, programs=[], rows=lambda: [r.row() for r in tuned])
    best = NS(report=rep, search_result=NS(candidates=search_order))
    suite_bench.dump_tuning(tmp_path, "p", best, lambda *_: None)
    d = json.loads((tmp_path / "p.json").read_text())
    assert len(d["candidates"]) == 3 and sorted(d["tuned"]) == ["0", "1"]
    assert d["tuned"]["0"] == json.loads(search_order[2].to_json())
    assert d["tuned"]["1"] == json.loads(search_order[0].to_json())


def test_a_dump_with_its_tuned_graphs_joins_exactly_into_cost_model_records(tmp_path):
    # probes/costmodel_records.py: a dump that names its tuned graphs is joined by those numbers, whatever the
    # cost model of the run; a row whose candidate is not among them is left out
    sys.path.insert(0, str(BENCH / "probes"))
    import costmodel_records as cr
    from mirage_lab.examples import rms_norm_linear_fused

    graphs = [json.loads(rms_norm_linear_fused(4, 256, 256, grid=g, forloop_range=4).to_json()) for g in (2, 8)]
    row = {"threads": 128, "options": "pw0-regNone-acc128", "median_us": 5.0, "estimate_us": 1.0, "error": None}
    rows = [{**row, "candidate": 1}, {**row, "candidate": 0, "median_us": 7.0}, {**row, "candidate": 5}]
    got = cr.from_tuned(rows, {"0": graphs[1], "1": graphs[0]})
    assert got["candidates"] == [graphs[1], graphs[0]]
    assert [(v["candidate"], v["median_us"]) for v in got["variants"]] == [(1, 5.0), (0, 7.0)]


def test_contenders_are_timed_in_turn_so_a_drift_reaches_each_alike(monkeypatch):
    """The suite captures every contender, then times them in rounds, in turn: under clocks that drift 1 % a round
    of replays, two contenders of the same speed come out within 1.5 % of each other, where timing one after the
    other (one round) puts 5 % between them; their ratio taken round by round is within 0.5 %. A contender that cannot
    be captured gets None, and the log says why."""
    import suite_bench
    from mirage_lab.runtime import profile as prof

    true_us = {"returned": 10.0, "torch.compile default": 10.0, "torch eager": 20.0}
    ran: list[str] = []
    clock = [0]

    class Graph:
        def __init__(self, us):
            self.us = us

        def replay(self):
            pass

    def capture(many):
        many()
        if ran[-1] == "broken":
            raise RuntimeError("operation not permitted when stream is capturing")
        return Graph(true_us[ran[-1]])

    def time_calls(calls, name="", repeats=200, batch=50, warmup=10, mode="cuda_graph"):
        drift = 1 + 0.01 * clock[0] / 10
        clock[0] += repeats
        us = calls[0].__self__.us * suite_bench.CALLS_PER_GRAPH * drift
        return prof.Timing(name, mode, us, us, us, repeats)

    monkeypatch.setattr(prof, "_capture", capture)
    monkeypatch.setattr(prof, "time_calls", time_calls)
    sets = [[1], [2]]

    def measure(rounds):
        lines: list[str] = []
        c = suite_bench.Contenders(lines.append)
        for name in ("returned", "broken", "torch.compile default", "torch eager"):
            c.add(name, lambda x, name=name: ran.append(name), sets)
        return c.time(rounds=rounds), lines, c

    turns, lines, c = measure(suite_bench.ROUNDS)
    assert turns["broken"] is None and any(ln.startswith("  broken: failed: RuntimeError") for ln in lines)
    assert list(turns) == ["returned", "broken", "torch.compile default", "torch eager"]
    assert abs(turns["torch.compile default"] / turns["returned"] - 1) < 0.015
    assert 1.9 < turns["torch eager"] / turns["returned"] < 2.1
    # round by round, the ratio of two equal contenders is 1 up to the drift inside one round
    assert abs(c.ratio("torch.compile default", "returned") - 1) < 0.005
    assert 1.95 < c.ratio("torch eager", "returned") < 2.05 and c.ratio("broken", "returned") is None
    row = suite_bench.ratios({"returned_us": 10.0, "compile_us": 9.0, "eager_us": 20.0, "copy_floor_us": 5.0},
                             {"compile_us": 0.99, "eager_us": 0.5})
    assert row["vs_compile"] == 0.99 and row["vs_best_torch"] == 0.99 and row["ratio_of"] == "paired"
    assert suite_bench.ratios({"returned_us": 10.0, "compile_us": 9.0})["vs_compile"] == 10.0 / 9.0
    clock[0] = 0
    one_after_another, _, _ = measure(1)
    assert one_after_another["torch.compile default"] / one_after_another["returned"] > 1.04
