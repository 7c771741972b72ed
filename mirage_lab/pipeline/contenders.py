"""The program's own lowerings as tuning contenders, and the one timer every contender goes through.

``superoptimize`` must never return something slower than the program it was given, so the
program runs in the same race as the μGraph variants:

* ``"torch"``: the program's plain kernel-level ops as torch calls, as the code generator
  lowers them (``runtime.compile(program)``: :mod:`mirage_lab.codegen.host`), captured in a
  CUDA graph;
* ``"torch.compile"``: ``torch.compile`` of the program's torch function, captured in a CUDA
  graph (compiled while the pool compiles the variants; a failure is recorded, never fatal);
* a library lowering (``"sdpa"``, :mod:`.library`) where a library kernel computes part of the
  program: the program's torch ops with the library call in place of that part (``"library"`` in
  the tuner's ``program_lowerings`` races every registered one that matches).

All are timed by the same :class:`Timer` as the variants, on the same measuring inputs,
the same rotation of input copies, the same repeats, and again among the finalists.
``torch eager`` (what the user started from) is timed too, for the "faster by how much".

    >>> timer = CudaGraphTimer()                                          # doctest: +SKIP
    >>> timer.graph("torch", kernel.check_inputs, lambda s: kernel.capture(s).replay, xs, 100)   # doctest: +SKIP
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, Sequence

from ..ir.kernel_graph import KernelGraph
from .measured import Measured, raise_on_gpu_fault
from .inputs import MeasuringInputs

PROGRAM_LOWERINGS = ("torch", "torch.compile")
LIBRARY = "library"   # in program_lowerings: every registered library lowering that matches the program
EAGER = "torch eager"
#: What the report and the result's repr say when the program itself is returned
PROGRAM_PHRASE = "no μGraph beat PyTorch on this GPU: returning the program itself"


def library_phrase(title: str) -> str:
    """What the report and the result's repr say when a library lowering is returned."""
    return f"returning {title}: no μGraph beat it"


class Timer(Protocol):
    """How contenders are timed. :class:`CudaGraphTimer` on a GPU; tests inject their own."""

    def graph(self, name: str, check_inputs: Callable[[Sequence[Any]], Sequence[Any]],
              capture: Callable[[Sequence[Any]], Callable[[], Any]], inputs: Sequence[Any], repeats: int) -> Any:
        """A ``runtime.profile.Timing`` of CUDA-graph replays of ``capture(copy)`` over rotated input copies."""
        ...

    def eager(self, name: str, fn: Callable[..., Any], inputs: Sequence[Any], repeats: int) -> Any:
        """A ``Timing`` of eager ``fn(*copy)`` launches over the same rotated copies."""
        ...


class CudaGraphTimer:
    """CUDA-graph replay, CUDA events, inputs rotated over copies larger than 2x L2 (:mod:`mirage_lab.runtime.profile`)."""

    def graph(self, name: str, check_inputs: Callable[[Sequence[Any]], Sequence[Any]],
              capture: Callable[[Sequence[Any]], Callable[[], Any]], inputs: Sequence[Any], repeats: int) -> Any:
        from ..runtime.profile import time_captured

        return time_captured(check_inputs, capture, inputs, name=name, repeats=repeats)

    def eager(self, name: str, fn: Callable[..., Any], inputs: Sequence[Any], repeats: int) -> Any:
        from ..runtime.profile import time_eager

        return time_eager(fn, inputs, name=name, repeats=repeats)


def default_timer() -> Timer | None:
    """The timer tuning uses here: CUDA graphs on a GPU, none under the CUDA simulator (checked, not timed)."""
    from ..runtime.paths import simulator_active

    return None if simulator_active() else CudaGraphTimer()


@dataclass
class ProgramResult(Measured):
    """One of the program's own lowerings in the race: its check and timings (µs)."""

    # "torch" | "torch.compile" | "program" (a program with customized ops) | a library lowering's name ("sdpa")
    lowering: str
    runner: Any = field(default=None, repr=False, metadata={"stored": False})  # callable like a compiled kernel: runner(inputs, graph=...); rebuilt, never stored
    compile_s: float | None = None
    prewarm_s: float | None = None   # torch.compile's build in a child process before compile_s (.prewarm)
    rel_err: float | None = None
    error: str | None = None
    timings: dict[str, Any] = field(default_factory=dict)

    def row(self) -> dict[str, Any]:
        """One flat record (JSON-ready) for tables."""
        return {"lowering": self.lowering, "median_us": None if self.median_us == float("inf") else round(self.median_us, 2),
                "rel_err": self.rel_err, "compile_s": None if self.compile_s is None else round(self.compile_s, 1),
                "prewarm_s": None if self.prewarm_s is None else round(self.prewarm_s, 1), "error": self.error}


def _error(e: BaseException, limit: int = 800) -> str:
    return f"{type(e).__name__}: {e}"[:limit]


def check_program(res: ProgramResult, mi: MeasuringInputs, tol: float) -> None:
    """Run the lowering on the measuring inputs against the float64 reference; record why it fails.

    The program is the definition of correct, so its plain lowering is only required to be
    finite (``tol=inf``); ``torch.compile`` and a library lowering must be as accurate as the plain
    lowering (``tol``: twice its error, at least ``TOLERANCE``).
    """
    from ..runtime.profile import relative_error
    from .autotune import TOLERANCE

    try:
        outs = res.runner(list(mi.inputs))
        err = max(relative_error(o, r) for o, r in zip(outs, mi.reference))
    except Exception as e:  # recorded, never fatal: the variants still race (but a GPU fault)
        raise_on_gpu_fault(e, f"checking the program's {res.lowering} lowering")
        res.error = _error(e)
        return
    res.rel_err = err
    if not math.isfinite(err):
        res.error = f"non-finite outputs (relative error {err}) on the measuring inputs ({mi.policy})"
    elif err > tol:
        res.error = f"relative error {err:.3g} exceeds {tol:.3g} (twice the plain torch lowering's, at least {TOLERANCE})"


def build_program_lowering(program: KernelGraph, lowering: str, mi: MeasuringInputs) -> ProgramResult:
    """Build (and for ``torch.compile``, compile on the measuring inputs) one of the program's lowerings."""
    res = ProgramResult(lowering)
    t0 = time.perf_counter()
    try:
        if lowering == "torch.compile":
            from ..runtime.program import ProgramFunction

            res.runner = ProgramFunction(program, compiled=True)
            res.runner(list(mi.inputs))  # the compile happens at the first call
            _sync(mi)
        elif lowering not in ("torch", "program"):
            from .library import library_function

            res.runner = library_function(program, lowering)
        else:
            from ..runtime.kernel import compile as rt_compile

            res.runner = rt_compile(program)  # plain ops as torch calls; customized ops as the program's kernels
    except Exception as e:  # a program torch.compile cannot handle: recorded, the race goes on
        raise_on_gpu_fault(e, f"building the program's {lowering} lowering")
        res.error = f"{lowering} failed: {_error(e)}"
    res.compile_s = time.perf_counter() - t0
    return res


# What torch.compile's first call imports (dynamo, inductor, Triton's codegen), imported up front by
# preload_compiler. In the warm-up thread, beside the search's workers and the tuner's thread, these
# imports took 22 s of the README example's 28 s torch.compile build on the H200 host (py-spy,
# benchmarks/RESULTS.md "2026-11-29"), and the tuner's timings stalled behind them (the GIL).
COMPILER_MODULES = ("torch._dynamo", "torch._inductor.compile_fx", "torch._inductor.codegen.triton",
                    "torch._inductor.runtime.triton_heuristics", "triton")


def preload_compiler() -> Any:
    """Import torch.compile's machinery (:data:`COMPILER_MODULES`) in a thread; returns the thread.

    Imports touch no GPU, so the search may still fork; the thread is joined before it does
    (:func:`mirage_lab.search.executors.join_before_fork`) and meanwhile overlaps the search's own
    set-up. A module that is missing or fails to import is left to torch.compile to report.
    """
    import importlib
    import threading

    from ..search.executors import join_before_fork

    def run() -> None:
        for name in COMPILER_MODULES:
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001 - e.g. no Triton: torch.compile says so when it runs
                pass

    t = threading.Thread(target=run, name="mirage_lab-preload-compiler", daemon=True)
    t.start()
    join_before_fork(t)
    return t


class ProgramWarmup:
    """One of the program's lowerings built in a background thread, while the search runs.

    torch.compile's first call takes 10-20 s on a GPU host (dynamo, inductor, Triton), a cost
    that used to come after the search, on top of it. ``superoptimize`` starts this with its
    search; the tuner's :meth:`_Tuning.race_program` then takes the built lowering (the same
    ``torch.compile`` wrapper, so the measuring inputs, of the same shapes, dtypes and device,
    hit its compiled code) and only waits for what is left of the compile. The inputs here are
    random tensors of the program's input shapes: a compile does not depend on their values.
    With ``MIRAGE_LAB_PREWARM=1`` the long build runs first in a child process (:mod:`.prewarm`; off
    by default: slower on the H200 host), and the build here then hits inductor's caches.

        >>> w = ProgramWarmup(program, "torch.compile")     # doctest: +SKIP
        >>> res, waited_s = w.take("torch.compile")         # doctest: +SKIP
    """

    def __init__(self, program: KernelGraph, lowering: str = "torch.compile", device: str = "cuda",
                 prewarm: Any = None) -> None:
        """``prewarm``: a :class:`~.prewarm.Prewarm` child already building (started before the search)."""
        import threading

        self.program, self.lowering, self.device = program, lowering, device
        self.result: ProgramResult | None = None
        self.error: str | None = None   # why the warm-up failed (the tuner then builds the lowering itself)
        self.prewarm_s: float | None = None       # the child process's build (mirage_lab.pipeline.prewarm)
        self.prewarm_error: str | None = None
        self._prewarm: Any = prewarm
        self._cancelled = False
        self._thread = threading.Thread(target=self._build, name=f"mirage_lab-warm-{lowering}", daemon=True)
        self._thread.start()

    def _build(self) -> None:
        from types import SimpleNamespace

        from . import prewarm
        # At the search's priority, not behind it: the tuner waits for torch.compile (the program always
        # races), so this build is on superoptimize's critical path. Behind the search's workers (nice 10)
        # it built in 40.3 s beside a 2-worker search on the 2-core CPU box, at their priority in 15.6-17.2 s;
        # on the H200 host the README example's niced build took 36.5 s and the tuning waited for it.
        if self._prewarm is not None or (self.lowering == "torch.compile" and self.device == "cuda"
                                         and prewarm.enabled()):
            # first in a child process: the long build there, then the one here hits inductor's caches
            try:
                if self._prewarm is None:
                    self._prewarm = prewarm.Prewarm(self.program, self.device)
                if self._cancelled:
                    self._prewarm.cancel()
                self.prewarm_s, self.prewarm_error = self._prewarm.wait()
            except Exception as e:  # noqa: BLE001 - the build here still runs
                self.prewarm_error = _error(e)
        if self._cancelled:
            self.error = "cancelled"
            return
        try:
            import torch

            xs = [torch.randn(tuple(t.dims), device=self.device).to(t.dtype.torch) for t in self.program.inputs]
            self.result = build_program_lowering(self.program, self.lowering, SimpleNamespace(inputs=xs))
        except BaseException as e:  # noqa: BLE001 - never lost: take() returns None and the tuner builds it itself
            self.error = _error(e)

    def cancel(self) -> None:
        """Stop a build no tuning will take (its child process at once; a build in this process runs out)."""
        self._cancelled = True
        if self._prewarm is not None:
            self._prewarm.cancel()

    def ready(self) -> bool:
        """The build has ended (built or failed): :meth:`take` will not wait."""
        return not self._thread.is_alive()

    def take(self, lowering: str) -> tuple[ProgramResult, float] | None:
        """The built lowering and the seconds waited for it; ``None`` for another lowering or a failed warm-up."""
        if lowering != self.lowering:
            return None
        t0 = time.perf_counter()
        self._thread.join()
        res, self.result = self.result, None   # taken once: a second tuning builds its own
        if res is not None:
            res.prewarm_s = self.prewarm_s
        return None if res is None else (res, time.perf_counter() - t0)


def _sync(mi: MeasuringInputs) -> None:
    x = mi.inputs[0] if mi.inputs else None
    if x is not None and getattr(x, "is_cuda", False):
        import torch

        torch.cuda.synchronize()


def time_program(res: ProgramResult, timer: Timer, mi: MeasuringInputs, repeats: int) -> None:
    """Time a checked program lowering exactly as a variant is timed (the timer's CUDA-graph replay)."""
    r = res.runner
    try:
        res.timings["cuda_graph"] = timer.graph(res.lowering, r.check_inputs, _replay_of(r), mi.inputs, repeats)
    except Exception as e:
        raise_on_gpu_fault(e, f"timing the program's {res.lowering} lowering")
        res.error = f"timing failed: {_error(e)}"


def _replay_of(runner: Any) -> Callable[[Sequence[Any]], Callable[[], Any]]:
    """``capture(copy) -> replay`` for a compiled kernel or a ProgramFunction (both capture to ``.replay``)."""
    return lambda xs: runner.capture(xs).replay


def program_lowerings_for(program: KernelGraph, wanted: Sequence[str], timed: bool) -> list[str]:
    """The lowerings of ``program`` to race: ``"program"`` for a program with customized ops (its own
    kernels; torch.compile cannot trace them); ``torch.compile`` and library lowerings (``"library"``:
    each registered one whose pattern is in the program) only where timing decides. ``"torch"`` first:
    its error sets the bar of the others."""
    from .library import library_lowerings

    if program.customized_ops:
        return ["program"] if wanted else []
    out = [w for w in wanted if w == "torch" or (w == "torch.compile" and timed)]
    if LIBRARY in wanted and timed:
        out += library_lowerings(program)
    return sorted(out, key=lambda w: w != "torch")


__all__ = ["PROGRAM_LOWERINGS", "LIBRARY", "library_phrase", "EAGER", "PROGRAM_PHRASE", "Timer", "CudaGraphTimer",
           "default_timer", "ProgramResult", "ProgramWarmup", "check_program", "build_program_lowering", "time_program", "program_lowerings_for"]
