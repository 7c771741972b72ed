"""Latency records from the benchmarks' result files, as :class:`~mirage_lab.runtime.latency.LatencyRow`s.

``benchmarks/e2e_bench.py`` writes one JSON record per program it superoptimizes on a GPU
(``benchmarks/found/e2e_h100_run*.json`` are the H100 runs kept in the repository): the device,
the tuner's report (``tuning``: every lowering variant tried, with its CUDA-graph median), the
chosen lowering's times and the torch baselines'. This module reads them back, so a figure of
"what it measured on an H100" is drawn from the measurement file, never from typed-in numbers.

    >>> rec = {"program": "p", "device": "NVIDIA H100", "floor_us": 11.3, "torch_graph_us": 39.0,
    ...        "compile_graph_us": 20.8, "torch_eager_us": 43.6, "compile_us": 21.2,
    ...        "tuning": [{"candidate": 0, "threads": 256, "options": "pw0", "median_us": 30.0, "error": None},
    ...                   {"candidate": 0, "threads": 512, "options": "pw0", "median_us": 25.0, "error": None},
    ...                   {"candidate": 1, "threads": 512, "options": "mma", "median_us": 19.0, "error": None}]}
    >>> [(r.label, r.median_us, r.options) for r in e2e_latency_rows(rec)][:2]
    [('candidate 1', 19.0, 't512/mma'), ('candidate 0', 25.0, 't512/pw0')]
    >>> [r.label for r in e2e_latency_rows(rec) if r.kind == "baseline"]
    ['torch + CUDA graph', 'torch.compile + CUDA graph']
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

from ..errors import MirageLabError
from ..runtime.latency import BASELINE, CANDIDATE, LatencyRow

#: where a clone of the repository keeps the GPU runs' result files
FOUND_DIR = Path(__file__).resolve().parents[2] / "benchmarks" / "found"
# record key -> (label, launch mode) of each torch baseline e2e_bench times
_BASELINES = {
    "torch_graph_us": ("torch + CUDA graph", "cuda_graph"),
    "compile_graph_us": ("torch.compile + CUDA graph", "cuda_graph"),
    "torch_eager_us": ("torch eager", "eager"),
    "compile_us": ("torch.compile", "eager"),
}
_NEEDED = ("program", "device", "tuning")


class BenchRecordError(MirageLabError, ValueError):
    """A benchmark results file is missing, or is not what ``benchmarks/e2e_bench.py`` writes."""


def load_e2e_results(path: str | Path) -> dict[str, dict[str, Any]]:
    """``{program name: record}`` from an ``e2e_bench.py`` results file (a name alone is looked up in
    :data:`FOUND_DIR`).

        >>> sorted(load_e2e_results("e2e_h100_run15b.json"))  # doctest: +SKIP
        ['gated_mlp_8x4096x4096', 'rmsnorm_linear_16x4096x4096', 'rmsnorm_linear_2x4096x6144']
    """
    p = Path(path)
    if not p.exists() and not p.is_absolute() and len(p.parts) == 1:
        p = FOUND_DIR / p
    if not p.exists():
        raise BenchRecordError(f"no results file {p}: the GPU runs are in benchmarks/found/ of a clone of the "
                               "repository; benchmarks/e2e_bench.py --out DIR writes new ones")
    try:
        data = json.loads(p.read_text())
    except json.JSONDecodeError as e:
        raise BenchRecordError(f"{p} is not JSON ({e})") from e
    if not isinstance(data, list) or not all(isinstance(r, dict) and all(k in r for k in _NEEDED) for r in data):
        raise BenchRecordError(f"{p} is not an e2e_bench.py results file (a list of records with {_NEEDED})")
    return {r["program"]: r for r in data}


def e2e_latency_rows(record: Mapping[str, Any], *, eager_baselines: bool = False) -> list[LatencyRow]:
    """The record's rows: each tuned candidate's fastest lowering (fastest first), then the torch baselines.

    Candidates are the tuner's CUDA-graph medians; the baselines are the CUDA-graph ones (and, with
    ``eager_baselines``, the eager ones too), so every bar is timed the same way by default.
    """
    device = str(record.get("device", ""))
    best: dict[int, dict[str, Any]] = {}
    for t in record["tuning"]:
        if t.get("error") or t.get("median_us") is None:
            continue
        c = int(t["candidate"])
        if c not in best or t["median_us"] < best[c]["median_us"]:
            best[c] = t
    rows = [LatencyRow(f"candidate {c}", CANDIDATE, float(t["median_us"]), device=device, candidate=c,
                       options=f"t{t['threads']}/{t['options']}")
            for c, t in sorted(best.items(), key=lambda kv: (kv[1]["median_us"], kv[0]))]
    for key, (label, mode) in _BASELINES.items():
        if record.get(key) is not None and (mode == "cuda_graph" or eager_baselines):
            rows.append(LatencyRow(label, BASELINE, float(record[key]), mode=mode, device=device))
    return rows


__all__ = ["load_e2e_results", "e2e_latency_rows", "BenchRecordError", "FOUND_DIR"]
