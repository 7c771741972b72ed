"""Compile processes started with the search, so tuning finds them warm and its first variants compiled.

A tuning's compile pool costs seconds before it compiles anything: each spawned process imports
torch and mirage_lab and initialises numba's CUDA target, and numba then takes seconds to tens of
seconds per generated kernel. ``superoptimize`` therefore starts the pool when its search starts
(:func:`start_early`): the processes warm up while the search runs, and each candidate the search
finds gets its most promising lowering variants compiled at once (:meth:`CompilePool.speculate`)
into numba's on-disk cache, where the tuner's own compile of the same variant then only loads it.
Speculation is bounded (a few compiles in flight, never more than the tuner would shortlist), so
the search keeps most of the CPU; the tuner then reuses the same pool (``autotune(pool=...)``).

    >>> pool = CompilePool(workers=8)                      # doctest: +SKIP
    >>> pool.speculate(candidate_graph)                    # doctest: +SKIP
    >>> report = autotune(program, candidates, pool=pool)  # doctest: +SKIP
    >>> pool.close()                                       # doctest: +SKIP
"""
from __future__ import annotations

import os
import threading
from typing import Any, Callable

from ..cpus import usable_cpus
from ..ir.kernel_graph import KernelGraph

SPECULATIVE_VARIANTS = 2   # per candidate: the cost model's best, and the best of the other kind (FMA / tensor cores)


# Compile processes run at this lower priority: started with the search, their warm-up (torch, numba's
# CUDA target: seconds of CPU each, 16 at once on the H100 host) and speculative compiles took the
# cores the search's workers were starting on; a search under superoptimize visited 1,000-3,500 states
# in its first 15-20 s against 25,000-34,000 in 20-23 s alone (2026-11-28, RESULTS.md). Niced, they fill
# idle cores; after the search they have the CPU to themselves, and the tuner's timing process keeps its own.
COMPILE_NICE = 10


def lower_priority(nice: int = COMPILE_NICE, *, thread: bool = False) -> None:
    """Run this process (or, with ``thread``, this thread and what it starts) ``nice`` steps lower; best effort."""
    try:
        if thread:   # Linux: a thread is a task of its own, and processes it starts inherit its niceness
            tid = threading.get_native_id()
            os.setpriority(os.PRIO_PROCESS, tid, os.getpriority(os.PRIO_PROCESS, tid) + nice)
        else:
            os.nice(nice)
    except (AttributeError, OSError):   # no priorities here (or not allowed): run as before
        pass


def _warm() -> None:
    """Pool initializer: import the runtime and initialise numba's CUDA target before any job arrives."""
    lower_priority()
    try:
        from numba import cuda

        from ..runtime import kernel  # noqa: F401  (imports torch and the code generator)

        if cuda.is_available():
            cuda.current_context()
    except Exception:  # a worker that cannot warm up still compiles (and reports) later
        pass


class CompilePool:
    """A ``spawn`` process pool for compiles, warmed at start, with bounded speculative compiles.

    ``workers``: processes (default: the CPU count). ``speculative``: at most this many speculative
    compiles in flight (default: a quarter of the workers, at least 1), and at most ``max_candidates``
    candidates speculated on.
    """

    def __init__(self, workers: int | None = None, *, speculative: int | None = None, max_candidates: int = 8,
                 cache_dir: str | os.PathLike | None = None) -> None:
        self.workers = max(1, workers or usable_cpus())
        self.speculative = max(1, speculative if speculative is not None else self.workers // 4)
        self.max_candidates = max_candidates
        self.cache_dir = None if cache_dir is None else str(cache_dir)
        from ..search.lifetime import spawn_pool

        self.pool = spawn_pool(self.workers, initializer=_warm)
        self._lock = threading.Lock()
        self._in_flight = 0
        self._speculated = 0
        self._best_us = float("inf")             # the best estimate among the candidates found so far
        self.submitted: list[str] = []           # "<content hash[:12]>/<options tag>" of each speculative compile
        self.done: dict[str, tuple[float, str | None]] = {}   # the same keys -> (seconds, error)
        self._closed = False
        self.program_warmup: Any = None          # a ProgramWarmup (torch.compile of the program), once started
        self._prewarm: Any = None                # its child process (.prewarm), started before the search

    # ------------------------------------------------------------------ speculation during the search
    def speculate(self, graph: KernelGraph) -> int:
        """Compile ``graph``'s most promising lowering variants now, if the bounds allow; how many were sent."""
        from ..runtime.kernel import compile_and_launch
        from . import SHORTLIST_BAND
        from .autotune import plan_variants

        with self._lock:
            if self._closed or self._speculated >= self.max_candidates or self._in_flight >= self.speculative:
                return 0
        try:
            planned = plan_variants([graph])[:SPECULATIVE_VARIANTS]
        except Exception:  # a candidate the code generator cannot lower: the tuner reports it
            return 0
        with self._lock:
            us = planned[0][1].us if planned else float("inf")
            if us > SHORTLIST_BAND * self._best_us:   # the shortlist will leave it out: no compile spent on it
                return 0
            self._best_us = min(self._best_us, us)
            self._speculated += 1
        sent = 0
        digest = graph.content_hash()[:12]
        for v, _ in planned:
            key = f"{digest}/t{v.threads}/{v.options.tag()}"
            with self._lock:
                if self._closed:
                    break
                self._in_flight += 1
            self.submitted.append(key)
            self.pool.apply_async(compile_and_launch, ((key, v.graph.to_json(), self.cache_dir, v.options.astuple()),),
                                  callback=self._landed, error_callback=lambda e, key=key: self._landed((key, 0.0, repr(e))))
            sent += 1
        return sent

    def _landed(self, res: tuple[str, float, str | None]) -> None:
        key, seconds, err = res
        with self._lock:
            self._in_flight -= 1
            self.done[key] = (seconds, err)

    def on_candidates(self, on_event: Callable[[Any], None] | None) -> Callable[[Any], None]:
        """``on_event`` that also speculates on every candidate the search finds."""
        from ..search.events import CandidateFound

        def cb(ev: Any) -> None:
            if isinstance(ev, CandidateFound):
                self.speculate(ev.graph)
            if on_event is not None:
                on_event(ev)

        return cb

    # ------------------------------------------------------------------ lifetime
    @staticmethod
    def _races_torch_compile(program: KernelGraph) -> bool:
        from .contenders import PROGRAM_LOWERINGS, program_lowerings_for

        return "torch.compile" in program_lowerings_for(program, PROGRAM_LOWERINGS, True)

    def prewarm_program(self, program: KernelGraph) -> None:
        """With ``MIRAGE_LAB_PREWARM=1``, start torch.compile of ``program`` in a child process now
        (:mod:`.prewarm`), before the search forks its workers: a process, not a thread, so the fork is safe."""
        from . import prewarm

        if prewarm.enabled() and self._races_torch_compile(program):
            try:
                self._prewarm = prewarm.Prewarm(program, "cuda")
            except Exception:  # noqa: BLE001 - no child to be had: the warm-up builds it in this process
                self._prewarm = None

    def preload_compiler(self, program: KernelGraph) -> None:
        """Import torch.compile's machinery now, in a thread the search's fork waits for, where the
        program will race torch.compile: the warm-up then starts with its imports done."""
        from .contenders import preload_compiler

        if self._races_torch_compile(program):
            preload_compiler()

    def warm_program(self, program: KernelGraph) -> None:
        """Start torch.compile of ``program`` in a background thread, for the tuner to take (where it will race)."""
        from .contenders import ProgramWarmup

        if self._races_torch_compile(program):
            self.program_warmup = ProgramWarmup(program, "torch.compile", prewarm=self._prewarm)

    def close(self) -> None:
        """Stop every process (compiles still running are dropped; finished ones stay in the disk cache)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if self.program_warmup is not None:   # a prewarm child no tuning took
            self.program_warmup.cancel()
        elif self._prewarm is not None:
            self._prewarm.cancel()
        self.pool.terminate()
        self.pool.join()

    def __enter__(self) -> "CompilePool":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class CompileFeed:
    """The tuner's compiles handed to a process pool a few at a time, in plan order, minus those ruled out.

    Submitted all at once, every planned variant was compiled in plan order even after the
    stopping rule (:mod:`.stopping`) had ruled it out, each taking a worker for 1–40 s (FMA
    lowerings of the seed programs; ``benchmarks/compile_time_bench.py``) ahead of the possible
    winners planned after it. The feed keeps at most ``depth`` compiles queued or running and,
    each time one lands, tops up from the variants still rated possible winners. ``submit(i)``
    sends plan index ``i`` to the pool; the caller reports each landed compile with :meth:`landed`.

        >>> sent = []
        >>> feed = CompileFeed(sent.append, depth=2)
        >>> feed.top_up(range(5)), sent            # two in flight
        (2, [0, 1])
        >>> feed.landed(0); feed.top_up([2, 4])    # 3 was ruled out meanwhile: never compiled
        1
        >>> feed.landed(1); feed.top_up([4]), sent
        (1, [0, 1, 2, 4])
    """

    def __init__(self, submit: Callable[[int], None], depth: int) -> None:
        self.submit = submit
        self.depth = max(1, depth)
        self.sent: set[int] = set()
        self.in_flight: set[int] = set()

    def top_up(self, possible: Any) -> int:
        """Send the first unsent of ``possible`` (plan indices, plan order) until ``depth`` are in flight."""
        n = 0
        for i in possible:
            if len(self.in_flight) >= self.depth:
                break
            if i in self.sent:
                continue
            self.sent.add(i)
            self.in_flight.add(i)
            self.submit(i)
            n += 1
        return n

    def landed(self, i: int) -> None:
        """Compile ``i`` came back (compiled, or failed)."""
        self.in_flight.discard(i)


def start_early(workers: int | None, max_candidates: int) -> CompilePool | None:
    """The pool ``superoptimize`` starts with its search where it will tune locally on a GPU; else ``None``."""
    from . import gpu_available

    if not gpu_available():
        return None
    try:
        return CompilePool(workers, max_candidates=max_candidates)
    except Exception:  # no processes to be had: tuning makes its own pool as before
        return None


__all__ = ["CompilePool", "CompileFeed", "start_early", "SPECULATIVE_VARIANTS"]
