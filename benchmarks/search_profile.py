"""Profile the μGraph search in one process: cProfile over the worker's task loop.

Runs :func:`mirage_lab.search.worker.run_tasks` in the main thread (so cProfile sees it) on
every task of a seed program, in the search's order, with numpy fingerprints, until the
search completes or ``--seconds`` pass. Prints states visited, states/s (a state is what
``SearchStats.states`` counts: every kernel-level and block-level state the generator
enters, as in ``search_bench.py``), states per CPU second of this process (per core, also
on a shared box) and the top functions by cumulative and by own time.

    python benchmarks/search_profile.py --program rmsnorm --seconds 60
    python benchmarks/search_profile.py --program gqa --small --no-profile   # states/s only
    python benchmarks/search_profile.py --program rmsnorm --tasks 300 --no-profile   # fixed work, for A/B
    PROF_OUT=/tmp/s.prof python benchmarks/search_profile.py --program rmsnorm       # also keep the cProfile stats

``--tasks N`` runs the first N subtrees to the end, ``--polls N`` stops at the generator's Nth
state check (``Generator._poll``, called as each state is entered), whichever comes first
(``--seconds`` still stops it): two versions of the search then visit the very same states
(the printed ``states`` must agree), and their CPU seconds compare them on a shared, loaded
box. A time limit reaches a different part of the search under a different load, and the
states of early and late subtrees do not cost the same. The process keeps freed memory warm as
the search's pool workers do (``mirage_lab.search.allocator``) unless ``--plain-malloc``.
"""
from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
# One core per search process: the states/s this prints are per core (BLAS threads off).
for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

from mirage_lab import examples as ex  # noqa: E402
from mirage_lab.search.config import SearchConfig  # noqa: E402
from mirage_lab.search.generator import Cancelled, Generator, Target  # noqa: E402
from mirage_lab.search.worker import run_tasks  # noqa: E402

PROGRAMS = {
    # name: (full-shape builder, small-shape builder, preset)
    "rmsnorm": (lambda: ex.rms_norm_linear_program(16, 4096, 4096), lambda: ex.rms_norm_linear_program(4, 256, 256),
                None),
    "mlp": (lambda: ex.gated_mlp_program(8, 4096, 4096), lambda: ex.gated_mlp_program(4, 64, 64), None),
    "gqa": (lambda: ex.gqa_program(2, 256, 64, 4096), lambda: ex.gqa_program(2, 32, 64, 256), "attention"),
    "gqa_decode": (lambda: ex.gqa_program(64, 1, 128, 4096), lambda: ex.gqa_program(4, 1, 16, 256), "attention"),
}


def run(program: str, small: bool, seconds: float, profile: bool, top: int, tasks: int | None = None,
        polls: int | None = None) -> dict:
    full, tiny, preset = PROGRAMS[program]
    graph = (tiny if small else full)()
    cfg = SearchConfig.from_args(preset, fingerprint_backend="numpy").with_program_ops(graph)
    n_tasks = len(Generator(Target(graph, cfg), cfg, fingerprint_backend="numpy").all_tasks())
    if tasks is not None:
        n_tasks = min(n_tasks, tasks)
    stop = Path(tempfile.mkdtemp()) / "stop"
    if polls is not None:
        _stop_after_polls(polls, stop)
    timer = threading.Timer(seconds, stop.touch)
    timer.start()
    prof = cProfile.Profile() if profile else None
    t0, c0 = time.perf_counter(), time.process_time()
    if prof:
        prof.enable()
    try:
        results = run_tasks(graph.to_json(), cfg, list(range(n_tasks)), None, str(stop))
    finally:
        if prof:
            prof.disable()
        timer.cancel()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    states = sum(r["stats"]["states"] for r in results)
    cands = sum(len(r["candidates"]) for r in results)
    done = sum(1 for r in results if not r["cancelled"])
    # states per CPU second: what one core does, also on a box shared with other work
    out = {"program": program, "small": small, "states": states, "wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
           "states_per_s": round(states / wall, 1), "states_per_cpu_s": round(states / cpu, 1), "candidates": cands, "subtrees": f"{done}/{n_tasks}",
           "complete": done == n_tasks}
    if prof:
        s = io.StringIO()
        if os.environ.get("PROF_OUT"):
            prof.dump_stats(os.environ["PROF_OUT"])
        st = pstats.Stats(prof, stream=s)
        st.sort_stats("cumulative").print_stats(top)
        st.sort_stats("tottime").print_stats(top)
        out["profile"] = s.getvalue()
    return out


def _stop_after_polls(n: int, stop: Path) -> None:
    """Make the generator stop (as a cancel does) at its ``n``-th state check: fixed work."""
    real = Generator._poll
    count = [0]

    def poll(self: Generator) -> None:
        count[0] += 1
        if count[0] >= n:
            stop.touch()
            raise Cancelled()
        real(self)

    Generator._poll = poll  # type: ignore[method-assign]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--program", default="rmsnorm", choices=sorted(PROGRAMS))
    ap.add_argument("--small", action="store_true", help="CPU test shapes (search_bench.py --small)")
    ap.add_argument("--seconds", type=float, default=60.0, help="stop the search after this long")
    ap.add_argument("--no-profile", action="store_true", help="only count states (no cProfile overhead)")
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--tasks", type=int, default=None, help="only the first N subtrees, to the end (fixed work)")
    ap.add_argument("--polls", type=int, default=None, help="stop at the generator's Nth state check (fixed work)")
    ap.add_argument("--plain-malloc", action="store_true",
                    help="leave glibc's allocator as it is (the search's pool workers keep freed memory: allocator.py)")
    args = ap.parse_args()
    if not args.plain_malloc:
        try:   # as a search's pool worker runs (checkouts without allocator.py: as they ran)
            from mirage_lab.search.allocator import keep_freed_memory
        except ImportError:
            pass
        else:
            keep_freed_memory()
    r = run(args.program, args.small, args.seconds, not args.no_profile, args.top, args.tasks, args.polls)
    prof = r.pop("profile", None)
    print(r, flush=True)
    if prof:
        print(prof)


if __name__ == "__main__":
    main()
