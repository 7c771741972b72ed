"""kill -9 twice, once in the middle of a checkpoint write, then resume: no candidate lost, no task twice."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mirage_lab import examples as ex
from mirage_lab.search import CandidateFound, Finished, run_search, search
from mirage_lab.search.checkpoint import CheckpointRepaired

from .helpers import SMALL

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).with_name("search_script.py")


def start(*args) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT)] + [p for p in [os.environ.get("PYTHONPATH")] if p])}
    return subprocess.Popen([sys.executable, str(SCRIPT), *map(str, args)], cwd=ROOT, env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def records(path: Path) -> list[dict]:
    out = []
    for ln in path.read_bytes().split(b"\n")[1:]:
        try:
            out.append(json.loads(ln))
        except ValueError:
            pass
    return out


def wait_for(proc: subprocess.Popen, ready, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        assert proc.poll() is None, f"the search ended before it could be killed: {proc.stderr.read()[-2000:]}"
        assert time.monotonic() < deadline, "the search did not get far enough in time"
        time.sleep(0.05)


def kill(proc: subprocess.Popen) -> None:
    os.killpg(proc.pid, signal.SIGKILL)   # the search and its workers at once
    proc.wait()


def kill_twice_and_resume(tmp: Path) -> dict:
    """The scenario (also run by benchmarks/reliability_fuzz.py): counts of what was kept and lost."""
    cp = tmp / "search.ckpt"
    first = start(cp, 64)
    wait_for(first, lambda: cp.exists() and sum("done" in r for r in records(cp)) >= 10)
    kill(first)
    kept = records(cp)
    second = start(cp, 64, 4, tmp / "torn")   # resumes, writes 4 records, then dies half-way through the 5th
    wait_for(second, lambda: (tmp / "torn").exists())
    kill(second)
    assert not cp.read_bytes().endswith(b"\n"), "the second kill must leave a torn line"
    kept_before_torn = records(cp)
    g = ex.rms_norm_linear_program(4, 64, 64)
    with pytest.warns(CheckpointRepaired):
        events = list(search(g, workers=2, checkpoint=cp, **SMALL))
    fin = events[-1]
    fresh = run_search(g, workers=2, **SMALL)
    before = {json.loads(r["candidate"])["kernel_graph"].__repr__() for r in kept_before_torn if "candidate" in r}
    final = {json.loads(c.to_json())["kernel_graph"].__repr__() for c in fin.candidates}
    done = [r["done"] for r in records(cp) if "done" in r]
    return {"kills": 2, "done_after_first_kill": sum("done" in r for r in kept),
            "done_before_resume": sum("done" in r for r in kept_before_torn), "resumed": fin.resumed_subtrees,
            "complete": fin.complete, "tasks": fin.stats.subtrees_total, "done_records": len(done),
            "distinct_done": len(set(done)), "candidates": len(fin.candidates),
            "candidates_uninterrupted": len(fresh.candidates),
            "lost": len({c.content_hash() for c in fresh.candidates} - {c.content_hash() for c in fin.candidates})
            + len(before - final),
            "resumed_candidates": sum(1 for e in events if isinstance(e, CandidateFound) and e.info.get("resumed"))}


def test_kill_twice_once_mid_write_then_resume_loses_nothing(tmp_path):
    r = kill_twice_and_resume(tmp_path)
    assert r["complete"] and r["lost"] == 0 and r["candidates"] == r["candidates_uninterrupted"] > 0
    assert r["done_records"] == r["distinct_done"] == r["tasks"], r   # no task twice, none missing
    assert r["resumed"] == r["done_before_resume"] >= r["done_after_first_kill"], r   # every record kept counts
