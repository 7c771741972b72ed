"""The default number of worker processes follows the CPUs this process may use, not the host's."""
from __future__ import annotations

import os
import pytest

from mirage_lab.cpus import usable_cpus
from proc_helpers import run_python


def test_usable_cpus_is_the_affinity_mask_not_the_host():
    assert 1 <= usable_cpus() <= (os.cpu_count() or 1)


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="Linux affinity")
def test_a_search_pinned_to_one_cpu_starts_one_worker(tmp_path):
    # under taskset / a Slurm CPU set the search used to start one worker per CPU of the whole host
    out = run_python("""
import json, os
os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
from mirage_lab.search import executors
from mirage_lab.cpus import usable_cpus
print("RESULTS " + json.dumps([usable_cpus(), type(executors.make_executor(None, None)).__name__]))
""", tmp_path, timeout=120)
    assert out == [1, "Inline"]


def test_a_search_worker_runs_numpy_blas_on_one_thread(tmp_path):
    # numpy's OpenBLAS starts a thread per core in every process; with a search worker per core,
    # the H200 host's 16 workers ran ~16 threads each and the complete README search took 30.8 s
    # with 16 workers against 21.4 s with 8. The caller's own process keeps its threads.
    out = run_python("""
import json, multiprocessing as mp, os
from concurrent.futures import ProcessPoolExecutor
from threadpoolctl import threadpool_info
from mirage_lab.search import executors

def blas_threads():
    return sorted({i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"})

if __name__ == "__main__":
    before = blas_threads()
    with ProcessPoolExecutor(1, mp_context=mp.get_context("fork"), initializer=executors._pool_worker_init,
                             initargs=(os.getpid(), None)) as ex:
        worker = ex.submit(blas_threads).result()
    print("RESULTS " + json.dumps([before, worker, blas_threads()]))
""", tmp_path, timeout=120)
    before, worker, after = out
    assert worker == [1] and after == before and before   # numpy has a BLAS; only the worker is limited


def test_a_search_worker_runs_torch_on_one_thread_and_the_caller_keeps_its_threads(tmp_path):
    # a worker confirms each hit in float64 with torch, whose CPU ops start an OpenMP thread per core:
    # on the 16-core H200 host 8 workers ran 49 threads each there and Qwen-2.5 0.5B's SwiGLU search
    # visited 130 states in 17 s. The float check itself runs on one thread wherever it is called.
    out = run_python("""
import json, multiprocessing as mp, os
import torch
from concurrent.futures import ProcessPoolExecutor
from mirage_lab.search import executors

def torch_threads():
    return [torch.get_num_threads(), os.environ.get("OMP_NUM_THREADS")]

def float_check_threads():
    import mirage_lab as mi
    from mirage_lab.verify import float_check
    seen = []
    real = float_check._close
    float_check._close = lambda a, b, rtol: seen.append(torch.get_num_threads()) or real(a, b, rtol)
    g = mi.new_kernel_graph(); x = g.new_input((4, 8)); g.mark_output(g.exp(x))
    h = mi.new_kernel_graph(); y = h.new_input((4, 8)); h.mark_output(h.exp(y))
    res = float_check.float_equivalent(g, h, seed=1)
    return [bool(res.equal), sorted(set(seen)), torch.get_num_threads()]

if __name__ == "__main__":
    torch.set_num_threads(2)
    before = torch_threads()
    with ProcessPoolExecutor(1, mp_context=mp.get_context("fork"), initializer=executors._pool_worker_init,
                             initargs=(os.getpid(), None)) as ex:
        worker = ex.submit(torch_threads).result()
    print("RESULTS " + json.dumps([before, worker, torch_threads(), float_check_threads()]))
""", tmp_path, timeout=120)
    before, worker, after, check = out
    assert worker == [1, "1"] and after == before and before[0] == 2
    assert check == [True, [1], 2]   # compared on one thread; the caller's setting restored
