"""Where a search's tasks run: in a thread, on a ``concurrent.futures`` executor, or on Dask.

Each executor here has the same small interface: ``make_channel()`` (a queue the workers
put messages on), ``submit_all(calls)`` (one future per chunk of tasks, running
:func:`~.worker.run_tasks`), ``shutdown()``, and ``idle()`` (nothing it started can still
be running). :func:`make_executor` picks one from the ``workers``/``executor`` arguments.
"""
from __future__ import annotations

import gc
import os
import queue as queue_mod
import sys
import threading
import time
import weakref
from concurrent.futures import Executor, ProcessPoolExecutor
from multiprocessing.managers import SyncManager
from typing import Any

from ..cpus import one_blas_thread, usable_cpus
from ..errors import MirageLabError
from .allocator import keep_freed_memory
from .inputs import SearchInputError
from .lifetime import child_init, main_not_reimported, mark_multiprocessing_temp, sigint_blocked
from .worker import run_tasks


class Inline:
    """Runs tasks one after another in a background thread (``workers=1``)."""

    def __init__(self) -> None:
        self._thread: threading.Thread | None = None

    def make_channel(self) -> Any:
        return queue_mod.Queue()

    def submit_all(self, calls: list[tuple]) -> list[Any]:
        futs = [ThreadFuture() for _ in calls]

        def work() -> None:
            for fut, args in zip(futs, calls):
                if fut.cancelled():
                    continue
                try:
                    fut.set(run_tasks(*args))
                except BaseException as e:  # surfaced to the caller as an error event
                    fut.set_error(e)

        self._thread = threading.Thread(target=work, daemon=True, name="mirage_lab-search")
        self._thread.start()
        return futs

    def shutdown(self) -> None:
        pass

    def idle(self) -> bool:
        # A future cancelled while it runs reads as cancelled; the thread says when it stopped.
        return self._thread is None or not self._thread.is_alive()


class ThreadFuture:
    """The little of ``concurrent.futures.Future`` the search uses, for :class:`Inline`."""

    def __init__(self) -> None:
        self._done = threading.Event()
        self._res: Any = None
        self._err: BaseException | None = None
        self._cancelled = False

    def set(self, r: Any) -> None:
        self._res = r
        self._done.set()

    def set_error(self, e: BaseException) -> None:
        self._err = e
        self._done.set()

    def done(self) -> bool:
        return self._done.is_set()

    def cancelled(self) -> bool:
        return self._cancelled

    def cancel(self) -> bool:
        if self._done.is_set():
            return False
        self._cancelled = True
        return True

    def result(self) -> Any:
        if self._err is not None:
            raise self._err
        return self._res



def _parent_holds_cuda() -> bool:
    torch = sys.modules.get("torch")
    try:
        return bool(torch is not None and torch.cuda.is_initialized())
    except Exception:  # a CPU build or a broken driver: no context to lose
        return False

# Our earlier searches' executors, whose manager threads may still be winding down (shutdown(wait=False)).
_EARLIER: "weakref.WeakSet[ProcessPoolExecutor]" = weakref.WeakSet()


# Threads this process must finish before it forks search workers (join_before_fork).
_JOIN_BEFORE_FORK: "list[threading.Thread]" = []
JOIN_BEFORE_FORK_S = 60.0


def join_before_fork(thread: threading.Thread) -> None:
    """Have the next search's fork wait for ``thread`` (at most ``JOIN_BEFORE_FORK_S``).

    A thread that runs while this process forks leaves its locks (the import locks of the
    modules it is importing, say) held in every child; a background thread that imports
    registers here, and runs alongside whatever this process does before its search forks.
    """
    _JOIN_BEFORE_FORK[:] = [t for t in _JOIN_BEFORE_FORK if t.is_alive()]   # searches that never fork
    _JOIN_BEFORE_FORK.append(thread)                                           # (forkserver) leave none behind


def before_fork(wait: float = 2.0) -> None:
    """Make this process safe to fork search workers from: earlier pools gone, their garbage collected.

    A forked child inherits every lock as it was at the fork. An earlier search's executor, left
    to shut down in the background, is often cyclic garbage not yet collected; when the child's
    first collection ran its weakref callback, that callback waited on the executor's
    ``shutdown_lock``, copied while the parent's manager thread held it: the child hung for good
    and the whole search visited 0 states (H100 host, 2026-11-28: 1 search in 3 when several ran
    in one process, py-spy stack in RESULTS.md). So the earlier pools' manager threads get
    ``wait`` seconds to finish (their workers stop at the cancel flag), and the garbage is
    collected here, where the locks work, before forking.
    """
    while _JOIN_BEFORE_FORK:
        _JOIN_BEFORE_FORK.pop().join(JOIN_BEFORE_FORK_S)
    deadline = time.monotonic() + wait
    for ex in list(_EARLIER):
        t = getattr(ex, "_executor_manager_thread", None)
        if t is not None and t.is_alive():
            t.join(max(0.0, deadline - time.monotonic()))
    gc.collect()


# How many of a pool's workers may fingerprint on the GPU when the backend is "auto"; the rest use numpy.
# A CUDA context per worker made start-up grow with the workers (contexts are created one at a time):
# on an H200 host with 16 workers the first state came after 9.8 s with every worker on CUDA, 2.7 s with
# numpy; with 64 workers none came within 12 s (benchmarks/probes/worker_start.py, RESULTS.md 2026-11-28).
# With 4 of 16 on CUDA the first state still came at 4.4 s against 2.8 on numpy, the first candidate at 10.1
# against 7.6 s, and 1,071 states were visited in 12 s against 1,748 (RESULTS.md 2026-11-29): none now.
# A one-process search (workers=1) still fingerprints on the GPU where there is one.
CUDA_FINGERPRINT_WORKERS = 0


# Modules a forkserver imports once, so that its children start with them loaded.
FORKSERVER_PRELOAD = ["mirage_lab.search.worker", "mirage_lab.search.generator", "numpy", "z3"]


class ScriptReimportError(MirageLabError, RuntimeError):
    """A search's helper process, started by forkserver or spawn, died importing the caller's script again."""


def script_reimport_hint(method: str) -> str:
    """Why a helper started by ``method`` can die at once: it imports the caller's script again, and an
    unguarded script starts a search there too (multiprocessing refuses that: "bootstrapping phase")."""
    path = getattr(sys.modules.get("__main__"), "__file__", None)
    if method == "fork" or not path:
        return ""
    why = ("this process already holds a CUDA context, which forked workers could not use"
           if os.environ.get("MIRAGE_LAB_SEARCH_START") is None else f"MIRAGE_LAB_SEARCH_START={method}")
    return (f" The search's workers start by {method} because {why}, and {method} imports {path} again in "
            f"each of them: put that script's top-level code under `if __name__ == \"__main__\":`, or run "
            f"the search before the script first uses the GPU.")


def start_method() -> str:
    """How a search's processes start: ``fork`` on Linux while this process holds no CUDA context.

    fork works from notebooks and from scripts without a ``__main__`` guard (spawn and forkserver
    re-import the caller's script). A forked child cannot use a CUDA context its parent holds, so a
    caller that has already used the GPU (a notebook that made CUDA tensors, any superoptimize after a
    tuning) gets its workers from a forkserver: a clean process, started once, that never touches
    CUDA and forks each worker with mirage_lab already imported. Spawned workers each imported it
    again: the first state came at 7.0 s instead of 2.7 s with 16 workers on an H200 host, and never
    within 12 s with 64. On the 2-core CPU box, two searches in one process: spawn 2.7 and 2.4 s to the
    first state, forkserver 2.7 and 1.0 s, fork 1.9 and 0.6 s. ``MIRAGE_LAB_SEARCH_START`` overrides it
    (fork, forkserver or spawn). Our forkserver and spawn children do not run the caller's script
    again (:func:`.lifetime.main_not_reimported`): with a script that imports torch at its top level,
    two searches in one process on the CPU box reached their first state after 7.0 and 3.3 s with the
    re-import, 3.2 and 0.8 s without (2 workers).
    """
    forced = os.environ.get("MIRAGE_LAB_SEARCH_START")
    if forced:
        if forced not in ("fork", "forkserver", "spawn"):
            raise SearchInputError(f"MIRAGE_LAB_SEARCH_START={forced!r}: use fork, forkserver or spawn")
        return forced
    if not sys.platform.startswith("linux"):
        return "spawn"
    return "forkserver" if _parent_holds_cuda() else "fork"


def _pool_worker_init(parent: int, cuda_slots: Any = None) -> None:
    """A pool worker's first call: the lifetime rules, freed memory kept warm (allocator.py), and
    whether it may take one of the pool's ``cuda_slots`` for GPU fingerprints."""
    child_init(parent)
    keep_freed_memory()
    one_blas_thread()   # one worker per core: its BLAS must not start a thread per core too
    if cuda_slots is not None:
        from . import arrays

        with cuda_slots.get_lock():
            arrays.CUDA_FINGERPRINTS_ALLOWED = cuda_slots.value > 0
            if arrays.CUDA_FINGERPRINTS_ALLOWED:
                cuda_slots.value -= 1


class Pool:
    """A ``concurrent.futures`` executor (ours or the caller's) with a Manager queue for progress."""

    def __init__(self, executor: Executor | None, workers: int) -> None:
        import multiprocessing as mp

        self._own = executor is None
        ctx = mp.get_context(start_method())
        self._fork = ctx.get_start_method() == "fork"
        if self._fork:
            before_fork()   # the Manager forks below, the workers at the first submit
        elif ctx.get_start_method() == "forkserver":
            ctx.set_forkserver_preload(FORKSERVER_PRELOAD)   # read when the server starts (once per process)
        # Our workers and the Manager ignore Ctrl-C and exit when this process dies (lifetime.py).
        parent = os.getpid()
        slots = ctx.Value("i", CUDA_FINGERPRINT_WORKERS) if executor is None else None
        self.executor = executor or ProcessPoolExecutor(max_workers=workers, mp_context=ctx,
                                                        initializer=_pool_worker_init, initargs=(parent, slots))
        if self._own:
            _EARLIER.add(self.executor)
        mark_multiprocessing_temp()   # before the Manager starts: a forked one puts its socket there
        self._manager = SyncManager(ctx=ctx)
        try:
            with sigint_blocked(), main_not_reimported():   # until the child ignores Ctrl-C (lifetime.py)
                self._manager.start(child_init, (parent,))
        except (EOFError, OSError) as e:   # the helper died while starting: say why where we can
            hint = script_reimport_hint(ctx.get_start_method())
            if not hint:
                raise
            self.executor.shutdown(wait=False, cancel_futures=True)
            raise ScriptReimportError(f"the search's helper process died while starting "
                                      f"({type(e).__name__}).{hint}") from e
        self._futures: list[Any] = []

    def make_channel(self) -> Any:
        return self._manager.Queue()

    def submit_all(self, calls: list[tuple]) -> list[Any]:
        if self._fork:
            gc.collect()    # the workers fork at the first submit (before_fork)
        # the first submit starts our pool's workers (all at once with fork; one per submit otherwise)
        with sigint_blocked(), main_not_reimported():
            self._futures = [self.executor.submit(run_tasks, *args) for args in calls]
        return self._futures

    def shutdown(self) -> None:
        if self._own:
            self.executor.shutdown(wait=False, cancel_futures=True)
        # Calls already handed to a worker cannot be cancelled: they still unpickle their
        # channel (a proxy that connects to the Manager) and then see the cancel flag. So the
        # Manager stays up until no call can still start; stopping it earlier made each such
        # worker die with a FileNotFoundError traceback.
        if self.idle():
            self._manager.shutdown()
            return

        def wait() -> None:
            while not self.idle():
                time.sleep(0.05)
            self._manager.shutdown()

        threading.Thread(target=wait, daemon=True, name="mirage_lab-search-manager-stop").start()

    def idle(self) -> bool:
        return all(f.done() for f in self._futures)


class Dask:
    """A Dask ``distributed`` client; progress through a ``distributed.Queue``."""

    def __init__(self, client_or_address: Any) -> None:
        from distributed import Client

        self._own = isinstance(client_or_address, str)
        self.client = Client(client_or_address) if self._own else client_or_address
        self._futures: list[Any] = []

    def make_channel(self) -> Any:
        from distributed import Queue

        return Queue(client=self.client)

    def submit_all(self, calls: list[tuple]) -> list[Any]:
        self._futures = [self.client.submit(run_tasks, *args, pure=False) for args in calls]
        return self._futures

    def shutdown(self) -> None:
        if self._own:
            self.client.close()

    def idle(self) -> bool:
        return all(f.done() for f in self._futures)


def check_workers(workers: Any) -> None:
    """Refuse a ``workers`` that is not None or a positive int (``"two"``, ``0``, ``2.0``, ``True``)."""
    if workers is not None and (not isinstance(workers, int) or isinstance(workers, bool) or workers < 1):
        raise SearchInputError(f"workers={workers!r}: pass a positive int (1 runs in this process), "
                               "or None for one worker per CPU core")


def make_executor(executor: Any, workers: int | None) -> Inline | Pool | Dask:
    """The executor for ``search(executor=..., workers=...)``."""
    check_workers(workers)
    if executor is None:
        n = workers if workers is not None else usable_cpus()
        if n <= 1:
            return Inline()
        return Pool(None, n)
    if isinstance(executor, str) and executor == "inline":
        return Inline()
    if isinstance(executor, str):
        return Dask(executor)
    if isinstance(executor, Executor):
        return Pool(executor, workers or 1)
    mod = type(executor).__module__
    if mod.startswith("distributed"):
        return Dask(executor)
    raise SearchInputError(
        f"executor={executor!r}: use None (a local process pool), 'inline', a concurrent.futures.Executor, "
        "a dask distributed.Client or a scheduler address like 'tcp://host:8786'"
    )


def drain(channel: Any) -> tuple[list[tuple], OSError | EOFError | None]:
    """The messages waiting in ``channel``, without blocking; and the error, if the channel broke.

    A broken channel (a Manager or scheduler connection gone: ``OSError``, ``EOFError``) ends
    the draining and is returned, with what was read before it, for the caller to report.
    Any other exception is a bug and propagates.
    """
    out: list[tuple] = []
    while True:
        try:
            if hasattr(channel, "get_nowait"):
                out.append(channel.get_nowait())
            else:  # distributed.Queue
                if channel.qsize() == 0:
                    break
                out.append(channel.get(timeout=0.05))
        except (queue_mod.Empty, TimeoutError):   # nothing more now
            break
        except (OSError, EOFError) as e:
            return out, e
    return out, None
