"""Export a μGraph as a standalone Python module (torch + numba only, no mirage_lab).

The module holds the generated kernels, the ``np.row_stack`` shim, the bit-level helpers,
``run(inputs)`` and ``forward(*tensors)``, and a docstring with the printed μGraph and its
measured latency. :func:`export_program` writes a program that runs as torch ops (eagerly or
under ``torch.compile``): what ``superoptimize`` exports when no μGraph beat the program.

    >>> import mirage_lab as mi
    >>> mi.runtime.export(graph, "rms_norm_linear.py", latency_us=12.9)   # doctest: +SKIP
    >>> import rms_norm_linear; (O,) = rms_norm_linear.forward(X, W)     # doctest: +SKIP
"""
from __future__ import annotations

import datetime
import os
from pathlib import Path

from ..codegen import CodegenOptions, generate_module, torch_expr
from ..codegen.source import Src
from ..errors import MirageLabError
from ..ir.kernel_graph import KernelGraph
from .kernel import CompiledKernel
from .torch_fn import Substitute, check_substitutes


def _latency_line(latency_us: float | None, how: str, device: str | None) -> str:
    """The exported module's docstring line that says what was measured, how and where."""
    if latency_us is None:
        return "Measured latency: not measured."
    return f"Measured latency: {latency_us:.2f} µs per call ({how}, median, L2-cold inputs{', ' + device if device else ''})."


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
    lat = _latency_line(latency_us, "CUDA-graph replay", device)
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


_PROGRAM_FORWARD = '''

_compiled = None


def forward(*inputs):
    """Call with torch tensors in the program's input order (any one device); returns a list.

    Under ``COMPILE`` the first call compiles ``run`` with ``torch.compile(**COMPILE_OPTIONS)``.
    """
    global _compiled
    if len(inputs) != len(INPUTS):
        raise ValueError(f"expected {len(INPUTS)} inputs, got {len(inputs)}")
    for i, (x, (dims, dtype)) in enumerate(zip(inputs, INPUTS)):
        if tuple(x.shape) != tuple(dims) or str(x.dtype) != "torch." + dtype:
            raise ValueError(f"input {i}: expected {dtype}{list(dims)}, got {x.dtype}{list(x.shape)}")
    xs = [x.contiguous() for x in inputs]
    if not COMPILE:
        return run(xs)
    if _compiled is None:
        _compiled = torch.compile(run, **COMPILE_OPTIONS)
    return _compiled(xs)
'''


def export_program(program: KernelGraph, path: str | os.PathLike, *, lowering: str = "torch",
                   latency_us: float | None = None, device: str | None = None, note: str = "",
                   substitutes: tuple[Substitute, ...] | list[Substitute] = ()) -> Path:
    """Write ``program`` as a standalone torch module (no numba, no mirage_lab) at ``path``.

    ``lowering``: ``"torch"`` runs the program's ops eagerly; ``"torch.compile"`` compiles them
    at the first ``forward`` (set ``COMPILE_OPTIONS`` in the module to pass options). Only
    plain kernel-level ops can be written as torch calls: a program with customized ops is
    exported with :func:`export`. ``substitutes``: library calls (``runtime.torch_fn.Substitute``)
    written in place of the sub-graphs they replace, their functions' source copied into the module.

        >>> export_program(program, "rms_norm_linear.py", lowering="torch.compile")   # doctest: +SKIP
    """
    if not isinstance(program, KernelGraph):
        raise MirageLabError(f"export_program: expected a KernelGraph, got {type(program).__name__}")
    if lowering not in ("torch", "torch.compile"):
        raise MirageLabError(f"export_program: lowering must be 'torch' or 'torch.compile', got {lowering!r}")
    if program.customized_ops:
        raise MirageLabError("export_program: the program has customized ops, which have no torch lowering; "
                             "export it with mirage_lab.runtime.export(program, path)")
    if not program.outputs:
        raise MirageLabError("export_program: the program has no outputs; call graph.mark_output(t) first")
    at = check_substitutes(program, substitutes)
    covered = {g for sub in substitutes for g in sub.ops}
    how = "torch.compile of the program's torch ops" if lowering == "torch.compile" else "the program's torch ops"
    if substitutes:
        how = f"{how}, library calls ({', '.join(sorted({sub.name for sub in substitutes}))}) for parts of it"
    lat = _latency_line(latency_us, f"{how} in a CUDA graph", device)
    doc = "\n".join([
        f"The program itself, as torch ops ({lowering}), exported by mirage_lab {datetime.date.today().isoformat()}.",
        "",
        "Depends on torch only. Call ``forward(*tensors)`` with torch tensors in the input order below;",
        "it returns the list of outputs.",
        *([""] + note.splitlines() if note else []),
        "",
        lat,
        "",
        "The program:",
        "",
        *("    " + line for line in repr(program).splitlines()),
        "",
        f"Program content hash: {program.content_hash()}",
    ])
    names = {t.guid: f"t{t.guid}" for t in program.tensors}
    s = Src(0)
    s('"""' + doc.replace('"""', "'''") + '\n"""')
    s("import torch")
    s("")
    s("INPUTS = [" + ", ".join(f"({t.dims!r}, {t.dtype.name!r})" for t in program.inputs) + "]")
    s("OUTPUTS = [" + ", ".join(f"({t.dims!r}, {t.dtype.name!r})" for t in program.outputs) + "]")
    s(f"COMPILE = {lowering == 'torch.compile'}  # torch.compile(run) at the first forward")
    s("COMPILE_OPTIONS = {}")
    s("")
    for src in dict.fromkeys(sub.source for sub in substitutes):  # each library function once, as written
        s("")
        for line in src.rstrip().splitlines():
            s(line)
        s("")
    s("")
    with s.block("def run(inputs):"):
        s('"""The program\'s ops as torch calls: tensors in input order -> list of outputs."""')
        ins = ", ".join(names[t.guid] for t in program.inputs)
        s(f"{ins}{',' if len(program.inputs) == 1 else ''} = inputs")
        for op in program.ops:
            if op.op_type == "input":
                continue
            if op.guid in covered:
                sub = at.get(op.guid)
                if sub is not None:
                    s(f"{names[sub.output]} = {sub.fn.__name__}({', '.join(names[g] for g in sub.inputs)})")
                continue
            s(f"{names[op.outputs[0].guid]} = {torch_expr(op, [names[t.guid] for t in op.inputs])}")
        s("return [" + ", ".join(names[t.guid] for t in program.outputs) + "]")
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(s.text() + _PROGRAM_FORWARD)
    return p
