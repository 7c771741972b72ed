"""Forking search workers safely: an earlier search's executor must not reach the fork as garbage."""
from __future__ import annotations

import gc
import sys
import weakref
from concurrent.futures import ProcessPoolExecutor

import pytest

from mirage_lab.search import executors
from mirage_lab.search.executors import Pool, before_fork

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fork start method")


def _square(x: int) -> int:
    return x * x


def test_before_fork_collects_an_earlier_executor_left_as_cyclic_garbage():
    # The H100 hang: a child collected this garbage and its weakref callback waited on a lock
    # copied while held. Collected in the parent before the fork, it never reaches a child.
    import multiprocessing as mp

    ex = ProcessPoolExecutor(max_workers=1, mp_context=mp.get_context("fork"))
    assert ex.submit(_square, 3).result() == 9
    ex.shutdown(wait=False)
    holder = {"ex": ex}
    holder["self"] = holder          # a cycle: only the collector frees it
    ref = weakref.ref(ex)
    gc.disable()
    try:
        del ex, holder
        assert ref() is not None     # still there: a fork now would copy it
        before_fork()
        assert ref() is None
    finally:
        gc.enable()


def test_a_pool_waits_for_the_earlier_pools_manager_thread():
    first = Pool(None, 2)
    assert first.executor.submit(_square, 4).result() == 16
    first.shutdown()
    second = Pool(None, 2)      # before_fork joined the first executor's manager thread
    try:
        t = first.executor._executor_manager_thread
        assert t is None or not t.is_alive()
        assert first.executor in executors._EARLIER
        assert second.executor.submit(_square, 5).result() == 25
    finally:
        second.shutdown()
        second.executor.shutdown(wait=True)


def _cuda_claim(pause: float) -> tuple[int, bool | None]:
    import os
    import time

    from mirage_lab.search import arrays

    time.sleep(pause)   # holds this worker, so every worker takes a call
    return os.getpid(), arrays.CUDA_FINGERPRINTS_ALLOWED


def test_only_a_few_pool_workers_may_fingerprint_on_the_gpu(monkeypatch):
    # A CUDA context per worker made a 64-worker search visit no state in 12 s; "auto" workers past the
    # pool's slots use numpy (the same fingerprints)
    monkeypatch.setattr(executors, "CUDA_FINGERPRINT_WORKERS", 2)
    pool = Pool(None, 4)
    try:
        # each call holds its worker long enough for all four to start, also on a loaded 2-core box (with 0.5 s,
        # one run under pytest -n 2 saw a worker take two calls)
        futs = [pool.executor.submit(_cuda_claim, 3.0) for _ in range(4)]
        claims = dict(f.result(timeout=60) for f in futs)
    finally:
        pool.shutdown()
    assert len(claims) == 4, claims
    assert sorted(claims.values()) == [False, False, True, True]


def test_auto_fingerprints_fall_back_to_numpy_in_a_worker_without_a_gpu_slot(monkeypatch):
    from mirage_lab.search import arrays

    def resolve(b):   # must not be asked: numba's cuda.is_available() initialises the driver
        assert b == "numpy", b
        return b

    monkeypatch.setattr(arrays, "resolve_backend", resolve)
    monkeypatch.setattr(arrays, "CUDA_FINGERPRINTS_ALLOWED", False)
    assert arrays.get_arrays("auto").name == "numpy"


def test_a_process_holding_cuda_gets_its_workers_from_a_forkserver(monkeypatch):
    from mirage_lab.search.inputs import SearchInputError

    monkeypatch.delenv("MIRAGE_LAB_SEARCH_START", raising=False)
    monkeypatch.setattr(executors, "_parent_holds_cuda", lambda: True)
    assert executors.start_method() == "forkserver"   # spawned workers each imported mirage_lab again
    monkeypatch.setattr(executors, "_parent_holds_cuda", lambda: False)
    assert executors.start_method() == "fork"
    monkeypatch.setenv("MIRAGE_LAB_SEARCH_START", "thread")
    with pytest.raises(SearchInputError, match="MIRAGE_LAB_SEARCH_START='thread'"):
        executors.start_method()


FIND_ALL = r"""
import json
from mirage_lab import examples as ex
from mirage_lab.search import CandidateFound, search
found = [ev.graph.content_hash() for ev in search(ex.rms_norm_linear_program(4, 64, 64), workers=2, max_kernel_ops=3)
         if isinstance(ev, CandidateFound)]
print("RESULTS " + json.dumps(sorted(found)))
"""


def test_a_search_from_a_forkserver_finds_what_a_forked_search_finds(tmp_path, monkeypatch):
    from proc_helpers import run_python

    found = {}
    for start in ("fork", "forkserver"):
        monkeypatch.setenv("MIRAGE_LAB_SEARCH_START", start)
        found[start] = run_python(FIND_ALL, tmp_path, timeout=300)
    assert found["fork"] and found["forkserver"] == found["fork"]


def test_workers_from_a_forkserver_do_not_run_the_callers_script_again(tmp_path):
    # multiprocessing runs a script's top level again in each forkserver or spawn child: an unguarded
    # script then started a search inside the helper (multiprocessing refused it), and a guarded one
    # still imported its top level (torch, on the H200 host) in each of 16 workers
    import os
    import subprocess

    script = tmp_path / "unguarded.py"
    runs = tmp_path / "top_level_runs.txt"
    script.write_text(f"with open({str(runs)!r}, 'a') as f:\n    f.write('ran\\n')\n"
                      "from mirage_lab import examples as ex\nfrom mirage_lab.search import CandidateFound, search\n"
                      "n = sum(isinstance(ev, CandidateFound) for ev in\n"
                      "        search(ex.rms_norm_linear_program(4, 64, 64), workers=2, max_kernel_ops=3))\n"
                      "print('CANDIDATES', n)\n")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {**os.environ, "MIRAGE_LAB_SEARCH_START": "forkserver",
           "PYTHONPATH": os.pathsep.join([root] + [p for p in [os.environ.get("PYTHONPATH")] if p])}
    r = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=180)
    assert r.returncode == 0, r.stderr[-2000:]
    assert int(r.stdout.split("CANDIDATES")[1]) > 0
    assert runs.read_text().count("ran") == 1      # the top level ran here only, in no helper


def test_main_not_reimported_drops_only_the_main_module_and_only_inside(monkeypatch, tmp_path):
    import types
    from multiprocessing import spawn

    from mirage_lab.search.lifetime import main_not_reimported

    script = types.ModuleType("__main__")          # a script run as `python script.py` (xdist's workers have none)
    script.__file__ = str(tmp_path / "script.py")
    script.__spec__ = None
    monkeypatch.setitem(sys.modules, "__main__", script)
    with main_not_reimported():
        inside = spawn.get_preparation_data("x")
    outside = spawn.get_preparation_data("x")
    assert "init_main_from_path" not in inside and "init_main_from_name" not in inside
    assert inside["sys_path"] == outside["sys_path"]    # the children still find what the parent imports
    assert outside["init_main_from_path"] == str(tmp_path / "script.py")
