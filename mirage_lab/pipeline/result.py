"""What ``superoptimize`` hands back: the chosen μGraph, how it is lowered, what was measured, the kernel.

Calling it runs exactly the kernels that were measured (same μGraph, same codegen
options); :meth:`OptimizedGraph.export` writes exactly those. On a machine without a GPU,
calling it on CPU tensors runs the reference interpreter (float32 for half inputs).

    >>> best = graph.superoptimize()                 # doctest: +SKIP
    >>> (O,) = best(inputs=[X, W])                   # doctest: +SKIP
    >>> (O,) = best(inputs=[X, W], graph=True)       # CUDA-graph replay   # doctest: +SKIP
    >>> best.options, best.latency_us                # doctest: +SKIP
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Sequence

from ..codegen import CodegenOptions
from ..errors import MirageLabError
from ..ir.kernel_graph import KernelGraph


class OptimizedGraph:
    """A superoptimized μGraph with its codegen options, tuning report and compiled kernel.

    Attributes it does not define itself (``inputs``, ``outputs``, ``ops``,
    ``customized_ops``, ``to_json``, ``content_hash``...) are the μGraph's.
    """

    from_cache: str | None = None   # the cache entry it was loaded from (mirage_lab.pipeline.cache), if any

    def __init__(self, graph: KernelGraph, options: CodegenOptions, *, program: KernelGraph,
                 search_result: Any = None, report: Any = None, kernel: Any = None) -> None:
        self.graph = graph
        self.options = options
        self.program = program
        self.search_result = search_result
        self.report = report
        self._kernel = kernel

    # ------------------------------------------------------------------ what was measured
    @property
    def latency_us(self) -> float | None:
        """Median device time of the chosen kernel (CUDA-graph replay, L2-cold inputs), if measured."""
        b = getattr(self.report, "best", None)
        return b.median_us if b is not None and self.report.timed else None

    @property
    def codegen_options(self) -> CodegenOptions:
        return self.options

    @property
    def kernel(self) -> Any:
        """The compiled kernel (compiled now if this process has not yet; GPU or CUDA simulator)."""
        if self._kernel is None:
            from ..runtime.kernel import compile as rt_compile

            self._kernel = rt_compile(self.graph, options=self.options)
        return self._kernel

    # ------------------------------------------------------------------ calls
    def __call__(self, inputs: Sequence[Any] | None = None, *, graph: bool = False, poison: bool = False) -> list[Any]:
        """Run on ``inputs`` (torch tensors in the program's input order); returns the outputs.

        ``graph=True`` replays a CUDA graph captured for these input tensors (by address):
        the outputs are then the graph's buffers, overwritten by the next replay.
        """
        k = self._kernel
        if k is not None and not k.simulator:  # the hot path: kernels compiled, inputs checked by the kernel
            return k(inputs, graph=graph, poison=poison)
        if inputs is not None and _on_cpu_without_kernels(inputs):
            from ..interp.reference import run_reference

            return run_reference(self.graph, list(inputs))
        return self.kernel(inputs, graph=graph, poison=poison)

    def export(self, path: str | os.PathLike) -> Path:
        """Write the measured kernels (these options) as a standalone module; returns its path."""
        from ..runtime.export import export

        device = getattr(self.report, "device", None) if self.latency_us is not None else None
        return export(self.graph, path, latency_us=self.latency_us, device=device, options=self.options)

    # ------------------------------------------------------------------ the μGraph's face
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in ("graph", "options", "program", "report", "search_result", "_kernel"):
            raise AttributeError(name)
        return getattr(self.graph, name)

    def __repr__(self) -> str:
        lat = f"{self.latency_us:.2f} µs measured" if self.latency_us is not None else "not measured"
        return f"OptimizedGraph({self.options.tag()}, {lat})\n{self.graph!r}"

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return self.graph._repr_mimebundle_(include, exclude)


def _on_cpu_without_kernels(inputs: Sequence[Any]) -> bool:
    """CPU tensors, no GPU and no simulator: the kernels cannot run here, the reference interpreter can."""
    import torch

    from ..runtime.kernel import simulator_active

    if simulator_active() or torch.cuda.is_available():
        return False
    try:
        return all(getattr(x, "device", None) is not None and x.device.type == "cpu" for x in inputs)
    except TypeError:
        raise MirageLabError(f"inputs must be a list of torch tensors, got {type(inputs).__name__}") from None
