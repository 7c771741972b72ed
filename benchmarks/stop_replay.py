"""Replay the tuner's stopping rule on stored H100 tuning records, on a CPU: which variants it would time.

Each record lists variants with the cost model's estimate and, where the run timed them, the
measured median. The replay puts them in the tuner's plan order (``autotune.plan_order`` on the
stored estimates), then walks it as the tuner does: a feed keeps ``depth`` compiles in flight from
the variants :func:`mirage_lab.pipeline.stopping.possible_winners` still rates possible winners;
"timing" a variant reads its stored median (a stored error is a failure). The best so far includes
the program's own lowerings where the record has them (torch and torch.compile in a CUDA graph),
as the tuner races them first. It stops when no variant left is a possible winner; there is no
time ceiling here. A variant the replay times that the run never timed has no known time: it
counts as timed (``unk``) and as no result.

Per record and rule (``old``: groups with nothing timed stay possible winners, and the plan's first
``depth`` are sent before the rule applies, as ``autotune`` did; ``new``: they are calibrated by their
kind, :data:`~mirage_lab.pipeline.stopping.KIND_SAFETY`, and the feed sends the rule's ``wait`` list
from the start), at each compile depth
(``d1``: one at a time; ``d32``: the 16-core H100 host's feed): variants timed, the sum of their
stored compile seconds (a proxy for the pool's work; 0 where the record has none), ``unk``, and
whether the best found is the record's best (within 1 %) at every depth: ``best`` counting the
program's lowerings, ``μG`` the fastest μGraph variant alone (which may lose where the program
wins: the rule rightly stops short of μGraphs that cannot beat it).

    python benchmarks/stop_replay.py                 # the table of every record (markdown)
    python benchmarks/stop_replay.py --sweep         # the smallest kind safety factor that keeps each record's best
    python benchmarks/stop_replay.py --depth 32      # only 16 compile workers (32 in flight), as on the H100 host
"""
from __future__ import annotations

import argparse
import glob
import json
import math
import sys
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Hashable, Iterable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mirage_lab.pipeline.autotune import plan_order  # noqa: E402
from mirage_lab.pipeline.stopping import KIND_SAFETY, STOP_MARGIN, lowering_kind, possible_winners  # noqa: E402

FOUND = ROOT / "benchmarks" / "found"
WITHIN = 0.01   # a best within 1 % of the record's is the same best (timing noise is of that order)


@dataclass
class Row:
    """One stored variant: its group's fields, the run's estimate, and what the run measured."""

    candidate: int
    threads: int
    options: str
    estimate_us: float
    median_us: float | None   # None: not timed in the run (or failed)
    failed: bool = False
    compile_s: float | None = None

    @property
    def group(self) -> tuple[int, bool, int]:
        return (self.candidate, "-mma" in self.options, self.threads)


@dataclass
class Record:
    """A program's stored tuning: its rows and the fastest program lowering the run measured (µs)."""

    name: str
    rows: list[Row]
    program_us: float = math.inf

    def best(self, mugraph_only: bool = False) -> float:
        us = min((r.median_us for r in self.rows if r.median_us is not None), default=math.inf)
        return us if mugraph_only else min(us, self.program_us)


@dataclass
class Outcome:
    timed: list[int] = field(default_factory=list)   # plan indices, in the order they were timed
    unknown: int = 0
    compile_s: float = 0.0
    best_us: float = math.inf
    mugraph_us: float = math.inf


def planned(rows: list[Row]) -> list[Row]:
    """``rows`` in the tuner's plan order (stable for equal estimates: the stored order)."""
    per: dict[int, list[Row]] = {}
    for r in rows:
        per.setdefault(r.candidate, []).append(r)
    return plan_order([sorted(s, key=lambda r: r.estimate_us) for s in per.values()],
                      lambda r: r.estimate_us, lambda r: r.group)


def replay(rec: Record, *, kind: Callable[[Hashable], Hashable] | None = lowering_kind, safety: float = KIND_SAFETY,
           margin: float = STOP_MARGIN, depth: int = 1, first_round: bool = False) -> Outcome:
    """Walk ``rec`` in plan order with the stopping rule (``kind=None``: the rule without kind calibration).

    ``first_round``: the first ``depth`` of the plan are sent before the rule applies (``autotune`` before
    2026-11-28; it now sends only what the rule's ``wait`` list names, as every later top-up).
    """
    rows = planned(rec.rows)
    measured: dict[int, float | None] = {}
    in_flight: deque[int] = deque()
    sent: set[int] = set()
    out = Outcome(best_us=rec.program_us)
    while len(measured) < len(rows):
        items = [(r.group, r.estimate_us, measured.get(i)) for i, r in enumerate(rows)]
        pending = [i for i in range(len(rows)) if i not in measured]
        rule = dict(best_us=out.best_us, margin=margin, pending=pending, kind=kind, safety=safety)
        if not possible_winners(items, **rule):
            break
        # the compile feed: the first unsent of those to send now, up to depth in flight
        send = range(len(rows)) if first_round and not measured else possible_winners(items, wait=True, **rule)
        for i in send:
            if len(in_flight) >= depth:
                break
            if i not in sent:
                sent.add(i)
                in_flight.append(i)
        i = in_flight.popleft()   # compiles land in the order sent (an approximation: FMA compiles are slower)
        r = rows[i]
        out.timed.append(i)
        out.compile_s += r.compile_s or 0.0
        if r.median_us is None and not r.failed:
            out.unknown += 1
        us = None if r.failed else r.median_us
        measured[i] = us
        if us is not None:
            out.best_us = min(out.best_us, us)
            out.mugraph_us = min(out.mugraph_us, us)
    return out


# ----------------------------------------------------------------------------- the stored records
def _row(d: dict[str, Any], estimate_us: float | None = None) -> Row:
    return Row(d["candidate"], d["threads"], d["options"], float(estimate_us if estimate_us is not None
                                                                 else d["estimate_us"]),
               None if d.get("error") else d.get("median_us"), bool(d.get("error")), d.get("compile_s"))


def e2e_records(paths: Iterable[str]) -> list[Record]:
    """``e2e_bench`` JSON: each program's ``tuning`` rows; the program's lowerings from ``torch_graph_us``,
    ``compile_graph_us``."""
    out = []
    for p in paths:
        for e in json.loads(Path(p).read_text()):
            if e.get("tuning"):
                prog = min((e[k] for k in ("torch_graph_us", "compile_graph_us") if e.get(k)), default=math.inf)
                out.append(Record(f"{Path(p).stem.removeprefix('e2e_h100_')}: {e['program']}",
                                  [_row(d) for d in e["tuning"]], prog))
    return out


def dump_records(paths: Iterable[str]) -> list[Record]:
    """``suite_bench --dump`` JSON: ``variants`` rows; the program's lowerings from ``programs``."""
    out = []
    for p in paths:
        d = json.loads(Path(p).read_text())
        prog = min((q["median_us"] for q in d.get("programs", []) if q.get("median_us") and not q.get("error")),
                   default=math.inf)
        out.append(Record(f"{Path(p).stem}: {d['program']}", [_row(v) for v in d["variants"]], prog))
    return out


def costmodel_records(path: Path, current: bool) -> list[Record]:
    """``found/costmodel_h100_records.json`` (timed rows joined to their μGraphs). ``current``: re-estimated
    with this tree's cost model (the rows the run timed only), else with the run's own estimates."""
    from mirage_lab.ir.serialize import from_dict
    from mirage_lab.pipeline.cost_model import estimate
    from mirage_lab.pipeline.variants import with_block_dim

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from rank_quality import options_from_tag

    out = []
    for rec in json.loads(path.read_text()):
        graphs = [from_dict(d) for d in rec["candidates"]]
        rows = []
        for v in rec["variants"]:
            est = (estimate(with_block_dim(graphs[v["candidate"]], v["threads"]), options_from_tag(v["options"])).us
                   if current else v["old_estimate_us"])
            rows.append(_row(v, est))
        out.append(Record(f"costmodel{'(now)' if current else ''}: {rec['program']}", rows))
    return out


def every_record() -> list[Record]:
    """Every stored record with a per-variant estimate and measurement (see RESULTS.md for what is left out)."""
    recs = e2e_records(sorted(glob.glob(str(FOUND / "e2e_h100_*.json"))))
    recs += dump_records(sorted(glob.glob(str(FOUND / "dumps_2026-11-25b" / "*.json")))
                         + [str(FOUND / "splitk_ngpt4096_h100_dump.json")])
    recs += costmodel_records(FOUND / "costmodel_h100_records.json", current=True)
    return recs


# ----------------------------------------------------------------------------- the table
def kept(rec: Record, o: Outcome) -> tuple[bool, bool]:
    """Whether the replay's best is the record's best within 1 %: overall, and among the μGraph variants."""
    return (o.best_us <= rec.best() * (1 + WITHIN), o.mugraph_us <= rec.best(mugraph_only=True) * (1 + WITHIN))


def table(recs: list[Record], safety: float, depths: tuple[int, ...] = (1, 32)) -> str:
    """The markdown table: per record and compile depth, variants timed and Σ compile s, old rule / new rule,
    and whether each keeps the record's best (overall; ``μG``: the fastest μGraph variant)."""
    yn = {True: "yes", False: "**no**"}
    head = "| record | variants |" + "".join(f" timed old/new (d{d}) | Σ compile s old/new (d{d}) | unk (d{d}) |"
                                          for d in depths) + " best kept (any d) | μG best kept | record best µs |"
    lines = [head, "|---|---:|" + "---:|---:|---:|" * len(depths) + "---|---|---:|"]
    tot = {d: [0, 0, 0.0, 0.0] for d in depths}
    n_rows = 0
    for rec in recs:
        n_rows += len(rec.rows)
        cells, best, mug = [], [], []
        for d in depths:
            o, n = replay(rec, kind=None, depth=d, first_round=True), replay(rec, safety=safety, depth=d)
            (ko, mo), (kn, mn) = kept(rec, o), kept(rec, n)
            best += [ko, kn]
            mug += [mo, mn]
            t = tot[d]
            tot[d] = [t[0] + len(o.timed), t[1] + len(n.timed), t[2] + o.compile_s, t[3] + n.compile_s]
            cells.append(f" {len(o.timed)}/{len(n.timed)} | {o.compile_s:.0f}/{n.compile_s:.0f} | {o.unknown}/{n.unknown} |")
        lines.append(f"| {rec.name} | {len(rec.rows)} |" + "".join(cells) +
                     f" {yn[all(best[0::2])]}/{yn[all(best[1::2])]} | {yn[all(mug[0::2])]}/{yn[all(mug[1::2])]} |"
                     f" {rec.best():.2f} |")
    lines.append(f"| **all {len(recs)}** | {n_rows} |" + "".join(
        f" {tot[d][0]}/{tot[d][1]} | {tot[d][2]:.0f}/{tot[d][3]:.0f} | |" for d in depths) + " | | |")
    return "\n".join(lines)


def needed_safety(rec: Record, depth: int, grid: Iterable[float]) -> float | None:
    """The smallest factor of ``grid`` from which on (every larger one too) the replay keeps the record's best."""
    ok = [(s, kept(rec, replay(rec, safety=s, depth=depth))[0]) for s in grid]
    need = None
    for s, k in reversed(ok):
        if not k:
            break
        need = s
    return need


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--safety", type=float, default=KIND_SAFETY, help="the kind calibration's safety factor")
    ap.add_argument("--depth", type=int, nargs="+", default=[1, 32],
                    help="compiles in flight (the tuner: 2 per worker; 32 on the 16-core H100 host)")
    ap.add_argument("--sweep", action="store_true", help="per record, the smallest safety factor that keeps its best")
    a = ap.parse_args(argv)
    recs = every_record()
    if a.sweep:
        grid = [1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 4.0, 6.0, 8.0, 16.0]
        print("| record | smallest safety kept (depth 1) | (depth 32) | timed at 1.0 / 2.0 / 3.0 / 4.0 (depth 1) |")
        print("|---|---:|---:|---|")
        for rec in recs:
            n1, n32 = needed_safety(rec, 1, grid), needed_safety(rec, 32, grid)
            counts = "/".join(str(len(replay(rec, safety=s).timed)) for s in (1.0, 2.0, 3.0, 4.0))
            print(f"| {rec.name} | {n1} | {n32} | {counts} |")
        return 0
    print(table(recs, a.safety, tuple(a.depth)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
