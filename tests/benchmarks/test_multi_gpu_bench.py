"""benchmarks/multi_gpu_bench.py (issue 23) without a GPU: its table's arithmetic and its refusal on a CPU."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import multi_gpu_bench as mb  # noqa: E402


def _run(gpus: int, tune_s: float, winner: str, copy_us: float = 1000.0, measured: int = 10) -> dict:
    cal = [{"worker": f"tcp://h:{i}", "device": "H100", "copy_us": copy_us, "matmul_us": 30.0} for i in range(gpus)]
    return {"gpus": gpus, "workers": gpus, "tune_s": tune_s,
            "programs": {"p": {"winner": winner, "calibration": cal, "warnings": [], "measured": measured}}}


def test_the_table_gives_speed_up_per_gpu_against_linear_and_whether_winners_agree():
    # the 2-GPU run measured more variants in its time (the tuning stops adaptively): throughput counts that
    text = mb.table([_run(1, 100.0, "cand0/t256/fma"), _run(2, 62.5, "cand0/t256/fma", measured=15),
                     _run(4, 40.0, "torch")], "4× H100")
    rows = [line for line in text.splitlines() if line.startswith("| ") and line[2].isdigit()]
    assert rows[0].startswith("| 1 | 1 | 100.0 | 1.00× | 1.00 | 10 | 0.100 | 1.00× | 1.00 | 1/1 |")
    assert rows[1].startswith("| 2 | 2 | 62.5 | 1.60× | 0.80 | 15 | 0.240 | 2.40× | 1.20 | 1/1 |")
    assert rows[2].startswith("| 4 | 4 | 40.0 | 2.50× | 0.62 | 10 | 0.250 | 2.50× | 0.62 | 0/1 |")   # another winner counts
    assert text.count("| tcp://h:") == 4 and "Calibration warnings: none" in text


@pytest.mark.skipif(torch.cuda.is_available(), reason="the refusal is for machines without a GPU")
def test_without_a_gpu_it_says_so_and_exits_2(capsys):
    assert mb.main(["--gpus", "1"]) == 2
    assert "needs CUDA GPUs" in capsys.readouterr().err
