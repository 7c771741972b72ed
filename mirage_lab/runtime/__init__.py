"""Running μGraphs on the GPU: compile to cached Numba-CUDA modules, call on torch tensors,
replay CUDA graphs, profile against torch baselines, export standalone modules.

Its names load on first use (torch and numba with them), not with ``import mirage_lab``.

    >>> import mirage_lab as mi
    >>> kernel = mi.runtime.compile(graph)                  # doctest: +SKIP
    >>> outs = kernel(inputs=[X, W])                        # doctest: +SKIP
"""
from ..lazy import lazy_attributes
from .paths import cache_root, default_cache_dir, simulator_active

_LAZY: dict[str, tuple[str, str | None]] = {
    **{n: ("mirage_lab.runtime.kernel", n) for n in ("compile", "precompile", "CompiledKernel", "GraphedKernel", "run_graph")},
    "profile": ("mirage_lab.runtime.profile", None),
    **{n: ("mirage_lab.runtime.export", n) for n in ("export", "export_program")},
    **{n: ("mirage_lab.runtime.latency", n) for n in ("BASELINE_LABELS", "LatencyRow", "baseline_rows")},
    **{n: ("mirage_lab.runtime.profile", n) for n in ("Timing", "floor_us", "profile_baselines", "profile_kernel")},
    "ProgramFunction": ("mirage_lab.runtime.program", "ProgramFunction"),
    "to_torch_fn": ("mirage_lab.runtime.torch_fn", "to_torch_fn"),
}
__all__ = ["cache_root", "default_cache_dir", "simulator_active", *_LAZY]

__getattr__, __dir__ = lazy_attributes(globals(), _LAZY)
