"""Running μGraphs on the GPU: compile to cached Numba-CUDA modules, call on torch tensors,
replay CUDA graphs, profile against torch baselines, export standalone modules.

    >>> import mirage_lab as mi
    >>> kernel = mi.runtime.compile(graph)                  # doctest: +SKIP
    >>> outs = kernel(inputs=[X, W])                        # doctest: +SKIP
"""
from .kernel import CompiledKernel, GraphedKernel, cache_root, compile, default_cache_dir, precompile, run_graph, simulator_active

__all__ = ["compile", "precompile", "CompiledKernel", "GraphedKernel", "run_graph", "default_cache_dir", "cache_root", "simulator_active"]
from . import profile  # noqa: E402
from .export import export, export_program  # noqa: E402
from .latency import BASELINE_LABELS, LatencyRow, baseline_rows  # noqa: E402
from .profile import Timing, floor_us, profile_baselines, profile_kernel  # noqa: E402
from .program import ProgramFunction  # noqa: E402
from .torch_fn import to_torch_fn  # noqa: E402

__all__ += ["profile", "export", "export_program", "ProgramFunction", "Timing", "floor_us", "profile_baselines", "profile_kernel",
            "to_torch_fn", "LatencyRow", "baseline_rows", "BASELINE_LABELS"]
