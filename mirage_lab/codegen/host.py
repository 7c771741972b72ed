"""Host code of a generated module: the launch sequence of one kernel graph, as Python text.

Plain kernel-level ops become torch calls (a kernel-level matmul is cuBLAS through
``torch.matmul``); each customized op becomes one launch of its generated kernel on
torch's current stream. The same text serves the runtime's cached modules and exported
standalone modules.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import CodegenError
from .block_kernel import KernelInfo
from .source import Src

if TYPE_CHECKING:  # pragma: no cover
    from ..ir.kernel_graph import KernelGraph, KNOp

_TORCH_DT = {"float16": "torch.float16", "bfloat16": "torch.bfloat16", "float32": "torch.float32"}

_TORCH_OPS = {
    "matmul": "torch.matmul({0}, {1})",
    "exp": "torch.exp({0})",
    "silu": "{0} * torch.sigmoid({0})",
    "gelu": "torch.nn.functional.gelu({0})",
    "relu": "torch.relu({0})",
    "sqrt": "torch.sqrt({0})",
    "square": "torch.square({0})",
    "sigmoid": "torch.sigmoid({0})",
    "add": "torch.add({0}, {1})",
    "mul": "torch.mul({0}, {1})",
    "div": "torch.div({0}, {1})",
    "pow": "torch.pow({0}, {1})",
}


def torch_expr(op: "KNOp", args: list[str]) -> str:
    """A torch expression computing a plain kernel-level op (the interpreter's semantics)."""
    t = op.op_type
    if t in _TORCH_OPS:
        return _TORCH_OPS[t].format(*args)
    if t == "reduction":
        return f"{args[0]}.sum(dim={op.attrs['dim']}, keepdim=True)"
    if t == "clamp":
        return f"torch.clamp({args[0]}, {op.attrs['lo']!r}, {op.attrs['hi']!r})"
    if t == "rms_norm":  # in float32, no eps (Mirage's definition), cast back
        x = args[0]
        return f"({x}.float() * torch.rsqrt(torch.mean({x}.float() ** 2, dim=-1, keepdim=True))).to({x}.dtype)"
    raise CodegenError(f"kernel-level op {t!r} has no torch lowering")


def emit_host(graph: "KernelGraph", infos: dict[int, KernelInfo]) -> str:
    """The ``run(inputs)`` function of a module, launching ``infos[op.guid]`` for customized ops.

    The tensors the kernels write are listed once (``_BUFS``): intermediates and scratch
    are kept per (device, stream) and the next call's outputs are allocated after this
    call's launches, so a call's path to its first launch allocates nothing (``_Buffers``);
    ``poison=True``, CUDA-graph capture and large outputs allocate them in the call.
    """
    s = Src(0)
    names = {t.guid: f"t{t.guid}" for t in graph.tensors}
    ins = ", ".join(names[t.guid] for t in graph.inputs)
    s("INPUTS = [" + ", ".join(f"({t.dims!r}, {t.dtype.name!r})" for t in graph.inputs) + "]")
    s("OUTPUTS = [" + ", ".join(f"({t.dims!r}, {t.dtype.name!r})" for t in graph.outputs) + "]")
    for info in infos.values():
        views = list(info.input_views) + ["int16" if dt != "float32" else "float32" for dt in info.output_dtypes]
        smem = f", smem={info.dyn_smem_bytes}" if info.dyn_smem_bytes else ""
        views += ["float32"] + (["int32"] if info.counters else [])
        s(f"_launch_{info.name} = _Launch({info.name}, {info.grid!r}, {info.threads}, {views!r}{smem})")
        if info.counters:   # split-K: the tiles' arrival counters, zeroed once, reset by each tile's last block
            s(f"_cnt_{info.name} = _Counters({info.counters})")
    # what the kernels write: (name, dims, torch dtype) of intermediates + scratch, and of outputs
    out_guids = {t.guid for t in graph.outputs}
    temps: list[tuple[str, str]] = []   # (variable, spec text)
    outs: list[tuple[str, str]] = []
    kernel_args: dict[int, list[str]] = {}  # customized op guid -> its kernel's arguments
    for op in graph.customized_ops:
        info = infos[op.guid]
        for t in op.outputs:
            spec = f"({t.dims!r}, {_TORCH_DT[t.dtype.name]})"
            (outs if t.guid in out_guids else temps).append((names[t.guid], spec))
        scratch = f"s_{info.name}"
        temps.append((scratch, f"(({info.scratch_floats},), torch.float32)" if info.scratch_floats else "None"))
        kernel_args[op.guid] = [names[t.guid] for t in [*op.inputs, *op.outputs]] + [scratch]
        if info.counters:
            kernel_args[op.guid].append(f"_cnt_{info.name}.get(dev, sp)")
    s("_BUFS = _Buffers([" + ", ".join(spec for _, spec in temps) + "], [" + ", ".join(spec for _, spec in outs) + "])")
    s("")
    s("")
    with s.block("def run(inputs, poison=False):"):
        s('"""Run the μGraph: torch tensors in ``new_input`` order -> list of output tensors.')
        s("")
        s("``poison=True`` fills every output and intermediate with NaN first (tests: nothing unwritten).")
        s('"""')
        s(f"{ins}{',' if len(graph.inputs) == 1 else ''} = inputs")
        s(f"dev = {names[graph.inputs[0].guid]}.device")
        if infos:
            s("sp = _stream_ptr(dev)")
            s("bufs = _BUFS.take(dev, sp, poison)")
            tv = ", ".join(v for v, _ in temps) + ("," if len(temps) == 1 else "")
            ov = ", ".join(v for v, _ in outs) + ("," if len(outs) == 1 else "")
            s(f"({tv}), ({ov}) = bufs" if outs else f"({tv}), _ = bufs")
        for op in graph.ops:
            if op.op_type == "input":
                continue
            if op.op_type != "customized":
                s(f"{names[op.outputs[0].guid]} = {torch_expr(op, [names[t.guid] for t in op.inputs])}")
                continue
            s(f"_launch_{infos[op.guid].name}.go(sp, ({', '.join(kernel_args[op.guid])}))")
        if infos:
            s("_BUFS.refill(dev, sp, bufs)  # the next call's outputs, allocated while these kernels run")
        s("return [" + ", ".join(names[t.guid] for t in graph.outputs) + "]")
    return s.text()
