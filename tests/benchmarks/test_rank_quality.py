"""benchmarks/rank_quality.py over the stored H100 tuning records: the cost model as shipped ranks each
program's variants as the GPU did (the figures of RESULTS.md "Cost model ranking, round 2")."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from mirage_lab.codegen import CodegenOptions
from mirage_lab.errors import MirageLabError
from mirage_lab.pipeline import cost_model as cm

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))
import rank_quality as rq  # noqa: E402

# RESULTS.md "Cost model ranking, round 2": the model as shipped (per program at least, and the
# pairs-weighted mean within a program), and held out (constants fitted on the other programs)
MEAN_WITHIN = 0.83
EACH_AT_LEAST = 0.76
# Held out: 0.76 when the records were joined; 0.752 since 2026-11-29 (c). The profiles and H100 estimates of
# every record are the same as on the tree before (4002375), and so is each held-out fit run alone in a fresh
# process (RMSNorm 2x4096x6144: 0.582 on both). Only the old tree run all six in one process gave 0.603 for it,
# so state carried from one fit to the next, which this tree no longer carries. Not found what it was.
HELD_OUT = 0.75


@pytest.fixture(scope="module")
def programs():
    return rq.load_records(rq.RECORDS)


def test_the_shipped_constants_rank_every_stored_program(programs):
    assert len(programs) >= 6 and sum(len(p.measured) for p in programs) >= 250
    rhos = {p.name: p.rho() for p in programs}
    assert min(rhos.values()) >= EACH_AT_LEAST, rhos
    assert rq.within_rho(programs) >= MEAN_WITHIN - 0.005, rhos
    # and better than the estimates the runs had (the old model's ranking), on every program
    for p in programs:
        old = rq.spearman(p.old_estimates, p.measured)
        assert rhos[p.name] > old + 0.2, (p.name, rhos[p.name], old)


def test_constants_fitted_without_a_program_still_rank_it(programs):
    held = [(p.rho(rq.fit([q for q in programs if q is not p])), len(p.measured)) for p in programs]
    assert sum(r * n for r, n in held) / sum(n for _, n in held) >= HELD_OUT - 0.005, held
    # the fit moves each constant at most 8x from its physical guess
    hw = rq.fit(programs)
    for name in cm.FITTED:
        assert getattr(cm.PRIOR, name) / 8 <= getattr(hw, name) <= getattr(cm.PRIOR, name) * 8


def test_a_model_without_the_mechanism_ranks_worse(programs):
    # the per-iteration round trip is what orders long loops after short ones: without it, rho drops
    flat = cm.with_constants(dram_latency_us=0.0, sync_us=0.0)
    assert rq.within_rho(programs, flat) < rq.within_rho(programs) - 0.02


def test_the_report_prints_a_row_per_program(programs):
    text = rq.records_report(rq.RECORDS)
    for p in programs:
        assert f"| {p.name} | {len(p.measured)} |" in text
    assert "model as shipped: pooled rho" in text


def test_options_tags_round_trip():
    for o in (CodegenOptions(), CodegenOptions(max_stream_acc=64), CodegenOptions(phase_words=64),
              CodegenOptions(mma=True, pipeline_words=64, pipeline_depth=2, mma_b16=True)):
        assert rq.options_from_tag(o.tag()) == o
    with pytest.raises(MirageLabError, match="tag"):
        rq.options_from_tag("fast-please")


def test_a_device_runs_tuner_dumps_read_as_programs(tmp_path):
    """``--dumps``: suite_bench's dumps.tgz of a device run, and the same dumps as files, give the same programs,
    named by run and program, each with every timed, correct variant (at least ``min_variants``)."""
    import json
    import tarfile

    tgz = BENCH / "found" / "h100_2026-12-07c" / "call1_dumps.tgz"
    with tarfile.open(tgz) as tar:
        tar.extractall(tmp_path, filter="data")
    files = sorted((tmp_path / "dumps").glob("*.json"))
    from_tgz, from_files = rq.load_dumps([tgz]), rq.load_dumps(files)
    assert [p.name.split(":")[-1] for p in from_tgz] == [p.name.split(":")[-1] for p in from_files] == \
        [f.stem for f in files]
    assert all(p.name.startswith("h100_2026-12-07c/call1_dumps:") for p in from_tgz)
    for p, f in zip(from_tgz, files):
        rows = [v for v in json.loads(f.read_text())["variants"] if v.get("error") is None and v.get("median_us")]
        assert p.measured == [float(v["median_us"]) for v in rows] and len(p.profiles) == len(rows) >= 5
    few = min(len(p.measured) for p in from_tgz)
    assert len(rq.load_dumps([tgz], min_variants=few + 1)) == len(from_tgz) - 1
    assert rq._program_of("h100_2026-12-07b/call2_dumps:gated_mlp_silu_llama3_8b_b1") == "gated_mlp_silu_llama3_8b_b1"
