"""torch.compile of the program is built while the search runs, and the tuner takes it instead of compiling again."""
import os
import threading
import time

import pytest

from mirage_lab import examples as ex
from mirage_lab.pipeline import contenders
from mirage_lab.pipeline.autotune import _Tuning
from mirage_lab.pipeline.contenders import ProgramResult, ProgramWarmup
from mirage_lab.pipeline.inputs import measuring_inputs
from mirage_lab.runtime.program import ProgramFunction


@pytest.fixture
def builds(monkeypatch):
    """A stand-in for the slow build (torch.compile's first call): eager torch ops, 0.3 s, recording its thread."""
    calls = []

    def build(program, lowering, mi, fail=False):
        calls.append((lowering, threading.current_thread().name))
        time.sleep(0.3)
        if lowering == "broken":
            raise RuntimeError("inductor exploded")
        return ProgramResult(lowering, runner=ProgramFunction(program, compiled=False), compile_s=0.3)

    monkeypatch.setattr(contenders, "build_program_lowering", build)
    return calls


def _tuning(program):
    mi = measuring_inputs(program, device="cpu")
    return _Tuning(program, [], mi, timer=None, cache_dir=None, repeats=1, stop_margin=None,
                   emit=lambda ev: None, t0=time.monotonic())


def test_the_lowering_is_built_in_the_background_and_taken_once(builds):
    g = ex.rms_norm_linear_program(4, 64, 64)
    w = ProgramWarmup(g, "torch", device="cpu")
    assert w.take("torch.compile") is None            # another lowering: not this warm-up's
    res, waited = w.take("torch")
    assert res.lowering == "torch" and isinstance(res.runner, ProgramFunction)
    assert builds == [("torch", "mirage_lab-warm-torch")] and 0 <= waited < 5
    assert w.take("torch") is None                     # taken once: a second tuning builds its own


def test_the_tuner_races_the_warm_lowering_and_excludes_only_the_wait(builds):
    g = ex.rms_norm_linear_program(4, 64, 64)
    w = ProgramWarmup(g, "torch", device="cpu")
    time.sleep(0.5)                                    # the search ran longer than the build
    tn = _tuning(g)
    tn.race_program(["torch"], warm=w)
    (p,) = tn.programs
    assert p.ok and p.rel_err is not None and p.rel_err < 1e-2    # checked against float64 like any lowering
    assert [name for _, name in builds] == ["mirage_lab-warm-torch"]   # not built a second time
    assert tn.excluded_s < 0.2                         # the build's 0.3 s overlapped the search: not excluded again


def test_a_warm_up_still_building_is_raced_between_variants_not_before_them(builds):
    # Waiting for torch.compile before timing any variant put 7-11 s before the first variant's time (H200).
    g = ex.rms_norm_linear_program(4, 64, 64)
    w = ProgramWarmup(g, "torch", device="cpu")        # a 0.3 s build, just started
    tn = _tuning(g)
    tn.race_program(["torch"], warm=w, block=False)
    assert tn.racing() and tn.programs == []           # not waited for: the variants go first
    tn.race_ready(block=False)
    assert tn.racing() or w.ready()
    w._thread.join()
    tn.race_ready(block=False)                         # ready now: raced at the next look
    assert not tn.racing() and tn.programs[0].ok and tn.excluded_s < 0.1
    tn2 = _tuning(g)
    tn2.race_program(["torch"], warm=ProgramWarmup(g, "torch", device="cpu"), block=False)
    tn2.race_ready()                                   # the loop's end: waits for it, the wait excluded
    assert not tn2.racing() and tn2.programs[0].ok and tn2.excluded_s > 0.1


def test_a_failed_warm_up_is_built_again_by_the_tuner(builds):
    g = ex.rms_norm_linear_program(4, 64, 64)
    w = ProgramWarmup(g, "broken", device="cpu")
    assert w.take("broken") is None and "inductor exploded" in w.error
    tn = _tuning(g)
    tn.race_program(["torch"], warm=w)                 # the tuner's own build, in this thread
    assert builds[-1] == ("torch", threading.current_thread().name) and tn.programs[0].ok


def test_superoptimize_starts_the_warm_up_after_the_search_has_its_workers(monkeypatch):
    # Started before the search, the warm-up's CUDA and thread made the search spawn its workers
    # (or fork beside a busy thread): the README example's search then visited no state in 30 s.
    # Its child process (prewarm) starts first: the tuner waits for torch.compile's build.
    from mirage_lab.search import Progress

    order = []

    class Pool:
        def __init__(self, *a, **k):
            pass

        def on_candidates(self, on_event):
            return on_event

        def prewarm_program(self, program):
            order.append("prewarm")

        def preload_compiler(self, program):
            order.append("preload")

        def warm_program(self, program):
            order.append("warm-up")

        def close(self):
            pass

    monkeypatch.setattr("mirage_lab.pipeline.start_early", lambda workers, n: Pool())

    def on_event(ev):
        if isinstance(ev, Progress):
            order.append("progress")

    g = ex.rms_norm_linear_program(4, 64, 64)
    import mirage_lab.pipeline as pl

    best = pl.superoptimize(g, workers=2, cache=False, progress=False, on_event=on_event, search_seconds=5)
    assert best.graph is not None
    # the prewarm is a child process (no thread, no CUDA here): it starts before the search forks
    # the imports start before the search too (a thread the fork waits for)
    assert order[:4] == ["prewarm", "preload", "progress", "warm-up"] and order.count("warm-up") == 1


@pytest.mark.skipif(not hasattr(os, "getpriority"), reason="process priorities")
def test_the_warm_up_thread_runs_at_the_searchs_priority(builds):
    # the tuner waits for torch.compile, so its build is on the critical path: niced behind the search's
    # workers it took 40.3 s beside a 2-worker search on the CPU box, 15.6-17.2 s at their priority
    from mirage_lab.pipeline.compile_pool import lower_priority

    seen = []
    real = contenders.build_program_lowering

    def build(program, lowering, mi, fail=False):
        seen.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
        return real(program, lowering, mi)

    contenders.build_program_lowering = build
    try:
        w = ProgramWarmup(ex.rms_norm_linear_program(4, 64, 64), "torch", device="cpu")
        assert w.take("torch") is not None
    finally:
        contenders.build_program_lowering = real
    me = os.getpriority(os.PRIO_PROCESS, 0)
    assert seen == [me]
    lower_priority(nice=0)    # best effort and harmless


def test_preload_imports_the_compiler_in_a_thread_the_searchs_fork_waits_for(monkeypatch):
    # torch.compile's imports, done in the warm-up thread beside the search, took 22 s of a 28 s build
    # on the H200 host; preloaded, they overlap the search's set-up and are finished before it forks
    import sys

    from mirage_lab.search import executors

    imported = []
    monkeypatch.setattr(contenders, "COMPILER_MODULES", ("json", "no_such_module_for_mirage_lab"))
    real = __import__("importlib").import_module

    def slow_import(name, *a):
        time.sleep(0.3)
        imported.append(name)
        return real(name, *a)

    monkeypatch.setattr("importlib.import_module", slow_import)
    t = contenders.preload_compiler()
    assert t in executors._JOIN_BEFORE_FORK and t.is_alive()
    executors.before_fork()                          # what the search runs before it forks its workers
    assert not t.is_alive() and not executors._JOIN_BEFORE_FORK
    assert imported == ["json", "no_such_module_for_mirage_lab"] and "json" in sys.modules   # a missing one is no error
    # a process whose searches never fork (a forkserver once it holds CUDA) keeps no finished threads
    for _ in range(3):
        contenders.preload_compiler().join()
    executors.join_before_fork(threading.Thread(target=lambda: None))
    assert len(executors._JOIN_BEFORE_FORK) == 1
    executors._JOIN_BEFORE_FORK.clear()
