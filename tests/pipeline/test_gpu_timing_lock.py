"""Workers that share one GPU time one at a time (GpuExclusiveTimer): their timed sections never overlap."""
from __future__ import annotations

import threading
import time

from mirage_lab.pipeline.distributed import GpuExclusiveTimer


class SlowTimer:
    """Records when each timing starts and ends; a timing takes 50 ms."""

    def __init__(self, log: list[tuple[str, float, float]]) -> None:
        self.log = log

    def graph(self, name, check_inputs, capture, inputs, repeats):
        t0 = time.perf_counter()
        time.sleep(0.05)
        self.log.append((name, t0, time.perf_counter()))
        return name

    def eager(self, name, fn, inputs, repeats):
        return self.graph(name, None, None, inputs, repeats)


def test_two_workers_sharing_a_card_never_time_at_once(tmp_path):
    log: list[tuple[str, float, float]] = []
    path = str(tmp_path / "card.lock")
    # two timers as two worker sessions make them: separate lock objects on one card's lock file
    timers = [GpuExclusiveTimer(SlowTimer(log), path) for _ in range(2)]

    def work(k: int) -> None:
        for i in range(4):
            assert timers[k].graph(f"w{k}-{i}", None, None, [], 1) == f"w{k}-{i}"   # the inner result passes through
            assert timers[k].eager(f"w{k}-e{i}", None, [], 1) == f"w{k}-e{i}"

    threads = [threading.Thread(target=work, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    spans = sorted((a, b) for _, a, b in log)
    assert len(spans) == 16
    assert all(prev_end <= start for (_, prev_end), (start, _) in zip(spans, spans[1:])), spans


def test_different_cards_do_not_wait_for_each_other(tmp_path):
    log: list[tuple[str, float, float]] = []
    timers = [GpuExclusiveTimer(SlowTimer(log), str(tmp_path / f"card{k}.lock")) for k in range(2)]
    threads = [threading.Thread(target=lambda k=k: timers[k].graph(f"w{k}", None, None, [], 1)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    (_, a0, b0), (_, a1, b1) = sorted(log, key=lambda r: r[1])
    assert a1 < b0   # the second started before the first ended: no shared lock
