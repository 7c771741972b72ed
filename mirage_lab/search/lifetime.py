"""Helper processes and temporary folders that never outlive the search that made them.

A search's pool workers and its Manager run :func:`child_init` first: they ignore Ctrl-C
(the caller handles it and stops them through the cancel flag, so no worker prints a
``KeyboardInterrupt`` traceback) and exit when their parent dies, even by ``kill -9``:
on Linux the kernel signals them at once (``prctl(PR_SET_PDEATHSIG)`` through ctypes), and on
every platform a watchdog thread polls the parent's pid. Temporary folders a search makes
(its cancel flag's, multiprocessing's ``pymp-*``) get an owner file naming the process
that made them; :func:`remove_orphaned_temp` (run when a search starts) removes those whose
owner is gone, which only happens when it was killed before it could clean up.

    >>> owner_alive(os.getpid(), process_start_time(os.getpid()))
    True
"""
from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

OWNER_FILE = "mirage_lab_owner"
TEMP_PREFIXES = ("mirage_lab_cancel_", "pymp-")
WATCHDOG_POLL = 0.5            # seconds between two looks at the parent's pid
_PR_SET_PDEATHSIG = 1          # <linux/prctl.h>
_DEATH_SIGNAL = signal.SIGUSR1 if hasattr(signal, "SIGUSR1") else None


def child_init(parent_pid: int) -> None:
    """Run first in a search's helper process: ignore Ctrl-C, exit when ``parent_pid`` dies."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):   # born with it blocked (sigint_blocked): a pending one is dropped
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    exit_with_parent(parent_pid)


@contextmanager
def sigint_blocked() -> Iterator[None]:
    """Hold Ctrl-C back in this thread while it starts helper processes that run :func:`child_init`.

    A child inherits the signal mask (through fork, and exec for spawn), so it is born with SIGINT
    blocked and unblocks it only once it ignores it. Without this, a Ctrl-C that reaches a worker
    still starting up (before its initializer, e.g. a loaded machine) killed it with a traceback.
    The caller loses nothing: the signal waits, or goes to another of its threads.
    """
    if not hasattr(signal, "pthread_sigmask"):   # Windows: no masks (and no fork)
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


_SKIP_MAIN = threading.local()


@contextmanager
def main_not_reimported() -> Iterator[None]:
    """Processes started by spawn or forkserver in this block do not import the caller's script again.

    multiprocessing runs a script's top level again in each such child (as ``__mp_main__``), for
    objects defined there; our helpers are handed only mirage_lab's functions and plain data. A
    script that imports torch at its top level had each of 16 search workers import it again when
    the parent held CUDA (its workers then come from a forkserver): a second ``superoptimize`` in
    ``e2e_bench.py`` saw its first state 13.5-20 s after the call on the H200 host, against 4-5 s for
    the first (forked) one, the likely cause (not yet re-measured there). An unguarded script would
    even start a second search in each child.
    Applies to processes started by this thread; fork is unaffected (it copies the parent).
    """
    _install_preparation_filter()
    before = getattr(_SKIP_MAIN, "on", False)
    _SKIP_MAIN.on = True
    try:
        yield
    finally:
        _SKIP_MAIN.on = before


def spawn_pool(processes: int, **kw: Any) -> Any:
    """A ``multiprocessing`` pool of spawned processes that do not run the caller's script again
    (:func:`main_not_reimported`); ``kw`` go to ``Pool`` (``initializer``...)."""
    import multiprocessing as mp

    with main_not_reimported():
        return mp.get_context("spawn").Pool(processes, **kw)


def _install_preparation_filter() -> None:
    from multiprocessing import spawn

    if getattr(spawn.get_preparation_data, "_mirage_lab", False):
        return
    original = spawn.get_preparation_data

    def get_preparation_data(name: str) -> dict:
        data = original(name)
        if getattr(_SKIP_MAIN, "on", False):
            data.pop("init_main_from_path", None)
            data.pop("init_main_from_name", None)
        return data

    get_preparation_data._mirage_lab = True  # type: ignore[attr-defined]
    spawn.get_preparation_data = get_preparation_data


def exit_with_parent(parent_pid: int) -> None:
    """Make this process exit (silently) as soon as ``parent_pid`` is no longer its parent (or, for a
    child of a forkserver, as soon as ``parent_pid`` has ended)."""
    if os.getppid() != parent_pid:
        _exit_with_process(parent_pid)
        return

    def gone() -> bool:
        return os.getppid() != parent_pid

    if sys.platform.startswith("linux") and _DEATH_SIGNAL is not None:
        # The kernel sends the signal when the *thread* that forked us ends, too: the handler
        # exits only when the parent process is really gone (we were re-parented).
        signal.signal(_DEATH_SIGNAL, lambda signum, frame: _die() if gone() else None)
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, int(_DEATH_SIGNAL), 0, 0, 0)
        except (OSError, AttributeError):   # no prctl (another libc): the watchdog below still works
            pass
    if gone():   # the parent died before the signal was armed
        _die()

    def watch() -> None:
        while not gone():
            time.sleep(WATCHDOG_POLL)
        _die()

    threading.Thread(target=watch, daemon=True, name="mirage_lab-parent-watchdog").start()


def _exit_with_process(pid: int) -> None:
    """A forkserver's child: its parent, the server, lives while any of the server's children do (each holds
    the server's "alive" pipe), so neither the death signal nor the parent pid can tell that the search's
    process ``pid`` ended; a watchdog polls that process itself (a zombie counts as ended)."""
    import psutil

    started = process_start_time(pid)

    def alive() -> bool:
        try:
            return owner_alive(pid, started) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
        except psutil.Error:
            return False

    if started is None or not alive():
        _die()

    def watch() -> None:
        while alive():
            time.sleep(WATCHDOG_POLL)
        _die()

    threading.Thread(target=watch, daemon=True, name="mirage_lab-process-watchdog").start()


def _die() -> None:
    """Exit at once, without tracebacks, removing the multiprocessing folder this process used.

    The parent that would have removed it is dead; a forked child shares the parent's folder,
    a spawned one (the Manager) has its own.
    """
    try:
        from multiprocessing import process

        folder = process.current_process()._config.get("tempdir")
        if folder:
            shutil.rmtree(folder, ignore_errors=True)
    finally:
        os._exit(0)


# --------------------------------------------------------------------------- temporary folders
def process_start_time(pid: int) -> float | None:
    """When process ``pid`` started (seconds since the epoch), or None when there is none."""
    import psutil

    try:
        return psutil.Process(pid).create_time()
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return None


def owner_alive(pid: int, started: float | None) -> bool:
    """Is process ``pid``, started at ``started``, still running (not a new one with a recycled pid)?"""
    now = process_start_time(pid)
    return now is not None and (started is None or abs(now - started) < 1.0)


def mark_owned(folder: str | os.PathLike) -> None:
    """Write the owner file (this pid and its start time) into ``folder``."""
    pid = os.getpid()
    try:
        Path(folder, OWNER_FILE).write_text(f"{pid} {process_start_time(pid) or 0}\n")
    except OSError:   # a folder we cannot write to is not one we would remove either
        pass


def mark_multiprocessing_temp() -> None:
    """Mark this process's ``pymp-*`` folder (the Manager's socket lives there) as ours."""
    from multiprocessing import util

    mark_owned(util.get_temp_dir())


def remove_orphaned_temp(folder: str | None = None) -> list[str]:
    """Remove the search folders in ``folder`` (the temp dir) whose owner process is gone; their names."""
    root = Path(folder or tempfile.gettempdir())
    removed = []
    try:
        entries = list(root.iterdir())
    except OSError:
        return removed
    for d in entries:
        if not d.name.startswith(TEMP_PREFIXES):
            continue
        try:
            pid_s, started_s = (d / OWNER_FILE).read_text().split()[:2]
            pid, started = int(pid_s), float(started_s) or None
        except (OSError, ValueError):   # not ours (no owner file), or being written right now
            continue
        if pid != os.getpid() and not owner_alive(pid, started):
            shutil.rmtree(d, ignore_errors=True)
            removed.append(d.name)
    return removed
