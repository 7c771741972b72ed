"""torch.compile built first in a child process (opt-in): the tuner's own build then hits inductor's caches."""
import time

from mirage_lab import examples as ex
from mirage_lab.pipeline import prewarm


CHECK = r"""
import json, torch
from torch._dynamo.utils import counters
from mirage_lab import examples as ex
from mirage_lab.runtime.program import ProgramFunction
g = ex.rms_norm_linear_program(4, 64, 48)
xs = [torch.randn(tuple(t.dims)).to(t.dtype.torch) for t in g.inputs]
out = ProgramFunction(g, compiled=True)(xs)[0]
ref = ProgramFunction(g, compiled=False)(xs)[0]
print("RESULTS " + json.dumps({"hit": counters["inductor"]["fxgraph_cache_hit"],
                               "miss": counters["inductor"]["fxgraph_cache_miss"],
                               "err": ((out.float() - ref.float()).norm() / ref.float().norm()).item()}))
"""


def test_the_childs_build_is_a_cache_hit_here(monkeypatch, tmp_path):
    # the build after the child's, as the tuner's process makes it (a process whose inductor has not yet
    # run: this test's own process may have compiled elsewhere already, with its cache folder fixed)
    from proc_helpers import run_python

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))   # empty: only the child fills it
    g = ex.rms_norm_linear_program(4, 64, 48)
    secs, err = prewarm.Prewarm(g, "cpu").wait()
    assert err is None and secs > 0
    r = run_python(CHECK, tmp_path, timeout=300)
    assert r["hit"] == 1 and r["miss"] == 0 and r["err"] < 2e-2


def test_a_child_that_fails_says_why(tmp_path):
    p = prewarm.Prewarm(ex.rms_norm_linear_program(4, 64, 48), "no-such-device")
    secs, err = p.wait()
    assert err is not None and "prewarm exited 1" in err and "no-such-device" in err.lower()


def test_cancel_stops_the_child_and_removes_its_file():
    import os

    p = prewarm.Prewarm(ex.rms_norm_linear_program(4, 64, 48), "cpu")
    time.sleep(0.2)
    p.cancel()
    assert p.proc.poll() is not None and not os.path.exists(p._path)


def test_the_switch(monkeypatch):
    monkeypatch.delenv("MIRAGE_LAB_PREWARM", raising=False)
    assert not prewarm.enabled()        # off by default: the thread alone was faster on the H200 host
    monkeypatch.setenv("MIRAGE_LAB_PREWARM", "1")
    assert prewarm.enabled()


def test_the_child_imports_this_mirage_lab_and_compiles_in_one_process(monkeypatch):
    monkeypatch.delenv("TORCHINDUCTOR_COMPILE_THREADS", raising=False)
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    env = prewarm.child_env("/here")
    assert env["PYTHONPATH"].split(":") == ["/here", "/elsewhere"] and env["TORCHINDUCTOR_COMPILE_THREADS"] == "1"
    monkeypatch.setenv("TORCHINDUCTOR_COMPILE_THREADS", "8")    # the user's own setting stands
    assert prewarm.child_env("/here")["TORCHINDUCTOR_COMPILE_THREADS"] == "8"
