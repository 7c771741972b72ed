"""A GPU fault during tuning stops it with a clear error instead of being recorded as one contender's failure.

After an illegal memory access the process's CUDA context runs nothing more: every later contender fails
the same way, and a race that went on would return a result chosen from what was timed before (on the
H100, 2026-12-07 (f), Falcon-7B MQA decode's final round faulted and the report still named a μGraph the
winner, with every program lowering's timing failed). The timers here raise the errors torch and the
generated kernels' launcher raise.
"""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from mirage_lab import examples as ex
from mirage_lab.errors import GpuFaultError, MirageLabError
from mirage_lab.pipeline.autotune import VariantResult, _time, plan_variants
from mirage_lab.pipeline.contenders import ProgramResult, check_program, time_program
from mirage_lab.pipeline.inputs import measuring_inputs
from mirage_lab.pipeline.measured import gpu_fault

ILLEGAL = "CUDA error: an illegal memory access was encountered\nCUDA kernel errors might be asynchronously reported"


@pytest.mark.parametrize("text, sticky", [
    (ILLEGAL, True),
    ("CUDA error: unspecified launch failure", True),
    ("CUDA error: misaligned address", True),
    ("cuLaunchKernel failed: CUresult 700", True),     # CUDA_ERROR_ILLEGAL_ADDRESS, from the generated launcher
    ("cuLaunchKernel failed: CUresult 719", True),     # CUDA_ERROR_LAUNCH_FAILED
    ("cuLaunchKernel failed: CUresult 701", False),    # too many resources requested: this launch only
    ("CUDA out of memory. Tried to allocate 2.00 GiB", False),
    ("relative error 0.5 exceeds 0.002", False),
])
def test_which_errors_are_gpu_faults(text, sticky):
    assert gpu_fault(RuntimeError(text)) is sticky


class Raising:
    def __init__(self, text):
        self.text = text

    def graph(self, name, check_inputs, capture, inputs, repeats):
        raise RuntimeError(self.text)

    def eager(self, name, fn, inputs, repeats):
        raise RuntimeError(self.text)


@pytest.fixture(scope="module")
def setup():
    g = ex.rms_norm_linear_program(4, 64, 64)
    v, e = plan_variants([ex.rms_norm_linear_fused(4, 64, 64, grid=4, forloop_range=4)])[0]
    return g, v, e, measuring_inputs(g, device="cpu")


def test_a_fault_while_timing_a_variant_stops_the_tuning_and_says_how_to_go_on(setup):
    g, v, e, mi = setup
    kernel = SimpleNamespace(check_inputs=lambda xs: xs, capture=None)
    res = VariantResult(v, e)
    with pytest.raises(GpuFaultError) as info:
        _time(res, kernel, mi, 10, Raising(ILLEGAL))
    msg = str(info.value)
    assert isinstance(info.value, MirageLabError) and v.tag in msg and "illegal memory access" in msg
    assert "restart" in msg and "cache" in msg
    assert isinstance(info.value.__cause__, RuntimeError)
    # any other timing error is this variant's alone: recorded, and the race goes on
    res = VariantResult(v, e)
    _time(res, kernel, mi, 10, Raising("CUDA out of memory. Tried to allocate 2.00 GiB"))
    assert res.error.startswith("timing failed: RuntimeError: CUDA out of memory")


def test_a_fault_in_the_programs_lowerings_stops_it_too(setup):
    g, v, e, mi = setup
    p = ProgramResult("torch.compile", runner=SimpleNamespace(check_inputs=lambda xs: xs))
    with pytest.raises(GpuFaultError, match="timing the program's torch.compile lowering"):
        time_program(p, Raising("cuLaunchKernel failed: CUresult 700"), mi, 10)

    def faulting(xs):
        raise RuntimeError(ILLEGAL)

    with pytest.raises(GpuFaultError, match="checking the program's torch lowering"):
        check_program(ProgramResult("torch", runner=faulting), mi, float("inf"))

    def wrong(xs):
        raise ValueError("shapes do not match")

    q = ProgramResult("torch", runner=wrong)
    check_program(q, mi, float("inf"))
    assert q.error == "ValueError: shapes do not match"
