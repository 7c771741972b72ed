"""Export a μGraph as a standalone Python module (torch + numba only, no mirage_lab).

The module holds the generated kernels, the ``np.row_stack`` shim, the bit-level helpers,
``run(inputs)`` and ``forward(*tensors)``, and a docstring with the printed μGraph and its
measured latency.

    >>> import mirage_lab as mi
    >>> mi.runtime.export(graph, "rms_norm_linear.py", latency_us=12.9)   # doctest: +SKIP
    >>> import rms_norm_linear; (O,) = rms_norm_linear.forward(X, W)     # doctest: +SKIP
"""
from __future__ import annotations

import datetime
import os
from pathlib import Path

from ..codegen import CodegenOptions, generate_module
from ..errors import MirageLabError
from ..ir.kernel_graph import KernelGraph
from .kernel import CompiledKernel

_FORWARD = '''

def forward(*inputs):
    """Call with torch tensors in the μGraph's input order (CUDA tensors, contiguous); returns a list."""
    if len(inputs) != len(INPUTS):
        raise ValueError(f"expected {len(INPUTS)} inputs, got {len(inputs)}")
    for i, (x, (dims, dtype)) in enumerate(zip(inputs, INPUTS)):
        if tuple(x.shape) != tuple(dims) or str(x.dtype) != "torch." + dtype:
            raise ValueError(f"input {i}: expected {dtype}{list(dims)}, got {x.dtype}{list(x.shape)}")
    return run([x.contiguous() for x in inputs])
'''


def export(graph_or_kernel: KernelGraph | CompiledKernel, path: str | os.PathLike, latency_us: float | None = None,
           *, device: str | None = None, options: CodegenOptions | None = None) -> Path:
    """Write ``graph_or_kernel`` as a standalone module at ``path``; returns the path.

    ``latency_us``: a measured latency to record in the docstring (say how it was measured
    with ``device``); ``None`` records that none was measured. A compiled kernel is exported
    with the codegen options it was compiled with (the kernels that were measured).
    """
    if isinstance(graph_or_kernel, CompiledKernel):
        graph = graph_or_kernel.graph
        options = options or graph_or_kernel.options
    elif isinstance(graph_or_kernel, KernelGraph):
        graph = graph_or_kernel
    else:
        raise MirageLabError(f"export: expected a KernelGraph or a compiled kernel, got {type(graph_or_kernel).__name__}")
    lat = (f"Measured latency: {latency_us:.2f} µs per call (CUDA-graph replay, median, L2-cold inputs"
           f"{', ' + device if device else ''})." if latency_us is not None else "Measured latency: not measured.")
    doc = "\n".join([
        f"Standalone kernels for a mirage_lab μGraph (exported {datetime.date.today().isoformat()}).",
        "",
        "Depends on torch and numba (numba-cuda) only. Call ``forward(*tensors)`` with CUDA torch",
        "tensors in the input order below; it returns the list of outputs. Set NUMBA_ENABLE_CUDASIM=1",
        "before importing to run it on the CPU simulator (CPU tensors, tiny shapes).",
        "",
        lat,
        "",
        "The μGraph:",
        "",
        *("    " + line for line in repr(graph).splitlines()),
        "",
        f"μGraph content hash: {graph.content_hash()}",
    ])
    gen = generate_module(graph, standalone=True, docstring=doc, options=options or CodegenOptions())
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(gen.source + _FORWARD)
    return p
