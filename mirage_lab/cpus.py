"""How many CPUs this process may use: the default number of search and compile processes.

``os.cpu_count()`` counts the machine's CPUs, not this process's: under ``taskset``, a Slurm or
container CPU set, it started one search worker per CPU of the whole host. Python 3.13 has
``os.process_cpu_count()``; before it, the affinity mask says the same on Linux.

    >>> usable_cpus() >= 1
    True
"""
from __future__ import annotations

import os


def usable_cpus() -> int:
    """The CPUs this process may run on (at least 1)."""
    count = getattr(os, "process_cpu_count", None)
    if count is not None:
        return max(1, count() or 1)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):   # no affinity mask on this OS
        return max(1, os.cpu_count() or 1)


def one_blas_thread() -> None:
    """Limit this process's BLAS (numpy's OpenBLAS) to one thread, for the rest of its life.

    Each search worker is one of a pool sized to the cores, and its fingerprints' float64 products
    go through numpy's OpenBLAS, which starts a thread per core of the machine and spins them. On
    the 16-core H200 host 16 workers then ran about 16 threads each: the README's complete search
    took 30.8 s with 16 workers, 21.4 s with 8 (benchmarks/RESULTS.md, "2026-11-29"). A pool worker
    calls this once at its start; the caller's own process is left as it is.
    threadpoolctl (the library scikit-learn and joblib use for this) finds the BLAS that numpy
    loaded, whatever its symbol prefix, and sets its threads at run time, after the fork.
    """
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=1, user_api="blas")   # set now; nothing restores it in a worker
    except Exception:  # noqa: BLE001 - not installed, or no BLAS found: the workers run as before
        pass


__all__ = ["usable_cpus", "one_blas_thread"]
