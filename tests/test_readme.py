"""The README's tour runs as written (its Python blocks, in order, in one namespace)."""
from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

import mirage_lab as mi

README = Path(__file__).resolve().parents[1] / "README.md"


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)


def test_readme_has_the_two_commands():
    text = README.read_text(encoding="utf-8")
    assert "./dev.sh demo" in text and "./dev.sh test" in text


@pytest.mark.skipif(shutil.which("dot") is None, reason="the tour renders a drawing with Graphviz's dot")
def test_readme_tour_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)             # the tour writes fused.svg and fused.json
    blocks = python_blocks()
    assert len(blocks) >= 5
    ns: dict = {}
    for code in blocks:
        if "best = graph.superoptimize()" in code:  # the GPU block: its run is benchmarks/e2e_bench.py's
            compile(code, "README.md", "exec")       # (full shapes, CUDA tensors); here it must at least parse
            continue
        if "GraphBuildError" in code:       # the block that shows an error must raise exactly it
            with pytest.raises(mi.GraphBuildError, match=r"\[16,4096\] x \[406,4096\] needs 4096 == 406"):
                exec(compile(code, "README.md", "exec"), ns)
            assert len(ns["bad"].ops) == 3  # two inputs and the rms_norm: the failed matmul added nothing
        else:
            exec(compile(code, "README.md", "exec"), ns)
    assert (tmp_path / "fused.svg").exists() and (tmp_path / "fused.json").exists()
    rel = ((ns["out"] - ns["plain"]).norm() / ns["plain"].norm()).item()
    assert rel < 1e-4
