"""The ``mirage-lab`` command and the HTML report it writes."""
from __future__ import annotations

import html
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import mirage_lab as mi
from mirage_lab import cli
from mirage_lab.report import CandidateSection, CheckResult, MeasurementsSection, ProgramSection, render_report


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """Run ``mirage-lab demo --out <tmp>`` once; keep its exit code, stdout and report."""
    out = tmp_path_factory.mktemp("reports")
    import io
    from contextlib import redirect_stdout

    buf = io.StringIO()
    with redirect_stdout(buf):
        rc = cli.main(["demo", "--out", str(out), "--search-seconds", "0"])
    return rc, buf.getvalue(), (out / "demo.html")


def test_demo_exits_zero_and_prints_progress(demo):
    rc, stdout, report = demo
    assert rc == 0
    lines = stdout.splitlines()
    assert all(re.match(r"\[\s*\d+\.\ds\] ", ln) for ln in lines), lines
    assert "program: rms_norm(X[16,4096]) @ W[4096,4096] (float16)" in stdout
    assert "candidate: hand-written fused μGraph, 1 customized op, grid (256, 1, 1), forloop_range 32" in stdout
    m = re.search(r"check: float32 inputs: candidate vs program: rel\. error ([0-9.e+-]+) \(tol 1e-04\) ok", stdout)
    assert m and float(m.group(1)) < 1e-4
    assert f"wrote {report}" in stdout and "all checks pass" in stdout


def test_demo_report_is_self_contained_html(demo):
    _, _, report = demo
    text = report.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>") and text.rstrip().endswith("</html>")
    assert "<script" not in text                      # nothing runs, nothing is fetched
    assert not re.search(r'(src|href)="(https?:)?//', text)
    # the program as written, the printed μGraph, the check table
    assert "O = graph.matmul(graph.rms_norm(X, normalized_shape=(hidden,)), W)" in html.unescape(text)
    assert "customized(t0, t1) with" in text
    assert text.count('<span class="ok">pass</span>') == 4   # 2 checks, in the summary and the candidate
    assert "FAIL" not in text
    # inline drawings: the program's kernel level + the candidate's kernel, block and thread levels
    assert text.count("<svg") == 4
    words = html.unescape(text)
    for label in ("imap {}", "fmap 1", "omap {x→1}", "forloop_range 32", "accum: rms", "thread chain",
                  "matmul → accum: none (acc += x)"):
        assert label in words, label
    ids = re.findall(r'\bid="([^"]+)"', text)
    assert len(ids) == len(set(ids))                  # several SVGs in one page, no id clashes
    assert "No timings in this report" in text        # no measurements section given


def test_demo_full_adds_the_literal_run(tmp_path):
    # --full's code path at small shapes (the real sizes take a minute on a 2-core box)
    shapes = [cli.DemoShape(4, 512, "small", hidden=256), cli.DemoShape(2, 768, "small 2", hidden=256)]
    lines: list[str] = []
    path, ok = cli.run_demo(tmp_path, full=True, shapes=shapes, log=lines.append)
    assert ok and path == tmp_path / "demo.html"
    out = "\n".join(lines)
    assert out.count("literal per-block run vs batched run") == 2
    assert "rms_norm(X[2,256]) @ W[256,768]" in out
    assert path.read_text().count("<svg") == 7          # program kernel + 2 candidates x 3 levels
    # without shapes, --full adds MIRAGE_SPEC §7's rmsnorm bs=1 shape to the README's
    assert [(s.batch_size, s.hidden, s.output_dim) for s in cli.FULL_SHAPES] == [(16, 4096, 4096), (2, 4096, 6144)]


def test_failing_check_fails_the_command(tmp_path, capsys, monkeypatch):
    def wrong(program, shape, log):
        # forgets RMSNorm's division: a plausible-looking but wrong μGraph
        g = mi.new_kernel_graph()
        X = g.new_input((shape.batch_size, 4096)); W = g.new_input((4096, shape.output_dim))
        bg = mi.new_threadblock_graph((64, 1, 1), forloop_range=16)
        x = bg.new_input(X, (-1, -1, -1), 1); w = bg.new_input(W, (1, -1, -1), 0)
        bg.new_output(bg.forloop_accum(bg.matmul(x, w)), (1, -1, -1))
        (O,) = g.customized([X, W], bg)
        g.mark_output(O)
        yield CandidateSection("wrong", g)

    monkeypatch.setattr(cli, "candidates_for", wrong)
    assert cli.main(["demo", "--out", str(tmp_path), "--search-seconds", "0"]) == 1
    out = capsys.readouterr().out
    assert "FAILED" in out and "SOME CHECKS FAILED" in out
    text = (tmp_path / "demo.html").read_text()
    assert '<span class="fail">FAIL</span>' in text and "checks fail" in text


def test_no_command_prints_help_and_version(capsys):
    assert cli.main([]) == 2
    assert "demo" in capsys.readouterr().out
    with pytest.raises(SystemExit) as e:
        cli.main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out.strip() == f"mirage-lab {mi.__version__}"
    with pytest.raises(SystemExit) as e:
        cli.main(["demo", "--bogus"])
    assert e.value.code == 2


def test_report_measurements_and_missing_dot(monkeypatch, tmp_path):
    from mirage_lab.examples import rms_norm_linear_fused, rms_norm_linear_program

    prog = ProgramSection("p", rms_norm_linear_program(), "X = ...")
    cand = CandidateSection("c", rms_norm_linear_fused(), checks=[CheckResult("nan never passes", float("nan"), 1.0)],
                            info={"states": 204589}, metrics={"op2": "11.9 µs"})
    meas = MeasurementsSection("NVIDIA H100", ["contender", "median µs", "× floor"],
                               [["torch eager", 25.0, 2.21], ["candidate 1", 12.5, 1.11]], notes="CUDA events")
    monkeypatch.setenv("PATH", str(tmp_path))          # no `dot`: the report still renders, with a note
    text = render_report("t <&>", prog, [cand], meas)
    assert "<title>t &lt;&amp;&gt;</title>" in text
    assert "NaN" in text and '<span class="fail">FAIL</span>' in text
    assert "NVIDIA H100" in text and "<td>torch eager</td>" in text and "12.5" in text
    assert "<svg" not in text and "apt-get install graphviz" in text
    assert "204589" in text


def test_measurements_section_from_latency_rows():
    from mirage_lab.runtime import LatencyRow

    rows = [LatencyRow("torch eager", "baseline", 41.0, 40.0, 43.0, mode="eager"),
            LatencyRow("candidate 2", "candidate", 12.94, 12.5, 13.6, options="t256/fma", candidate=2)]
    m = MeasurementsSection.from_latency_rows(rows, device="NVIDIA H100", floor_us=11.3,
                                              failures=[("candidate 0 [t128/fma]", "compile/launch: boom")])
    assert m.device == "NVIDIA H100" and m.columns[:3] == ["contender", "kind", "median µs"]
    assert [r[:3] for r in m.rows] == [["candidate 2", "candidate", 12.94], ["torch eager", "baseline", 41.0],
                                       ["candidate 0 [t128/fma]", "failed", "compile/launch: boom"],
                                       ["memory floor", "floor", 11.3]]
    assert m.rows[0][3:] == ["12.5–13.6", "cuda graph", "t256/fma"]
    with pytest.raises(TypeError, match="LatencyRow"):
        MeasurementsSection.from_latency_rows({"torch_eager": 41.0}, device="x")


def test_console_script_is_installed():
    exe = Path(sys.executable).parent / "mirage-lab"
    if not exe.exists():
        if os.environ.get("CI"):
            pytest.fail("the mirage-lab console script is not installed (pip install -e . should create it)")
        pytest.skip("mirage_lab is not pip-installed in this interpreter")
    r = subprocess.run([str(exe), "--version"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == f"mirage-lab {mi.__version__}"


def test_demo_runs_the_search_and_reports_its_candidates(tmp_path):
    lines: list[str] = []
    path, ok = cli.run_demo(tmp_path, log=lines.append, search_seconds=30, workers=1)
    assert ok
    text = path.read_text()
    assert "search candidate #1 by static cost" in text
    assert any("search: finished" in ln or "search: stopped" in ln for ln in lines)
    assert any("no CUDA GPU" in ln for ln in lines) or any("gpu: fastest" in ln for ln in lines)
