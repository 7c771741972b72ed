"""Figures drawn from measurement records (benchmarks/found/*.json), with plain text only."""
from __future__ import annotations

import json
import re

import pytest

from mirage_lab.viz.bench_records import FOUND_DIR, BenchRecordError, e2e_latency_rows, load_e2e_results
from mirage_lab.viz.plots import NOTE_WIDTH, latency_figure, progress_figure

TAG = re.compile(r"</?[a-zA-Z][^>]*>")


def figure_texts(fig) -> list[str]:
    """Every text a reader sees: title, axis titles, annotations, tick labels, bar texts, legend names."""
    lay = fig.layout
    out = [lay.title.text or ""]
    out += [a.text or "" for a in lay.annotations]
    for ax in (lay.xaxis, lay.yaxis):
        out.append(ax.title.text or "")
        out += [str(v) for v in (ax.categoryarray or ())]
    for t in fig.data:
        out.append(t.name or "")
        out += [str(v) for v in (getattr(t, "y", None) or ()) if isinstance(v, str)]
        out += [str(v) for v in (getattr(t, "text", None) or ())]
    return out


def assert_plain(fig):
    tagged = [t for t in figure_texts(fig) if TAG.search(t)]
    assert not tagged, f"HTML tags in a figure's text: {tagged}"


def test_every_kept_h100_run_reads_into_rows_and_plain_figures():
    files = sorted(FOUND_DIR.glob("e2e_h100_run15*.json"))
    assert files, "benchmarks/found has no run-15 results"
    for f in files:
        for name, rec in load_e2e_results(f).items():
            rows = e2e_latency_rows(rec)
            cands = [r for r in rows if r.kind == "candidate"]
            # each candidate's fastest timed lowering, as the tuner's report has it
            raw = json.loads(f.read_text())
            tuned = {t["candidate"] for r in raw if r["program"] == name for t in r["tuning"]
                     if t["median_us"] is not None and not t["error"]}
            assert {r.candidate for r in cands} == tuned
            assert [r.median_us for r in cands] == sorted(r.median_us for r in cands)
            assert all(r.device.startswith("NVIDIA H100") for r in rows)
            assert {r.label for r in rows if r.kind == "baseline"} == {"torch + CUDA graph",
                                                                       "torch.compile + CUDA graph"}
            fig = latency_figure(rows, floor_us=rec["floor_us"])
            assert_plain(fig)
            assert fig.layout.height >= 26 * len(rows)  # a readable row per bar at any count
            assert fig.layout.yaxis.automargin


def test_the_chosen_lowering_is_the_fastest_candidate_row():
    rec = load_e2e_results("e2e_h100_run15b.json")["rmsnorm_linear_16x4096x4096"]
    first = e2e_latency_rows(rec)[0]
    assert rec["chosen"].startswith(f"cand{first.candidate}/{first.options.split('/')[0]}")


def test_no_gpu_figure_is_plain_text_that_fits_the_widget():
    fig = latency_figure([], floor_us=11.3)
    assert_plain(fig)
    lines = [a.text for a in fig.layout.annotations]
    assert any("mi.superoptimize(program).report.latency_rows()" in ln.replace(" ", "") or
               "latency_rows()" in ln for ln in lines)
    assert all(len(ln) <= NOTE_WIDTH for ln in lines)
    assert "11.3 µs" in lines[-1]
    ys = [a.y for a in fig.layout.annotations]
    assert all(0 < y < 1 for y in ys) and ys == sorted(ys, reverse=True)  # inside the plot, top to bottom
    assert_plain(progress_figure([]))


def test_a_missing_or_foreign_file_is_a_clear_error(tmp_path):
    with pytest.raises(BenchRecordError, match="no results file"):
        load_e2e_results("e2e_h100_run999.json")
    bad = tmp_path / "x.json"
    bad.write_text(json.dumps({"a": 1}))
    with pytest.raises(BenchRecordError, match="not an e2e_bench.py results file"):
        load_e2e_results(bad)
