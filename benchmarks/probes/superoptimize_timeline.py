"""Where a superoptimize call's seconds and cores go: events and per-group CPU use, sampled every second.

Runs the README's ``graph.superoptimize()`` (RMSNorm+Linear 16x4096x4096, or ``--shape``) in this process
with a fresh cache, records the pipeline's events (search progress, candidates, tuning start, each variant,
the program's lowerings, the end) and, every ``--every`` seconds, the cores used by each group of
processes and threads: this process's main thread, its torch.compile warm-up thread, its other threads,
the search's forked workers, the spawned compile pool, and inductor's compile workers. Prints one row per
interval, then the phases' times.

    python benchmarks/probes/superoptimize_timeline.py                       # README example, defaults
    TORCHINDUCTOR_COMPILE_THREADS=1 python benchmarks/probes/superoptimize_timeline.py --tag ct1
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def _group(p, me_cmd: list[str]) -> str:
    try:
        cmd = p.cmdline()
    except Exception:  # noqa: BLE001 - gone
        return "gone"
    s = " ".join(cmd)
    if "compile_worker" in s or "_inductor" in s:
        return "inductor"
    if "multiprocessing" in s:     # spawn_main / forkserver: the compile pool (and the Manager)
        return "spawned"
    if cmd == me_cmd:
        return "forked"            # the search's workers
    return "other"


class Sampler:
    """Every ``every`` s: cores used per group since the last sample (CPU seconds / wall seconds)."""

    def __init__(self, every: float) -> None:
        import psutil

        self.psutil, self.every = psutil, every
        self.me = psutil.Process()
        self.me_cmd = self.me.cmdline()
        self.rows: list[dict] = []
        self._last: dict[tuple, float] = {}
        self._stop = threading.Event()
        self.t0 = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="sampler", daemon=True)
        self._thread.start()

    def _cpu(self) -> dict[tuple, float]:
        cur: dict[tuple, float] = {}
        names = {t.native_id: t.name for t in threading.enumerate()}
        for th in self.me.threads():
            name = names.get(th.id, "native")
            grp = ("main" if name == "MainThread" else "warmup" if name.startswith("mirage_lab-warm")
                   else "sampler" if name == "sampler" else "threads")
            cur[("self", th.id, grp)] = th.user_time + th.system_time
        for c in self.me.children(recursive=True):
            try:
                t = c.cpu_times()
                cur[("child", c.pid, _group(c, self.me_cmd))] = t.user + t.system
            except Exception:  # noqa: BLE001
                pass
        return cur

    def _run(self) -> None:
        prev_t = time.monotonic()
        self._last = self._cpu()
        while not self._stop.wait(self.every):
            now = time.monotonic()
            cur = self._cpu()
            dt = now - prev_t
            used: dict[str, float] = {}
            for k, v in cur.items():
                used[k[2]] = used.get(k[2], 0.0) + max(0.0, v - self._last.get(k, 0.0))
            n = {}
            for k in cur:
                n[k[2]] = n.get(k[2], 0) + 1
            self.rows.append({"t": round(now - self.t0, 1), "load": round(os.getloadavg()[0], 1),
                              "cores": {g: round(s / dt, 1) for g, s in used.items()}, "n": n})
            self._last, prev_t = cur, now

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", default="16x4096x4096")
    ap.add_argument("--every", type=float, default=1.0)
    ap.add_argument("--tag", default="default")
    ap.add_argument("--out", type=Path, default=None, help="write the rows and events as JSON here")
    ap.add_argument("--kwargs", default="{}", help="superoptimize keyword arguments, JSON")
    ap.add_argument("--preload", default=None,
                    help="comma-separated modules to preload before the search forks instead of "
                         "contenders.COMPILER_MODULES ('none': no preload)")
    a = ap.parse_args()
    os.environ.setdefault("MIRAGE_LAB_CACHE", tempfile.mkdtemp(prefix="mirage_lab_cache_"))
    import torch  # noqa: F401  (a user's script has it; not charged to the call)

    import mirage_lab as mi
    from mirage_lab import examples as ex
    from mirage_lab.pipeline import ProgramDone, ProgramWaiting, TuneFinished, TuneStarted, VariantDone
    from mirage_lab.search import CandidateFound, Progress

    if a.preload is not None:
        from mirage_lab.pipeline import contenders

        contenders.COMPILER_MODULES = () if a.preload == "none" else tuple(a.preload.split(","))
    g = ex.rms_norm_linear_program(*(int(v) for v in a.shape.split("x")))
    events: list[tuple[float, str, str]] = []
    first: dict[str, float] = {}
    t0 = time.monotonic()

    def on_event(ev) -> None:
        t = round(time.monotonic() - t0, 2)
        kind = type(ev).__name__
        first.setdefault(kind, t)
        if isinstance(ev, Progress):
            events.append((t, "states", str(ev.stats.states)))
        elif isinstance(ev, CandidateFound):
            events.append((t, "candidate", str(ev.index)))
        elif isinstance(ev, VariantDone):
            r = ev.result
            events.append((t, "variant", f"{r.median_us if r.median_us is None else round(r.median_us, 1)} us "
                                         f"compile {r.compile_s:.1f}s"))
        elif isinstance(ev, (TuneStarted, TuneFinished, ProgramDone, ProgramWaiting)):
            events.append((t, kind, str(getattr(ev, "lowering", "") or getattr(getattr(ev, "result", None), "lowering", ""))))

    s = Sampler(a.every)
    s.t0 = t0
    best = mi.superoptimize(g, on_event=on_event, progress=False, **json.loads(a.kwargs))
    total = time.monotonic() - t0
    s.stop()
    groups = ["main", "warmup", "threads", "forked", "spawned", "inductor", "other"]
    print(f"== {a.tag}: superoptimize {total:.1f} s; winner {best.winner} {best.latency_us} us; "
          f"stop: {getattr(best.report, 'stop_reason', '')}"[:400])
    print("t s  load " + " ".join(f"{g[:8]:>8}" for g in groups) + "   states cand variants")
    for row in s.rows:
        st = [e for e in events if e[0] <= row["t"]]
        states = next((e[2] for e in reversed(st) if e[1] == "states"), "0")
        cands = sum(1 for e in st if e[1] == "candidate")
        varis = sum(1 for e in st if e[1] == "variant")
        print(f"{row['t']:5.1f} {row['load']:5.1f} " + " ".join(
            f"{row['cores'].get(g, 0):4.1f}/{row['n'].get(g, 0):<3d}" for g in groups) + f"   {states:>6} {cands:4d} {varis:4d}")
    print("firsts:", json.dumps(first))
    print("program lowerings / tuning:", [e for e in events if e[1] in ("TuneStarted", "TuneFinished", "ProgramDone",
                                                                       "ProgramWaiting")])
    if a.out:
        a.out.write_text(json.dumps({"tag": a.tag, "total_s": total, "rows": s.rows, "events": events, "first": first}))


if __name__ == "__main__":
    main()
