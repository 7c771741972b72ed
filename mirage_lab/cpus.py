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


__all__ = ["usable_cpus"]
