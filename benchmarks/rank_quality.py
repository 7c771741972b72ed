"""How well the cost model ranks lowerings, from stored tuning records: Spearman's rho of estimate vs measured.

Reads e2e_bench JSON files (a list of program records, each with ``tuning``: every variant's
``estimate_us``, ``median_us``, ``error``) and suite_bench JSONL files (one record per program with
``rank_pairs``), and prints each program's rho over its timed variants, then the pooled rho and the
mean within a program (``mirage_lab.pipeline.ranking``; issue 19 asks for >= 0.8). No GPU needed: the
measurements are the stored ones.

    python benchmarks/rank_quality.py benchmarks/found/e2e_h100_run15a.json benchmarks/found/e2e_h100_run15b.json
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mirage_lab.pipeline.ranking import pooled_spearman, spearman  # noqa: E402


def read_pairs(path: Path) -> list[tuple[str, list[tuple[float, float]]]]:
    """``[(program, [(estimate µs, measured µs), ...])]`` of a stored e2e JSON or suite JSONL file."""
    text = path.read_text()
    try:
        data = json.loads(text)
        records = data if isinstance(data, list) else [data]
    except json.JSONDecodeError:   # JSONL: one record a line (suite_bench's --resume file), the last per program
        last = {}
        for line in text.splitlines():
            if line.strip():
                r = json.loads(line)
                last[r.get("program")] = r
        records = list(last.values())
    out = []
    for r in records:
        name = r.get("name") or r.get("program") or "?"
        if "rank_pairs" in r:
            pairs = [(float(e), float(m)) for e, m in r["rank_pairs"]]
        elif "tuning" in r:
            pairs = [(float(t["estimate_us"]), float(t["median_us"])) for t in r["tuning"]
                     if t.get("error") is None and t.get("median_us") is not None]
        else:
            continue
        out.append((name, pairs))
    return out


def report(paths: list[Path]) -> str:
    lines = ["| file | program | timed variants | rho |", "|---|---|---|---|"]
    groups = []
    for p in paths:
        for name, pairs in read_pairs(p):
            groups.append(pairs)
            rho = spearman([e for e, _ in pairs], [m for _, m in pairs])
            lines.append(f"| {p.name} | {name} | {len(pairs)} | {'—' if rho is None else f'{rho:.2f}'} |")
    s = pooled_spearman(groups)
    fmt = lambda x: "—" if x is None else f"{x:.2f}"  # noqa: E731
    lines += ["", f"pooled rho {fmt(s['pooled'])} over {s['pairs']} variants; mean within a program {fmt(s['mean'])} "
                  f"({s['programs']} programs with a ranking); target >= 0.8"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+", type=Path, help="e2e_bench JSON or suite_bench JSONL records")
    a = ap.parse_args(argv)
    print(report(a.files))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
