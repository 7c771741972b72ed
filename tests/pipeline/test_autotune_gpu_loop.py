"""The tuner's GPU loop (compile feed, variants timed as their compiles land, torch.compile raced when its
warm-up is ready) run on the CPU: the simulator's kernels, a timer from a table, a thread for the pool.

On a GPU the loop is the same code; only ``simulator_active`` and the timer differ. Waiting for
torch.compile's warm-up before any variant put 7-11 s before the first variant's time on the H200.
"""
from __future__ import annotations

import pytest

from proc_helpers import run_python

SCRIPT = r'''
import json, sys, threading, time, torch
from mirage_lab import examples as ex
from mirage_lab.pipeline import contenders
from mirage_lab.pipeline.autotune import ProgramDone, VariantDone, autotune
from mirage_lab.runtime import kernel as rk, program as rp
from mirage_lab.runtime.profile import Timing
from mirage_lab.runtime.torch_fn import to_torch_fn
at = sys.modules["mirage_lab.pipeline.autotune"]   # the package exports the function under the same name

US = {"torch": 9.0, "torch.compile": 7.0, "variant": 5.0, "eager": 10.0}
class FakeTimer:
    def graph(self, name, check_inputs, capture, inputs, repeats):
        check_inputs(inputs)
        us = US.get(name, US["variant"])
        return Timing(name, "cuda_graph", us, us, us, repeats)
    def eager(self, name, fn, inputs, repeats):
        return Timing(name, "eager", US["eager"], US["eager"], US["eager"], repeats)

# the GPU path, with the simulator's kernels underneath
real_sim = rk.simulator_active
rk.simulator_active = lambda: False if sys._getframe(1).f_code.co_name == "autotune" else real_sim()   # the tuner only
real_avail = torch.cuda.is_available
torch.cuda.is_available = lambda: True if sys._getframe(1).f_code.co_name == "autotune" else real_avail()
torch.cuda.get_device_name = lambda *a: "fake GPU"
real_mi = at.measuring_inputs
at.measuring_inputs = lambda program, device=None, inputs=None: real_mi(program, device="cpu", inputs=inputs)
rp.compile_program_fn = lambda program, mode=None: torch.compile(to_torch_fn(program), backend="eager")
real_build = contenders.build_program_lowering
def slow_build(program, lowering, mi, fail=False):
    if lowering == "torch.compile":
        time.sleep(WARM_S)            # inductor's compile on a busy host
    return real_build(program, lowering, mi)
contenders.build_program_lowering = slow_build

class ThreadPool:                     # multiprocessing.Pool's apply_async, in a thread
    def apply_async(self, fn, args, callback, error_callback):
        def run():
            try:
                callback(fn(*args))
            except Exception as e:
                error_callback(e)
        threading.Thread(target=run, daemon=True).start()

g = ex.rms_norm_linear_program(4, 64, 64)
cand = ex.rms_norm_linear_fused(4, 64, 64, grid=4, forloop_range=4)
class Pool:
    workers = 1
    pool = ThreadPool()
    program_warmup = contenders.ProgramWarmup(g, "torch.compile", device="cpu")
events = []
t0 = time.monotonic()
def on_event(ev):
    if isinstance(ev, ProgramDone):
        events.append(("program", ev.result.lowering, round(time.monotonic() - t0, 2)))
    elif isinstance(ev, VariantDone):
        events.append(("variant", ev.result.variant.tag, round(time.monotonic() - t0, 2)))
rep = autotune(g, [cand], timer=FakeTimer(), pool=Pool(), tune_seconds=600, max_variants=MAX_VARIANTS, on_event=on_event)
print("RESULTS " + json.dumps({"events": events, "winner": rep.winner if hasattr(rep, "winner") else None,
      "programs": [(p.lowering, p.median_us) for p in rep.programs], "perr": [p.error for p in rep.programs], "best": rep.best.median_us if rep.best else None,
      "stop": rep.stop_reason, "timed": sum(1 for r in rep.results if r.timings)}))
'''


def _run(tmp_path, warm_s: float, max_variants: int) -> dict:
    code = SCRIPT.replace("WARM_S", repr(warm_s)).replace("MAX_VARIANTS", repr(max_variants))
    return run_python(code, tmp_path, timeout=900)


@pytest.mark.timeout(900)
def test_variants_are_timed_while_torch_compile_still_builds_and_it_is_raced_when_ready(tmp_path):
    r = _run(tmp_path, warm_s=12.0, max_variants=2)
    kinds = [e[0] for e in r["events"]]
    names = [e[1] for e in r["events"]]
    assert names[0] == "torch"                            # the plain ops first: they set the tolerance
    assert "variant" in kinds[: names.index("torch.compile")], r["events"]   # a variant before torch.compile
    assert dict(r["programs"]) == {"torch": 9.0, "torch.compile": 7.0}, r["perr"]   # raced and timed all the same
    assert r["best"] == 5.0 and r["timed"] >= 1
