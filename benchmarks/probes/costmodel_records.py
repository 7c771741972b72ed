"""Build ``benchmarks/found/costmodel_h100_records.json``: stored H100 tuning rows joined to their candidate μGraphs.

The tuner's rows (``e2e_bench`` JSON ``tuning``, or a ``suite_bench --dump`` file's ``variants``) name a
variant by its shortlist index, threads and codegen options, and carry the estimate of the cost model the
run had. To re-estimate them with another model we need the μGraphs. They come from a search (re-run here
on the CPU, ``--search``) or from the dump itself; each row group is matched to the candidate that
reproduces every one of its estimates with the run's cost model (read from git at ``--old-model``) and
whose lowering variants include the row's (threads, options), one candidate per shortlist entry. An entry
that more than one candidate fits in every such join is left out (``unknown``): which one ran is not known.

    python benchmarks/probes/costmodel_records.py --e2e benchmarks/found/e2e_h100_run15b.json \\
        --program rmsnorm_linear_16x4096x4096 --search 300 --out /tmp/rec.json
    python benchmarks/probes/costmodel_records.py --dump DUMPDIR/some_program.json --out /tmp/rec.json
    python benchmarks/probes/costmodel_records.py --dump NEWDUMP.json --old-model current --out /tmp/rec.json
    # a dump with 'tuned' (suite_bench since 2026-11-29 (c)) is joined exactly, whatever the model
    # then merge the programs into found/costmodel_h100_records.json (a JSON list, one record a program)
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from rank_quality import options_from_tag  # noqa: E402

from mirage_lab.ir.serialize import from_dict  # noqa: E402
from mirage_lab.pipeline.variants import lowering_variants, with_block_dim  # noqa: E402

OLD_MODEL = "e470ca9"   # the cost model of H100 run 15 and of the 2026-11-25 suite runs (unchanged since 11-22)


def old_estimate(commit: str):
    """``estimate`` of the cost model at ``commit`` (its module text, relative imports made absolute);
    ``"current"``: the model of this working tree (for runs made with it)."""
    if commit == "current":
        from mirage_lab.pipeline.cost_model import estimate
        return estimate
    src = subprocess.run(["git", "show", f"{commit}:mirage_lab/pipeline/cost_model.py"], cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout
    src = src.replace("from ..", "from mirage_lab.")
    mod = types.ModuleType("old_cost_model")
    sys.modules[mod.__name__] = mod   # dataclasses look their module up
    exec(compile(src, f"cost_model@{commit}", "exec"), mod.__dict__)
    return mod.estimate


def search_candidates(program: str, seconds: float, workers: int) -> list[dict]:
    """μGraph JSON of every candidate a search of an e2e_bench program finds within ``seconds``."""
    from e2e_bench import PROGRAMS

    from mirage_lab.search import CancelToken, CandidateFound, search

    make, config, _ = PROGRAMS[program]
    tok, t0, out = CancelToken(), time.time(), []
    for ev in search(make(), config, workers=workers, cancel=tok):
        if isinstance(ev, CandidateFound):
            out.append(json.loads(ev.graph.to_json()))
            print(f"  {time.time() - t0:.0f}s: candidate {len(out)}", flush=True)
        if time.time() - t0 > seconds:
            tok.cancel()
    return out


def match(rows: list[dict], raw: list[dict], estimate, given: dict | None = None) -> dict:
    """Join ``rows`` (candidate = shortlist index) to the candidates in ``raw``; see the module doc."""
    graphs = [from_dict(d) for d in raw]
    tags: dict[int, set] = {}
    by: dict[int, list[dict]] = {}
    for r in rows:
        by.setdefault(r["candidate"], []).append(r)
    fits: dict[int, list[int]] = {}
    for c, rs in sorted(by.items()):
        fits[c] = []
        for j, g in enumerate(graphs):
            if j not in tags:
                try:
                    tags[j] = {(v.threads, v.options.tag()) for v in lowering_variants(g, candidate=j)}
                except Exception:  # noqa: BLE001  (a candidate that no longer lowers matches nothing)
                    tags[j] = set()
            if not {(r["threads"], r["options"]) for r in rs} <= tags[j]:
                continue
            if all(abs(round(estimate(with_block_dim(g, r["threads"]), options_from_tag(r["options"])).us, 2)
                       - r["estimate_us"]) < 0.011 for r in rs):
                fits[c].append(j)
    if given is not None:   # the join is known (the run's shortlist, checked against fits by the caller)
        fits = {c: [given[c]] if given.get(c) in fits[c] else [] for c in fits}
    order = [c for c in sorted(fits) if fits[c]]
    every: list[dict] = []

    def assign(i: int, used: frozenset, got: dict) -> None:   # every one-to-one join (a few at most)
        if len(every) > 10000:
            return
        if i == len(order):
            every.append(dict(got))
            return
        for j in fits[order[i]]:
            if j not in used:
                assign(i + 1, used | {j}, {**got, order[i]: j})

    assign(0, frozenset(), {})
    # a shortlist entry is known when every one-to-one join gives it the same candidate; the others are
    # left out (their candidates differ in ways the run's model did not see, so which one ran is unknown)
    pick = {c: every[0][c] for c in order if every and len({a[c] for a in every}) == 1}
    keep = sorted(set(pick.values()))
    return {"fits": fits, "unknown": {str(c): fits[c] for c in sorted(fits) if c not in pick},
            "candidates": [raw[j] for j in keep],
            "variants": [{"candidate": keep.index(pick[r["candidate"]]), "threads": r["threads"],
                          "options": r["options"], "median_us": r["median_us"],
                          "old_estimate_us": r["estimate_us"], "error": r["error"]}
                         for r in rows if r["candidate"] in pick]}


def from_tuned(rows: list[dict], tuned: dict[str, dict]) -> dict:
    """The exact join of a dump that names its tuned graphs (``suite_bench --dump`` since 2026-11-29 (c):
    ``tuned`` maps the rows' candidate numbers to the μGraphs); no estimate has to be matched."""
    keys = sorted(tuned, key=int)
    return {"fits": {}, "unknown": {}, "candidates": [tuned[k] for k in keys],
            "variants": [{"candidate": keys.index(str(r["candidate"])), "threads": r["threads"],
                          "options": r["options"], "median_us": r["median_us"],
                          "old_estimate_us": r["estimate_us"], "error": r["error"]}
                         for r in rows if str(r["candidate"]) in tuned]}


def shortlist_picks(raw: list[dict], estimate, n: int = 8) -> list[int]:
    """``pipeline.shortlist`` of the candidates in ``raw`` under the run's cost model (``estimate``): the
    dump's rows number the candidates in this order. Where ties left the estimates unsure, this decides."""
    from mirage_lab import pipeline

    saved = pipeline.estimate
    pipeline.estimate = estimate   # shortlist reads the package's name
    try:
        return pipeline.shortlist([from_dict(d) for d in raw], n)
    finally:
        pipeline.estimate = saved


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--e2e", type=Path, help="an e2e_bench JSON (rows in each program's 'tuning')")
    ap.add_argument("--program", help="with --e2e: which program")
    ap.add_argument("--candidates", type=Path, help="with --e2e: a JSON list of candidate μGraphs to match against")
    ap.add_argument("--search", type=float, default=0.0, help="with --e2e: search this many seconds for candidates")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--dump", type=Path, help="a suite_bench --dump file (rows and every candidate)")
    ap.add_argument("--max-candidates", type=int, default=8, help="with --dump: the run's max_candidates")
    ap.add_argument("--old-model", default=OLD_MODEL,
                    help="git commit of the cost model the run had, or 'current' (runs made with this tree's model)")
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args(argv)
    estimate = old_estimate(a.old_model)
    if a.dump is not None:
        d = json.loads(a.dump.read_text())
        name, rows, raw, source = d["program"], d["variants"], d["candidates"], a.dump.name
        device = d.get("device")
    else:
        rec = next(r for r in json.loads(a.e2e.read_text()) if r["program"] == a.program)
        name, rows, source, device = a.program, rec["tuning"], a.e2e.name, rec.get("device")
        raw = json.loads(a.candidates.read_text()) if a.candidates else []
        if a.search:
            raw += search_candidates(a.program, a.search, a.workers)
    if a.dump is not None and d.get("tuned"):
        joined = from_tuned(rows, d["tuned"])
    else:
        joined = match(rows, raw, estimate)
    if a.dump is not None and not d.get("tuned"):   # the run's own shortlist, where every row group fits its pick
        picks = shortlist_picks(raw, estimate, a.max_candidates)
        fits_all = all(picks[c] in js for c, js in joined["fits"].items() if c < len(picks))
        print(f"  the run's shortlist {picks}: {'consistent with' if fits_all else 'CONTRADICTS'} the estimates")
        if fits_all:
            joined = match(rows, raw, estimate, given={c: picks[c] for c in joined["fits"] if c < len(picks)})
    joined.pop("fits")
    out = {"program": name, "device": device, "source": source, **joined}
    print(f"{name}: {len(out['variants'])} of {len(rows)} rows matched to {len(out['candidates'])} candidates; "
          f"shortlist entries left out (no candidate, or several that fit): {out['unknown']}")
    a.out.write_text(json.dumps([out]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
