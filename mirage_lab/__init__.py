"""mirage_lab: a Jupyter-first re-implementation of the Mirage multi-level superoptimizer.

    >>> import mirage_lab as mi
    >>> g = mi.new_kernel_graph()
    >>> X = g.new_input(dims=(16, 4096), dtype=mi.float16)
    >>> W = g.new_input(dims=(4096, 4096), dtype=mi.float16)
    >>> g.mark_output(g.matmul(g.rms_norm(X), W))
"""
from .errors import GpuFaultError, GraphBuildError, GraphvizMissingError, MirageLabError, ReferenceRunError, SerializationError
from .ir import (BlockGraph, DTensor, DType, KernelGraph, STensor, ThreadGraph, bfloat16, float16, float32,
                 new_kernel_graph, new_threadblock_graph)
from .ir.serialize import MIME_TYPE, from_json, load, save
from .viz import compare, draw, inspect
from . import expr, verify  # noqa: E402  (subpackages: mi.verify.equivalent, mi.expr.abstract)
from . import runtime  # noqa: E402  (mi.runtime.compile, mi.runtime.export; numba loads only with a kernel)
from . import lab  # noqa: E402  (mi.lab.explore: the search widget; ipywidgets load on first use)
from . import search  # noqa: E402  (mi.search.search / run_search; the search API)
from . import pipeline  # noqa: E402  (search -> autotune -> compiled result; installs KernelGraph's conveniences)
from .pipeline import OptimizedGraph, superoptimize  # noqa: E402
from .pipeline import cache  # noqa: E402  (mi.cache.info() / mi.cache.clear(): superoptimize's persistent cache)

__version__ = "0.1.0"

from .lazy import lazy_attributes  # noqa: E402

# torch loads with the first run_reference call, not here (1+ s: the search and a cache hit need none of it)
__getattr__, __dir__ = lazy_attributes(globals(), {"run_reference": ("mirage_lab.interp.reference", "run_reference")})

__all__ = [
    "MirageLabError", "GraphBuildError", "SerializationError", "ReferenceRunError", "GraphvizMissingError", "GpuFaultError",
    "new_kernel_graph", "new_threadblock_graph", "KernelGraph", "BlockGraph", "ThreadGraph", "DTensor", "STensor",
    "DType", "float16", "bfloat16", "float32", "run_reference", "from_json", "load", "save", "draw", "inspect",
    "compare", "MIME_TYPE",
    "superoptimize", "OptimizedGraph", "cache", "pipeline", "search", "verify", "expr", "runtime", "lab",
]
