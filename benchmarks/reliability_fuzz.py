"""Reliability counts for inputs, checkpoints and processes (issue 21), as in benchmarks/RESULTS.md.

    python benchmarks/reliability_fuzz.py                        # 2,000 JSON, 1,000 builder, 1,000 checkpoint cases
    python benchmarks/reliability_fuzz.py --json 5000 --kills 3  # more

Runs the properties of tests/ir/test_json_fuzz.py, tests/ir/test_builder_fuzz.py and
tests/search/test_checkpoint_fuzz.py with hypothesis at ``--json``/``--builder``/``--checkpoint``
examples each (CI runs 100-150), counting each case's outcome; a raw exception (anything but
a MirageLabError) or a wrong-kind value accepted silently stops hypothesis and is reported
with its shrunk example. Then ``--kills`` rounds of the kill -9 scenario of
tests/search/test_kill_resume.py (two kills, the second in the middle of a checkpoint write)
and ``--kills`` rounds of killing a searching process alone (tests/search/test_lifetime.py).
Prints a JSON summary and writes it to ``--out``.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))


def fuzz(name: str, strategy, check, n: int) -> dict:
    """Run ``check`` on ``n`` examples of ``strategy``; the outcome counts, or the first raw failure."""
    from hypothesis import HealthCheck, given, settings

    outcomes: Counter = Counter()

    @settings(max_examples=n, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(strategy)
    def run(case):
        outcomes[check(case)] += 1

    t0 = time.monotonic()
    failure = None
    try:
        run()
    except Exception as e:   # hypothesis re-raises the shrunk failing example's error
        failure = f"{type(e).__name__}: {str(e)[:500]}"
    return {"fuzzer": name, "cases": sum(outcomes.values()), "outcomes": dict(outcomes),
            "raw_exceptions": 0 if failure is None else 1, "failure": failure,
            "seconds": round(time.monotonic() - t0, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=int, default=2000)
    ap.add_argument("--builder", type=int, default=1000)
    ap.add_argument("--checkpoint", type=int, default=1000)
    ap.add_argument("--kills", type=int, default=2, help="rounds of each kill scenario")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "notes" / "reliability_fuzz.json"))
    args = ap.parse_args()

    from ir.test_builder_fuzz import CASES as BUILDER_CASES, check_call
    from ir.test_json_fuzz import CASES as JSON_CASES, check_text
    from search.test_checkpoint_fuzz import CORRUPTIONS, check_corruption
    from search.test_kill_resume import kill_twice_and_resume
    from search.test_lifetime import parent_killed

    def checkpoint_case(case):
        with tempfile.TemporaryDirectory() as d:
            return check_corruption(*case, Path(d))

    report = {"fuzzers": [fuzz("json loader", JSON_CASES, check_text, args.json),
                          fuzz("builder", BUILDER_CASES, lambda c: check_call(*c), args.builder),
                          fuzz("checkpoint reader", CORRUPTIONS, checkpoint_case, args.checkpoint)],
              "kill_twice_and_resume": [], "parent_killed": []}
    for _ in range(args.kills):
        with tempfile.TemporaryDirectory() as d:
            report["kill_twice_and_resume"].append(kill_twice_and_resume(Path(d)))
        with tempfile.TemporaryDirectory() as d:
            report["parent_killed"].append(parent_killed(Path(d)))
    text = json.dumps(report, indent=1)
    print(text)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
