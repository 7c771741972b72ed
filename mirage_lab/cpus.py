"""How many CPUs this process may use: the default number of search and compile processes.

``os.cpu_count()`` counts the machine's CPUs, not this process's: under ``taskset``, a Slurm or
container CPU set, it started one search worker per CPU of the whole host. Python 3.13 has
``os.process_cpu_count()``; before it, the affinity mask says the same on Linux.

    >>> usable_cpus() >= 1
    True
"""
from __future__ import annotations

import os
import sys


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
    """Limit this process's BLAS (numpy's OpenBLAS) and torch's CPU ops to one thread, for the rest of its life.

    Each search worker is one of a pool sized to the cores, and its fingerprints' float64 products
    go through numpy's OpenBLAS, which starts a thread per core of the machine and spins them. On
    the 16-core H200 host 16 workers then ran about 16 threads each: the README's complete search
    took 30.8 s with 16 workers, 21.4 s with 8 (benchmarks/RESULTS.md, "2026-11-29"). A pool worker
    calls this once at its start; the caller's own process is left as it is.
    threadpoolctl (the library scikit-learn and joblib use for this) finds the BLAS that numpy
    loaded, whatever its symbol prefix, and sets its threads at run time, after the fork.

    torch too: a worker confirms each hit in float64 with torch (``verify.float_check``), whose CPU ops
    start an OpenMP thread per core. On the H200 host 8 workers ran 49 threads each there, all 16 cores
    spinning in the confirmations' comparisons: Qwen-2.5 0.5B's SwiGLU search visited 130 states in 17 s
    (py-spy, RESULTS.md "2026-11-29 (e)"); on the 2-core box the same search completes (31,725 states) in
    19 s. torch, where this process has imported it, gets one thread now; one imported later reads
    ``OMP_NUM_THREADS``.
    """
    os.environ["OMP_NUM_THREADS"] = "1"
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=1, user_api="blas")   # set now; nothing restores it in a worker
    except Exception:  # noqa: BLE001 - not installed, or no BLAS found: the workers run as before
        pass
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            torch.set_num_threads(1)
        except Exception:  # noqa: BLE001 - a torch without CPU threading: nothing to limit
            pass


__all__ = ["usable_cpus", "one_blas_thread"]
