"""superoptimize's progress bars: text in a terminal, a widget in a notebook, silent with progress=False."""
from __future__ import annotations

import io
import os

import pytest

from mirage_lab import examples as ex
from mirage_lab.codegen import CodegenOptions
from mirage_lab.pipeline import ProgressBars, TuneFinished, TuneReport, TuneStarted, Variant, VariantDone, VariantResult
from mirage_lab.pipeline.cost_model import Estimate
from mirage_lab.runtime.profile import Timing
from mirage_lab.search import Finished, Progress, SearchStats
from pipe_helpers import ROOT, SMALL_SEARCH


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MIRAGE_LAB_CACHE", str(tmp_path / "mlc"))


def _result(cand: int, us: float | None) -> VariantResult:
    g = ex.rms_norm_linear_fused(4, 64, 64, grid=4, forloop_range=4)
    r = VariantResult(Variant(cand, g, CodegenOptions(), 128), Estimate(1.0, 1.0, 0.0, 1, 1.0))
    if us is None:
        r.error = "compile/launch: failed"
    else:
        r.rel_err = 1e-4
        r.timings["cuda_graph"] = Timing("v", "cuda_graph", us, us, us, 100)
    return r


def test_bars_count_subtrees_and_variants_and_compare_the_best_with_torch():
    out = io.StringIO()
    bars = ProgressBars(file=out, mininterval=0)
    bars(Progress(SearchStats(states=500, candidates=1, subtrees_done=3, subtrees_total=10)))
    bars(Finished(SearchStats(states=1200, candidates=2, subtrees_done=10, subtrees_total=10), []))
    results = [_result(0, 30.0), _result(1, None), _result(2, 12.0)]
    bars(TuneStarted(variants=5, candidates=3, budget_s=60, workers=2, input_policy="randn"))
    for i, r in enumerate(results):
        bars(VariantDone(r, i + 1, 5, 1.0))
    text = out.getvalue()
    assert "search: 100%" in text and "10/10" in text and "1,200 states, 2 candidates" in text
    assert "3/5" in text and "best 12.00 µs (cand2/t128/" in text
    base = {"torch_eager": Timing("torch", "eager", 36.0, 35, 37, 100),
            "torch_cuda_graph": Timing("torch", "cuda_graph", 24.0, 23, 25, 100)}
    rep = TuneReport(results, results[2], base, 5.0, "randn", 10.0, 60.0, 2, "NVIDIA H100", timed=True)
    bars(TuneFinished(rep))
    assert "best 12.00 µs vs torch 24.00 µs (2.00x)" in out.getvalue()
    assert bars.search is None and bars.tune is None                      # closed


def test_superoptimize_draws_bars_in_a_terminal_and_is_silent_with_progress_false(capsys):
    g = ex.rms_norm_linear_program(4, 64, 64)
    g.superoptimize(tune=False, progress=False, cache=False, **SMALL_SEARCH)
    quiet = capsys.readouterr()
    assert quiet.err == "" and quiet.out == ""
    g.superoptimize(tune=False, **SMALL_SEARCH)
    loud = capsys.readouterr()
    assert "search: 100%" in loud.err and "candidates" in loud.err
    g.superoptimize(tune=False, **SMALL_SEARCH)
    hit = capsys.readouterr()
    assert hit.err == "" and len(hit.out.splitlines()) == 1 and "from the cache" in hit.out


def test_superoptimize_draws_a_widget_in_a_notebook(tmp_path):
    """Run as nbmake runs notebooks (nbclient, a real kernel): tqdm.auto's bar is an ipywidget there."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    code = ("import mirage_lab as mi\nfrom mirage_lab import examples as ex\n"
            f"best = ex.rms_norm_linear_program(4, 64, 64).superoptimize(tune=False, **{SMALL_SEARCH!r})\n"
            "best.options.tag()")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)])
    env = {"PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "MIRAGE_LAB_CACHE": str(tmp_path / "nb_cache")}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)   # the kernel inherits this process's environment
    try:
        nbclient.NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    finally:
        for k, v in old.items():
            os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)
    outputs = nb.cells[0].outputs
    widgets = [o for o in outputs if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
    assert widgets, outputs
    assert not any(o.get("name") == "stderr" and "search:" in o.get("text", "") for o in outputs)


def test_the_tuning_bar_says_when_it_waits_for_the_programs_own_lowering():
    # every variant that could win is measured; torch.compile of the program still builds (the tuner waits)
    from mirage_lab.pipeline import ProgramDone, ProgramWaiting
    from mirage_lab.pipeline.contenders import ProgramResult

    out = io.StringIO()
    bars = ProgressBars(file=out, mininterval=0)
    bars(TuneStarted(variants=2, candidates=1, budget_s=60, workers=2, input_policy="randn"))
    bars(VariantDone(_result(0, 20.0), 1, 2, 1.0))
    bars(ProgramWaiting("torch.compile", 5.0))
    assert "best 20.00 µs (cand0/t128/pw0-regNone-acc128); waiting for torch.compile of the program to build" \
        in out.getvalue()
    p = ProgramResult("torch.compile", rel_err=1e-4)
    p.timings["cuda_graph"] = Timing("torch.compile", "cuda_graph", 18.0, 18, 18, 100)
    bars(ProgramDone(p, 9.0))
    assert "best 20.00 µs (cand0/t128/pw0-regNone-acc128); torch.compile 18.00 µs" in out.getvalue()
