"""How well the cost model ranks lowerings, from stored tuning records: Spearman's rho of estimate vs measured.

Two kinds of input:

* ``--records FILE``: tuning records with the candidate μGraphs (``found/costmodel_h100_records.json``:
  per program every timed variant's candidate, threads, codegen options and measured median µs). The
  estimates are recomputed with the cost model as it is now, beside the estimate the run had
  (``old_estimate_us``); ``--fit`` refits the model's fitted constants (``cost_model.FITTED``) and
  reports leave-one-program-out rho: the constants fitted on the other programs, rho on the held-out one.

* ``--dumps FILE ...``: suite_bench's tuner dumps (``--dump DIR``: one JSON per program with its variant rows
  and the tuned μGraphs), as files or as the ``dumps.tgz`` a device run brings back (``found/h100_*/``); each
  tarball's programs are named ``<its folder>/<tarball>:<program>``. With ``--fit`` a program is held out with every run of it.

Reads e2e_bench JSON files (a list of program records, each with ``tuning``: every variant's
``estimate_us``, ``median_us``, ``error``) and suite_bench JSONL files (one record per program with
``rank_pairs``), and prints each program's rho over its timed variants, then the pooled rho and the
mean within a program (``mirage_lab.pipeline.ranking``; issue 19 asks for >= 0.8). No GPU needed: the
measurements are the stored ones.

    python benchmarks/rank_quality.py benchmarks/found/e2e_h100_run15a.json benchmarks/found/e2e_h100_run15b.json
    python benchmarks/rank_quality.py --records benchmarks/found/costmodel_h100_records.json [--fit]
    python benchmarks/rank_quality.py --dumps benchmarks/found/h100_2026-12-07c/call*_dumps.tgz --fit
"""
from __future__ import annotations

import argparse
import json
import re
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mirage_lab.codegen import CodegenOptions  # noqa: E402
from mirage_lab.errors import MirageLabError  # noqa: E402
from mirage_lab.ir.serialize import from_dict  # noqa: E402
from mirage_lab.pipeline import cost_model as cm  # noqa: E402
from mirage_lab.pipeline.ranking import pooled_spearman, spearman  # noqa: E402
from mirage_lab.pipeline.variants import with_block_dim  # noqa: E402

RECORDS = Path(__file__).resolve().parent / "found" / "costmodel_h100_records.json"


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


def options_from_tag(tag: str) -> CodegenOptions:
    """The :class:`CodegenOptions` a variant's tag names (``CodegenOptions.tag``'s inverse).

        >>> options_from_tag("pw64x2-regNone-acc128-mma-mv") == CodegenOptions(pipeline_words=64, pipeline_depth=2,
        ...                                                                   mma=True, mma_b16=True)
        True
        >>> options_from_tag("pw0-regNone-acc128-ldsm-sk2-mma") == CodegenOptions(mma=True, ldmatrix=True, split=2)
        True
    """
    m = re.fullmatch(r"pw(\d+)(?:x(\d+))?-reg(\w+)-acc(\d+)(?:-ph(\d+))?(?:-smem(\d+))?(?:-cp(\d))?(-ldsm)?(?:-sk(\d+))?(-mma)?(-mv)?", tag)
    if m is None:
        raise MirageLabError(f"options tag {tag!r} is not one CodegenOptions.tag() writes, "
                             "e.g. 'pw64x2-regNone-acc128-mma'")
    pw, depth, reg, acc, ph, smem, cp, ldsm, sk, mma, mv = m.groups()
    return CodegenOptions(pipeline_words=int(pw), pipeline_depth=int(depth or 1),
                          max_registers=None if reg == "None" else int(reg), max_stream_acc=int(acc),
                          phase_words=int(ph or 32), mma=bool(mma), mma_b16=bool(mv), smem_kb=int(smem or 48),
                          async_stages=int(cp or 0), ldmatrix=bool(ldsm), split=int(sk or 1))


@dataclass
class Program:
    """One program's timed variants: each one's cost profile (hardware-free), measured µs and the run's estimate."""

    name: str
    profiles: list
    measured: list[float]
    old_estimates: list[float]

    def rho(self, hw: cm.Hardware = cm.H100) -> float | None:
        return spearman([cm.time_profile(p, hw).us for p in self.profiles], self.measured)


def load_records(path: Path = RECORDS) -> list[Program]:
    """The programs of a records file, every variant that was timed and checked correct."""
    out = []
    for r in json.loads(Path(path).read_text()):
        graphs = [from_dict(d) for d in r["candidates"]]
        out.append(_timed(Program(r["program"], [], [], []), r["variants"], graphs.__getitem__, "old_estimate_us"))
    return out


def _timed(prog: Program, variants: list[dict], graph_of, estimate_key: str) -> Program:
    """``prog`` with every variant row that was timed and checked correct (``graph_of``: candidate -> μGraph)."""
    for v in variants:
        if v.get("error") is not None or v.get("median_us") is None:
            continue
        g = with_block_dim(graph_of(v["candidate"]), v["threads"])
        prog.profiles.append(cm.profile(g, options_from_tag(v["options"])))
        prog.measured.append(float(v["median_us"]))
        prog.old_estimates.append(float(v.get(estimate_key, "nan")))
    return prog


def load_dumps(paths: list[Path], min_variants: int = 5) -> list[Program]:
    """The programs of suite_bench tuner dumps (JSON files, or ``.tgz`` of them) with ``min_variants`` timed."""
    out = []
    for path in paths:
        if path.name.endswith((".tgz", ".tar.gz")):
            with tarfile.open(path) as tar:
                docs = [json.load(tar.extractfile(m)) for m in sorted(tar.getmembers(), key=lambda m: m.name)
                        if m.isfile() and m.name.endswith(".json")]
            label = f"{path.parent.name}/{path.name.split('.')[0]}"   # found/<run>/callN_dumps.tgz: one per call
        else:
            docs, label = [json.loads(path.read_text())], path.stem
        for d in docs:
            prog = _timed(Program(f"{label}:{d['program']}", [], [], []), d.get("variants", []),
                          lambda c, d=d: from_dict(d["tuned"][str(c)]), "estimate_us")
            if len(prog.measured) >= min_variants:
                out.append(prog)
    return out


def _program_of(name: str) -> str:
    """The suite program a dumped run is of (``run:program``), so that a held-out program leaves every run of it."""
    return name.rsplit(":", 1)[-1]


def budget_to_winner(estimates: list[float], measured: list[float], within: float = 0.02) -> int:
    """How many variants a tuner timing in estimate order measures before one within ``within`` of the
    fastest measured (ties of the estimate in the order given).

        >>> budget_to_winner([3.0, 1.0, 2.0], [10.0, 30.0, 20.0])
        3
    """
    best = min(measured)
    order = sorted(range(len(estimates)), key=lambda i: estimates[i])
    return next(k for k, i in enumerate(order, 1) if measured[i] <= best * (1 + within))


def within_rho(programs: list[Program], hw: cm.Hardware = cm.H100) -> float:
    """The pairs-weighted mean of each program's own rho (what the tuner relies on)."""
    rs = [(p.rho(hw), len(p.measured)) for p in programs]
    rs = [(r, n) for r, n in rs if r is not None]
    return sum(r * n for r, n in rs) / max(1, sum(n for _, n in rs))


def log_spread(programs: list[Program], hw: cm.Hardware = cm.H100) -> float:
    """Minus the pairs-weighted variance, within each program, of log(estimate / measured): 0 when each
    program's estimates are its measurements times one factor. Smoother than rho, so a better thing to fit."""
    total = n = 0.0
    for p in programs:
        r = np.log([cm.time_profile(q, hw).us for q in p.profiles]) - np.log(p.measured)
        total += float(((r - r.mean()) ** 2).sum())
        n += len(r)
    return -total / max(1.0, n)


def fit(programs: list[Program], start: cm.Hardware = cm.PRIOR, bound: float = 8.0, rounds: int = 6,
        score=None) -> cm.Hardware:
    """Coordinate search over ``cm.FITTED`` for the best ``score`` over ``programs`` (by default
    ``within_rho``, the ranks themselves): each constant scaled by 0.5 ... 2 at a time, kept within
    ``bound`` times its value in ``start`` (the physical guesses of ``cm.PRIOR``), so that few records
    cannot drive a constant to a value no H100 has."""
    score = score or within_rho
    steps = (0.5, 0.7, 0.85, 1.2, 1.4, 2.0)
    hw, best = start, score(programs, start)
    for _ in range(rounds):
        moved = False
        for name in cm.FITTED:
            base, origin = getattr(hw, name), getattr(start, name)
            for f in steps:
                if not origin / bound <= base * f <= origin * bound:
                    continue
                trial = cm.with_constants(hw, **{name: base * f})
                val = score(programs, trial)
                if val > best + 1e-9:
                    best, hw, moved = val, trial, True
        if not moved:
            break
    return hw


def records_report(path: Path | list[Program], refit: bool = False) -> str:
    """Per program: rho of the run's estimate, of the model with ``cm.PRIOR``'s unfitted constants, as
    shipped (``cm.H100``) and, with ``refit``, with constants fitted on the other programs only."""
    progs = load_records(path) if isinstance(path, Path) else path
    cols = ["program", "timed variants", "rho, estimate of the run", "rho, prior constants", "rho, model as shipped",
            "timed to the winner (within 2 %): run's estimate / shipped"]
    cols += ["held out (fitted on the others): rho; timed to the winner"] if refit else []
    lines = ["| " + " | ".join(cols) + " |", "|---" * len(cols) + "|"]
    held = []
    for p in progs:
        old = spearman(p.old_estimates, p.measured)
        now = [cm.time_profile(q).us for q in p.profiles]
        f2 = lambda x: "—" if x is None else f"{x:.2f}"  # noqa: E731  (no ranking: every time alike)
        row = (f"| {p.name} | {len(p.measured)} | {f2(old)} | {f2(p.rho(cm.PRIOR))} | {f2(p.rho())} | "
               f"{budget_to_winner(p.old_estimates, p.measured)} / {budget_to_winner(now, p.measured)} |")
        if refit:
            hw = fit([q for q in progs if _program_of(q.name) != _program_of(p.name)])
            r = p.rho(hw)
            if r is not None:
                held.append((r, len(p.measured)))
            row += f" {f2(r)}; {budget_to_winner([cm.time_profile(q, hw).us for q in p.profiles], p.measured)} |"
        lines.append(row)

    def summary(label: str, hw: cm.Hardware | None) -> str:
        s = pooled_spearman([list(zip(p.old_estimates, p.measured)) if hw is None else
                             [(cm.time_profile(q, hw).us, m) for q, m in zip(p.profiles, p.measured)] for p in progs])
        return f"{label}: pooled rho {s['pooled']:.2f}, mean within a program {s['mean']:.2f}"

    lines += ["", summary("estimate of the run", None), summary("prior constants", cm.PRIOR),
              summary("model as shipped", cm.H100)]
    if refit:
        n = sum(k for _, k in held)
        lines.append(f"leave-one-program-out: mean within a program {sum(r * k for r, k in held) / n:.2f}")
        hw = fit(progs)
        lines.append(f"fitted on every program: mean within a program {within_rho(progs, hw):.2f}; constants "
                     + ", ".join(f"{k}={getattr(hw, k):.4g}" for k in cm.FITTED))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="*", type=Path, help="e2e_bench JSON or suite_bench JSONL records")
    ap.add_argument("--records", type=Path, default=None,
                    help="records with candidate μGraphs (found/costmodel_h100_records.json): re-estimate them")
    ap.add_argument("--dumps", type=Path, nargs="+", default=None,
                    help="suite_bench tuner dumps (JSON files or the dumps.tgz of a device run): re-estimate them")
    ap.add_argument("--fit", action="store_true",
                    help="with --records or --dumps: refit the constants, leave one program out")
    a = ap.parse_args(argv)
    if a.files:
        print(report(a.files))
    if a.records is not None:
        print(records_report(a.records, a.fit))
    if a.dumps:
        print(records_report(load_dumps(a.dumps), a.fit))
    if not a.files and a.records is None and not a.dumps:
        ap.error("pass record files, --records FILE, --dumps FILE ..., or any of them")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
