"""What ``superoptimize`` hands back: the winner of the race, how it is lowered, what was measured.

The winner is a μGraph (its codegen options, its compiled kernels), a library kernel where one
computes part of the program and beat every μGraph (FlashAttention via ``sdpa`` for attention,
the program's other ops as torch calls: :mod:`.library`) or, when no μGraph beat PyTorch on this
GPU, the program itself (its torch ops, or ``torch.compile`` of them). Either way, calling it
runs exactly what was measured and :meth:`OptimizedGraph.export` writes exactly that. On a machine without a GPU, calling it on CPU tensors runs the reference
interpreter (float32 for half inputs), whatever was read from it or called on it before.

    >>> best = graph.superoptimize()                 # doctest: +SKIP
    >>> (O,) = best(inputs=[X, W])                   # doctest: +SKIP
    >>> (O,) = best(inputs=[X, W], graph=True)       # CUDA-graph replay   # doctest: +SKIP
    >>> best.winner, best.latency_us, best.speedup   # doctest: +SKIP
    ('μGraph', 16.5, 1.74)
    >>> best.report.summary()                        # doctest: +SKIP
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Sequence

from ..codegen import DEFAULT_OPTIONS, CodegenOptions
from ..ir.kernel_graph import KernelGraph

from .contenders import PROGRAM_PHRASE, library_phrase
from .library import library_title

MUGRAPH = "μGraph"


class OptimizedGraph:
    """The result of ``superoptimize``: a μGraph, a library kernel or the program itself, with its tuning report.

    Public attributes: ``graph`` (the μGraph returned; the program itself when
    :attr:`is_program` or :attr:`is_library`), ``options`` (codegen options), ``program``, ``report`` (the
    :class:`~.autotune.TuneReport`, ``None`` when not tuned), ``search_result``;
    :attr:`winner`, :attr:`is_program`, :attr:`is_library`, :attr:`latency_us`, :attr:`speedup`,
    :attr:`speedup_vs_compile`. Attributes it does not define itself (``inputs``,
    ``outputs``, ``ops``, ``customized_ops``, ``to_json``, ``content_hash``...) are the graph's.
    """

    from_cache: str | None = None   # the cache entry it was loaded from (mirage_lab.pipeline.cache), if any

    def __init__(self, graph: KernelGraph, options: CodegenOptions, *, program: KernelGraph,
                 search_result: Any = None, report: Any = None, kernel: Any = None, lowering: str = MUGRAPH) -> None:
        self.graph = graph
        self.options = options
        self.program = program
        self.search_result = search_result
        self.report = report
        self._lowering = lowering
        self._kernel: Any = None
        self._fast: Any = None     # the kernel to call directly: set only where it can run (a GPU is here)
        if kernel is not None:
            self._set_kernel(kernel)

    # ------------------------------------------------------------------ what won, what was measured
    @property
    def winner(self) -> str:
        """``"μGraph"``, or the program lowering returned: ``"torch"`` or ``"torch.compile"``
        (``"program"`` for a program given with customized ops), or a library's (``"sdpa"``)."""
        return self._lowering

    @property
    def is_program(self) -> bool:
        """True when neither a μGraph nor a library kernel beat the program: calling this runs the program itself."""
        return self._lowering != MUGRAPH and not self.is_library

    @property
    def is_library(self) -> bool:
        """True when a library kernel won (:attr:`winner` names it): a call runs the program's torch ops with
        the library call in place of the part it computes."""
        return library_title(self._lowering) is not None

    @property
    def latency_us(self) -> float | None:
        """Median device time of what is returned (CUDA-graph replay, L2-cold inputs), if measured."""
        return None if self.report is None else self.report.chosen_us

    @property
    def speedup(self) -> float | None:
        """The program's torch eager time / the returned time (both measured here), else ``None``."""
        return None if self.report is None else self.report.speedup

    @property
    def speedup_vs_compile(self) -> float | None:
        """torch.compile's time (CUDA graph) / the returned time, where torch.compile was measured."""
        return None if self.report is None else self.report.speedup_vs_compile

    @property
    def codegen_options(self) -> CodegenOptions:
        return self.options

    @property
    def kernel(self) -> Any:
        """What a call runs: the compiled μGraph, or the program's lowering (compiled now if not yet).

        Reading it never changes what a later call does on this machine.
        """
        if self._kernel is None:
            self._set_kernel(self._build_kernel())
        return self._kernel

    def _build_kernel(self) -> Any:
        from ..runtime.kernel import compile as rt_compile, simulator_active

        if self._lowering == "torch.compile":
            from ..runtime.program import ProgramFunction

            return ProgramFunction(self.program, compiled=True)
        if self.is_library:
            from .library import library_function

            return library_function(self.program, self._lowering)
        if self._lowering == "torch" and not simulator_active() and not _cuda():
            from ..runtime.program import ProgramFunction

            return ProgramFunction(self.program, compiled=False)  # torch ops run on the CPU as they are
        return rt_compile(self.graph, options=self.options)

    def _set_kernel(self, k: Any) -> None:
        self._kernel = k
        # the hot path skips every check but the kernel's own: only where the kernel can run (a GPU)
        self._fast = k if _cuda() and not getattr(k, "simulator", False) else None

    # ------------------------------------------------------------------ calls
    def __call__(self, inputs: Sequence[Any] | None = None, *, graph: bool = False, poison: bool = False) -> list[Any]:
        """Run on ``inputs`` (torch tensors in the program's input order); returns the outputs.

        ``graph=True`` replays a CUDA graph captured for these input tensors (by address):
        the outputs are then the graph's buffers, overwritten by the next replay. Bad inputs
        (``None``, numpy arrays, a wrong count) raise a ``KernelInputError`` saying what to pass.
        """
        f = self._fast
        if f is not None:  # the hot path: the kernel checks its inputs itself
            return f(inputs, graph=graph, poison=poison)
        from ..runtime.program import tensor_list

        xs = tensor_list(inputs, self.graph)
        if _all_on_cpu(xs) and not _cuda():
            from ..runtime.paths import simulator_active

            if not simulator_active():  # no GPU, no simulator: what runs on a CPU
                from ..interp.reference import run_reference

                return run_reference(self.graph, xs)
        return self.kernel(xs, graph=graph, poison=poison)

    def export(self, path: str | os.PathLike) -> Path:
        """Write what a call runs as a standalone module; returns its path.

        A μGraph is written with its measured kernels (these options, numba + torch); the
        program itself with torch ops (``torch.compile`` of them when that won), torch only; a
        library winner as the program's torch ops with the library function's source in place
        of the part it computes, torch only.
        """
        from ..runtime.export import export, export_program

        device = getattr(self.report, "device", None) if self.latency_us is not None else None
        if self.is_library:
            from .library import LIBRARIES

            note = self.report.summary() if self.report is not None else library_phrase(library_title(self._lowering) or "")
            return export_program(self.program, path, lowering="torch", latency_us=self.latency_us, device=device,
                                  note=note, substitutes=LIBRARIES[self._lowering].substitutes(self.program))
        if self.is_program and not self.program.customized_ops:
            note = self.report.summary() if self.report is not None else ""
            lowering = "torch.compile" if self._lowering == "torch.compile" else "torch"
            return export_program(self.program, path, lowering=lowering, latency_us=self.latency_us, device=device,
                                  note=note)
        return export(self.graph, path, latency_us=self.latency_us, device=device, options=self.options)

    def inspect(self, metrics: Any = None, **kwargs: Any) -> Any:
        """The inspector of the chosen μGraph, coloured by the tuner's measurements (and ``metrics``).

        See :func:`mirage_lab.viz.inspector.inspect`; ``kwargs``: ``color_by``, ``expand``, ``title``.
        """
        from ..ir.hooks import get  # viz sits above the pipeline: reached through the IR's hooks

        return get("inspect")(self, metrics, **kwargs)

    # ------------------------------------------------------------------ the graph's face
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in ("graph", "options", "program", "report", "search_result", "_kernel",
                                             "_fast", "_lowering"):
            raise AttributeError(name)
        return getattr(self.graph, name)

    def __repr__(self) -> str:
        lat = f"{self.latency_us:.2f} µs measured" if self.latency_us is not None else "not measured"
        if self.is_library:
            title = library_title(self._lowering) or self._lowering
            summary = self.report.summary() if self.report is not None else library_phrase(title)
            return f"OptimizedGraph({title}, the rest as torch ops, {lat}: {summary})\n{self.graph!r}"
        if self.is_program:
            summary = self.report.summary() if self.report is not None else f"{PROGRAM_PHRASE} ({self.winner})"
            return f"OptimizedGraph(the program itself, {self.winner}, {lat}: {summary})\n{self.graph!r}"
        extra = f": {self.report.summary()}" if self.report is not None and self.report.timed else ""
        return f"OptimizedGraph({self.options.tag()}, {lat}{extra})\n{self.graph!r}"

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return self.graph._repr_mimebundle_(include, exclude)


def _cuda() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:  # a broken driver: no GPU here
        return False


def _all_on_cpu(xs: Sequence[Any]) -> bool:
    return all(x.device.type == "cpu" for x in xs)


def result_from_report(program: KernelGraph, search_result: Any, report: Any) -> OptimizedGraph:
    """The :class:`OptimizedGraph` for a tuning report: the μGraph that won, else the program itself.

    Never an unmeasured pick where timing ran: if every variant failed (or the search found
    none), the program comes back, measured, with a warning naming the failures.
    """
    import warnings

    from .autotune import VariantResult

    c = report.chosen
    if isinstance(c, VariantResult):
        v = c.variant
        kernel = None
        if report.timed:
            from ..runtime.kernel import compile as rt_compile

            kernel = rt_compile(v.graph, options=v.options)
        return OptimizedGraph(v.graph, v.options, program=program, search_result=search_result, report=report,
                              kernel=kernel)
    if not any(r.ok for r in report.results):
        fails = "; ".join(f"{r.variant.tag}: {r.error}" for r in [r for r in report.results if r.error][:3])
        why = ("the search found no candidate" if not report.results
               else f"no μGraph lowering variant compiled and passed the check ({fails})" if fails
               else f"no μGraph lowering variant was measured ({report.stop_reason}; a larger tune_seconds gives "
                    f"the compiles time)")
        measured = 'measured' if report.chosen_us is not None else 'not measured'
        title = None if c is None else library_title(c.lowering)
        what = ("the program itself, unmeasured: its own lowerings failed too" if c is None
                else f"{title} for part of the program ({c.lowering}, {measured})" if title is not None
                else f"the program itself ({c.lowering}, {measured})")
        warnings.warn(f"superoptimize: {why}; returning {what}", RuntimeWarning, stacklevel=3)
    lowering = c.lowering if c is not None else "torch"
    return OptimizedGraph(program, DEFAULT_OPTIONS, program=program, search_result=search_result, report=report,
                          kernel=None if c is None else c.runner, lowering=lowering)


__all__ = ["OptimizedGraph", "result_from_report", "PROGRAM_PHRASE", "MUGRAPH"]
