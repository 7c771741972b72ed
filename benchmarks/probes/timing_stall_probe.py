"""Does a busy Python thread inflate a timing? ``runtime.profile.time_calls`` with pure-Python threads holding the GIL.

A thread of the tuner's process that holds the GIL (torch.compile building beside the tuner, a widget's
thread) delays the host between a CUDA event and its call; if the GPU has caught up with the host by
then, the event pair measures the stall. ``time_calls`` keeps only batches the host queued ahead of the
GPU; "old" sets ``MAX_STALLED_BATCHES = 0`` (every batch kept, as before 2026-11-28 night).

    python benchmarks/probes/timing_stall_probe.py          # a GPU: one add over 4M floats, 100 repeats
"""
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

from mirage_lab.runtime import profile as prof  # noqa: E402


def run(label: str, hogs: int, max_stalled: int, calls) -> None:
    prof.MAX_STALLED_BATCHES = max_stalled
    stop = threading.Event()

    def hog() -> None:
        while not stop.is_set():
            sum(range(2000))

    ts = [threading.Thread(target=hog, daemon=True) for _ in range(hogs)]
    for t in ts:
        t.start()
    t0 = time.time()
    try:
        t = prof.time_calls(calls, repeats=100)
    finally:
        stop.set()
        for th in ts:
            th.join()
    print(f"| {label} | {t.median_us:.2f} | {t.p90_us:.2f} | {t.extra} | {time.time() - t0:.1f} |")


def main() -> None:
    x = torch.randn(1 << 22, device="cuda")
    y = torch.empty_like(x)
    calls = [lambda: torch.add(x, 1.0, out=y)]
    keep = prof.MAX_STALLED_BATCHES
    print("| case | median µs | p90 µs | extra | seconds |\n|---|---:|---:|---|---:|")
    for label, hogs, m in [("quiet", 0, keep), ("2 GIL hogs, old (every batch kept)", 2, 0),
                           ("2 GIL hogs, new", 2, keep), ("1 GIL hog, new", 1, keep)]:
        run(label, hogs, m, calls)


if __name__ == "__main__":
    main()
