"""Running μGraphs on the GPU: compile to cached Numba-CUDA modules, call on torch tensors,
replay CUDA graphs, profile against torch baselines, export standalone modules.

    >>> import mirage_lab as mi
    >>> kernel = mi.runtime.compile(graph)                  # doctest: +SKIP
    >>> outs = kernel(inputs=[X, W])                        # doctest: +SKIP
"""
from .kernel import CompiledKernel, GraphedKernel, compile, default_cache_dir, run_graph, simulator_active

__all__ = ["compile", "CompiledKernel", "GraphedKernel", "run_graph", "default_cache_dir", "simulator_active"]
