"""What every contender of the tuner's race shares: a check's error, timings, and how they read."""
from __future__ import annotations

import re
from typing import Any

from ..errors import GpuFaultError

# CUDA errors after which the context runs nothing more (every later CUDA call fails the same way): the runtime's
# words, and the driver's codes as the generated kernels' launcher reports them ("cuLaunchKernel failed: CUresult 700")
_STICKY = re.compile(r"illegal memory access|unspecified launch failure|misaligned address|illegal instruction|"
                     r"hardware stack error|invalid program counter|CUDA_ERROR_(ILLEGAL_ADDRESS|LAUNCH_FAILED|"
                     r"MISALIGNED_ADDRESS|ILLEGAL_INSTRUCTION|HARDWARE_STACK_ERROR|INVALID_PC)|CUresult 7(00|1[4-9])\b")


def gpu_fault(e: BaseException) -> bool:
    """Whether ``e`` is a CUDA error that leaves the process's CUDA context unusable.

        >>> gpu_fault(RuntimeError("CUDA error: an illegal memory access was encountered"))
        True
        >>> gpu_fault(RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB"))
        False
    """
    return bool(_STICKY.search(f"{type(e).__name__}: {e}"))


def fault_summary(e: BaseException) -> str:
    """What faulted, in one sentence: a :class:`~mirage_lab.errors.GpuFaultError`'s first (its advice left out).

        >>> try:
        ...     raise_on_gpu_fault(RuntimeError("CUDA error: an illegal memory access was encountered"), "timing v")
        ... except GpuFaultError as e:
        ...     print(fault_summary(e))
        the GPU faulted while timing v: CUDA error: an illegal memory access was encountered
    """
    return _first_line(e).split(_ADVICE, 1)[0]


_ADVICE = ". This process's CUDA context can run nothing more"


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]


def raise_on_gpu_fault(e: BaseException, while_doing: str) -> None:
    """Raise :class:`~mirage_lab.errors.GpuFaultError` from ``e`` when it is a fault the context cannot survive.

    Recording it as one contender's failure, as the tuner does with other errors, would time every later
    contender into the same error and could return a result chosen from half the race.
    """
    if gpu_fault(e):
        raise GpuFaultError(
            f"the GPU faulted while {while_doing}: {_first_line(e)}{_ADVICE}: "
            "restart the Python kernel (or process) and call superoptimize again; with the persistent cache on "
            "(the default) the search's candidates are kept, and only the tuning runs again. A μGraph variant "
            "may be at fault: please report the program; with CUDA_LAUNCH_BLOCKING=1 set before the process "
            "starts, the error names the launch that faulted.") from e


class Measured:
    """Mixin for the tuner's records (a μGraph variant, a program lowering): needs ``timings``
    (mode -> ``runtime.profile.Timing``), ``error`` and ``rel_err`` attributes."""

    timings: dict[str, Any]
    error: str | None
    rel_err: float | None

    @property
    def median_us(self) -> float:
        """The CUDA-graph replay's median (µs), ``inf`` when not timed."""
        t = self.timings.get("cuda_graph")
        return t.median_us if t is not None else float("inf")

    @property
    def ok(self) -> bool:
        """Checked and correct (a timing failure sets ``error`` too)."""
        return self.error is None and self.rel_err is not None
