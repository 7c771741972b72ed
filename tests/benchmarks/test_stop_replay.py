"""benchmarks/stop_replay.py: the stopping rule replayed on stored H100 records, on a CPU."""
from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import stop_replay as sr  # noqa: E402

from mirage_lab.pipeline.stopping import KIND_SAFETY  # noqa: E402

README_RECORD = ROOT / "benchmarks" / "found" / "e2e_h100_2026-11-27_warmup.json"


def test_the_readme_record_keeps_its_winner_with_fewer_variants_timed():
    (rec,) = sr.e2e_records([str(README_RECORD)])
    for depth in (1, 32):   # one compile at a time, and the 16-core host's feed
        old = sr.replay(rec, kind=None, depth=depth, first_round=True)   # the rule and feed before
        new = sr.replay(rec, safety=KIND_SAFETY, depth=depth)
        assert sr.kept(rec, new) == (True, True), depth
        assert new.unknown == 0   # it timed only variants the run timed: the replay knows every time
        assert len(new.timed) < len(old.timed)
    # none of the FMA groups estimated past 3x the best measured were timed (they never came near)
    rows = sr.planned(rec.rows)
    timed = [rows[i] for i in sr.replay(rec, depth=32).timed]
    assert not [r for r in timed if not r.group[1] and r.estimate_us > 3 * rec.best()]


def test_the_replays_plan_order_is_the_tuners_on_the_stored_estimates():
    (rec,) = sr.e2e_records([str(README_RECORD)])
    rows = sr.planned(rec.rows)
    assert sorted(map(id, rows)) == sorted(map(id, rec.rows))
    # each candidate's best first, then one of every other group, then the rest, each part by estimate
    n_cand = len({r.candidate for r in rec.rows})
    firsts = rows[:n_cand]
    assert len({r.candidate for r in firsts}) == n_cand
    groups = {r.group for r in rec.rows}
    seconds = rows[n_cand:len(groups)]
    assert {r.group for r in firsts + seconds} == groups
    assert [r.estimate_us for r in seconds] == sorted(r.estimate_us for r in seconds)


def test_a_stored_error_is_a_failure_and_an_untimed_row_unknown(tmp_path):
    rows = [{"candidate": 0, "threads": 256, "options": "pw0-regNone-acc128-mma", "estimate_us": 10.0,
             "median_us": 12.0, "error": None},
            {"candidate": 0, "threads": 128, "options": "pw0-regNone-acc128-mma", "estimate_us": 11.0,
             "median_us": None, "error": "compile/launch: boom"},
            {"candidate": 0, "threads": 512, "options": "pw0-regNone-acc128-mma", "estimate_us": 11.0,
             "median_us": None, "error": None}]
    p = tmp_path / "e2e_h100_x.json"
    p.write_text(json.dumps([{"program": "p", "tuning": rows, "torch_graph_us": 50.0}]))
    (rec,) = sr.e2e_records([str(p)])
    o = sr.replay(rec, safety=KIND_SAFETY)
    assert len(o.timed) == 3 and o.unknown == 1 and o.best_us == 12.0 and rec.program_us == 50.0
