"""Reference execution of any μGraph in torch: the ground truth for search and codegen.

Kernel-level ops run as torch ops. A customized op runs its block graph exactly as the
semantics say (MIRAGE_SPEC §1.3): each block loads its own tile of every input per
for-loop iteration, runs the in-loop ops, accumulates, and after the last iteration runs
the after-loop ops and writes its output tiles. Nothing is re-derived from the original
program.

Two modes compute the same thing: ``per_block=True`` walks the grid one block at a time
(literal, slow, for tests on small shapes); the default stacks all blocks' tiles along a
leading batch axis and runs each iteration once for the whole grid (blocks are
independent, so this is the same computation, just batched).

    >>> outs = mi.run_reference(g, [X, W])    # doctest: +SKIP
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import torch

from ..errors import ReferenceRunError
from ..ir.block_graph import BlockGraph, TBOp
from ..ir.kernel_graph import KernelGraph, KNOp
from ..ir.shapes import fmt
from ..ir.tiling import gather_plan, output_slices, tile_slices

_LOW_PRECISION = (torch.float16, torch.bfloat16)


# --------------------------------------------------------------------------- elementwise semantics
def _silu(x: torch.Tensor) -> torch.Tensor:
    return x * torch.sigmoid(x)


def _gelu(x: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.gelu(x)


UNARY = {
    "exp": torch.exp,
    "silu": _silu,
    "gelu": _gelu,
    "relu": torch.relu,
    "sqrt": torch.sqrt,
    "square": torch.square,
    "sigmoid": torch.sigmoid,
}
BINARY = {
    "add": torch.add,
    "mul": torch.mul,
    "div": torch.div,
    "sub": torch.sub,
    "pow": torch.pow,
}


def rms_norm(x: torch.Tensor) -> torch.Tensor:
    """``x / sqrt(mean(x**2))`` over the last dim, no eps (Mirage's definition)."""
    return x / torch.sqrt(torch.mean(x * x, dim=-1, keepdim=True))


# --------------------------------------------------------------------------- kernel level
def _run_kernel_op(op: KNOp, args: list[torch.Tensor], per_block: bool) -> list[torch.Tensor]:
    t = op.op_type
    if t == "matmul":
        return [torch.matmul(args[0], args[1])]
    if t == "reduction":
        return [args[0].sum(dim=op.attrs["dim"], keepdim=True)]
    if t == "rms_norm":
        return [rms_norm(args[0])]
    if t == "clamp":
        return [torch.clamp(args[0], op.attrs["lo"], op.attrs["hi"])]
    if t in UNARY:
        return [UNARY[t](args[0])]
    if t in BINARY:
        return [BINARY[t](args[0], args[1])]
    if t == "customized":
        run = run_block_graph_per_block if per_block else run_block_graph
        return run(op.block_graph, args)
    raise ReferenceRunError(f"run_reference: op type {t!r} has no reference semantics")


def _compute_dtype(inputs: Sequence[torch.Tensor]) -> torch.dtype:
    dt = inputs[0].dtype
    for x in inputs[1:]:
        dt = torch.promote_types(dt, x.dtype)
    return torch.float32 if dt in _LOW_PRECISION else dt


def _numpy_hint(x: Any) -> str:
    return "; convert it with torch.from_numpy(x)" if type(x).__module__ == "numpy" else ""


def _input_list(inputs: Any, graph: KernelGraph) -> list[Any]:
    """``inputs`` as a list, or a ReferenceRunError saying how to pass them."""
    decl = ", ".join(f"{t.dtype.name}{fmt(t.dims)}" for t in graph.inputs)
    if isinstance(inputs, (list, tuple)):
        return list(inputs)
    if inputs is None:
        raise ReferenceRunError(f"run_reference: no inputs given; the graph takes {len(graph.inputs)} "
                                f"({decl}): call mi.run_reference(graph, [x, ...]) with torch tensors")
    what = "a single tensor" if isinstance(inputs, torch.Tensor) else type(inputs).__name__
    raise ReferenceRunError(f"run_reference: inputs must be a list of torch tensors ({decl}), got {what}"
                            f"{_numpy_hint(inputs)}; wrap them in a list: [x, ...]")


def run_reference(graph: KernelGraph, inputs: Sequence[torch.Tensor], *, per_block: bool = False) -> list[torch.Tensor]:
    """Run ``graph`` on torch tensors and return its outputs, in ``mark_output`` order.

    ``inputs`` follow the order of ``new_input``. Half-precision inputs are computed in
    float32 and the outputs cast back; float32/float64 inputs are computed as given.

    >>> import torch, mirage_lab as mi
    >>> g = mi.new_kernel_graph(); a = g.new_input((2, 3), dtype=mi.float32)
    >>> g.mark_output(g.exp(a))
    >>> mi.run_reference(g, [torch.zeros(2, 3)])[0]
    tensor([[1., 1., 1.],
            [1., 1., 1.]])
    """
    if not isinstance(graph, KernelGraph):
        raise ReferenceRunError(f"run_reference: expected a KernelGraph, got {type(graph).__name__}")
    if not graph.outputs:
        raise ReferenceRunError("run_reference: the graph has no outputs; call graph.mark_output(t) first")
    inputs = _input_list(inputs, graph)
    if len(inputs) != len(graph.inputs):
        raise ReferenceRunError(
            f"run_reference: the graph takes {len(graph.inputs)} inputs "
            f"({', '.join(fmt(t.dims) for t in graph.inputs)}) but got {len(inputs)}"
        )
    for i, (x, t) in enumerate(zip(inputs, graph.inputs)):
        if not isinstance(x, torch.Tensor):
            raise ReferenceRunError(f"run_reference: input {i} must be a torch.Tensor, got {type(x).__name__}"
                                    f"{_numpy_hint(x)}")
        if tuple(x.shape) != t.dims:
            raise ReferenceRunError(
                f"run_reference: input {i} has shape {fmt(tuple(x.shape))} but the graph declares {fmt(t.dims)}"
            )
        if not x.dtype.is_floating_point:
            raise ReferenceRunError(f"run_reference: input {i} has dtype {x.dtype}; μGraphs compute on floating point")
        if x.device != inputs[0].device:
            raise ReferenceRunError(
                f"run_reference: inputs are on different devices ({inputs[0].device} and {x.device})"
            )
    out_dtype = inputs[0].dtype
    for x in inputs[1:]:
        out_dtype = torch.promote_types(out_dtype, x.dtype)
    cdt = _compute_dtype(inputs)
    env: dict[int, torch.Tensor] = {}
    for x, t in zip(inputs, graph.inputs):
        env[t.guid] = x.to(cdt)
    for op in graph.ops:
        if op.op_type == "input":
            continue
        results = _run_kernel_op(op, [env[t.guid] for t in op.inputs], per_block)
        for t, r in zip(op.outputs, results):
            if tuple(r.shape) != t.dims:  # an internal invariant: shapes were validated at build time
                raise ReferenceRunError(f"run_reference: {op!r} produced {tuple(r.shape)}, expected {t.dims}")
            env[t.guid] = r
    return [env[t.guid].to(out_dtype) for t in graph.outputs]


# --------------------------------------------------------------------------- block level, shared
def _block_op(op: TBOp, args: list[torch.Tensor], bg: BlockGraph) -> torch.Tensor:
    """Run a non-loader, non-saver, non-accumulator block op on batched tiles ``[B, *tile]``."""
    t = op.op_type
    if t == "matmul":
        return torch.matmul(args[0], args[1])
    if t == "reduction":
        return args[0].sum(dim=op.attrs["dim"] + 1, keepdim=True)
    if t == "rms_norm":
        return rms_norm(args[0])
    if t == "concat":
        return torch.cat([args[0], args[1]], dim=op.attrs["dim"] + 1)
    if t == "clamp":
        return torch.clamp(args[0], op.attrs["lo"], op.attrs["hi"])
    if t == "mul_scalar":
        return args[0] * op.attrs["scalar"]
    if t in UNARY:
        return UNARY[t](args[0])
    if t in BINARY:
        return BINARY[t](args[0], args[1])
    raise ReferenceRunError(f"run_reference: block op type {t!r} has no reference semantics")


def _accum_update(op: TBOp, acc: torch.Tensor | None, x: torch.Tensor, bg: BlockGraph) -> torch.Tensor:
    kind = op.attrs["acc"]
    if kind is None:
        inc = x
    elif kind in ("sum", "mean"):
        inc = x.sum(dim=-1, keepdim=True)
    elif kind == "rms":
        inc = (x * x).sum(dim=-1, keepdim=True)
    elif kind == "sum_todimx":
        dimx = bg.reduction_dimx
        # out[.., j] += sum_k x[.., j + dimx*k]: split the last dim as (k, j) and sum over k.
        inc = x.reshape(*x.shape[:-1], x.shape[-1] // dimx, dimx).sum(dim=-2)
    else:  # pragma: no cover - validated at build time
        raise ReferenceRunError(f"unknown accumulator {kind!r}")
    return inc.clone() if acc is None else acc + inc


def _accum_finish(op: TBOp, acc: torch.Tensor, bg: BlockGraph) -> torch.Tensor:
    kind = op.attrs["acc"]
    w = op.inputs[0].dims[-1]
    if kind == "mean":
        return acc / (bg.forloop_range * w)
    if kind == "rms":
        return torch.sqrt(acc / (bg.forloop_range * w))
    return acc


def _execute(bg: BlockGraph, load_tile, save_tile) -> None:
    """The block program: loop over iterations, accumulate, run the epilogue, save.

    ``load_tile(i_loader, iteration)`` returns the batched tile of one loader;
    ``save_tile(i_saver, value)`` stores a batched result tile.
    """
    vals: dict[int, torch.Tensor] = {}
    accs: dict[int, torch.Tensor | None] = {op.guid: None for op in bg.ops if op.op_type == "forloop_accum"}
    for it in range(bg.forloop_range):
        for op in bg.ops:
            if op.op_type == "input":
                vals[op.outputs[0].guid] = load_tile(bg.input_ops.index(op), it)
            elif op.op_type == "forloop_accum":
                accs[op.guid] = _accum_update(op, accs[op.guid], vals[op.inputs[0].guid], bg)
            elif op.op_type != "output" and not op.outputs[0].after_accum:
                vals[op.outputs[0].guid] = _block_op(op, [vals[t.guid] for t in op.inputs], bg)
    for op in bg.ops:
        if op.op_type == "forloop_accum":
            vals[op.outputs[0].guid] = _accum_finish(op, accs[op.guid], bg)
        elif op.op_type == "output":
            save_tile(bg.output_ops.index(op), vals[op.inputs[0].guid])
        elif op.op_type != "input" and op.outputs[0].after_accum:
            vals[op.outputs[0].guid] = _block_op(op, [vals[t.guid] for t in op.inputs], bg)


# --------------------------------------------------------------------------- block level, batched
def tile_view(x: torch.Tensor, grid: Sequence[int], imap: Sequence[int], fmap: int, frange: int) -> torch.Tensor:
    """All blocks' tiles of ``x`` for all iterations as one strided view, no copy: ``[gx|1, gy|1, gz|1, R, *tile]``
    (an axis that does not split ``x`` has size 1; R = 1 when not looped). :func:`mirage_lab.ir.tiling.gather_plan`."""
    x = x.contiguous()
    shape, strides, _ = gather_plan(x.shape, grid, imap, fmap, frange)
    return x.as_strided(shape, strides, x.storage_offset())


def blocks_of(v: torch.Tensor, grid: Sequence[int]) -> torch.Tensor:
    """A ``[gx|1, gy|1, gz|1, ...]`` view with its grid axes broadcast and flattened: ``[gx*gy*gz, ...]``."""
    rest = v.shape[3:]
    return v.expand(grid[0], grid[1], grid[2], *rest).reshape(grid[0] * grid[1] * grid[2], *rest)


def gather_tiles(x: torch.Tensor, grid: Sequence[int], imap: Sequence[int], fmap: int, frange: int) -> torch.Tensor:
    """All blocks' tiles of ``x`` for all iterations: shape ``[gx*gy*gz, R, *tile]`` (R = 1 when not looped).

    One strided view of ``x`` (:func:`tile_view`), broadcast over the grid axes that do not split it.
    """
    return blocks_of(tile_view(x, grid, imap, fmap, frange), grid)


def scatter_tiles(tiles: torch.Tensor, grid: Sequence[int], omap: Sequence[int], out_dims: Sequence[int]) -> torch.Tensor:
    """Inverse of the output map: ``[gx*gy*gz, *tile]`` -> the full output tensor."""
    tile = list(tiles.shape[1:])
    v = tiles.reshape(grid[0], grid[1], grid[2], *tile)
    order = []
    for k in range(len(tile)):
        for a in range(3):
            if grid[a] > 1 and omap[a] == k:
                order.append(a)
        order.append(3 + k)
    # Unmapped grid axes have size 1 (validated): drop them by putting them first and squeezing.
    unmapped = [a for a in range(3) if a not in order]
    v = v.permute(unmapped + order)
    v = v.reshape([int(s) for s in v.shape[len(unmapped):]])
    return v.reshape(tuple(out_dims))


def run_block_graph(bg: BlockGraph, args: list[torch.Tensor]) -> list[torch.Tensor]:
    """Run a customized op's block graph for the whole grid at once (blocks batched)."""
    # Views, copied one iteration at a time: an operand replicated over a grid axis (X of a row x column
    # grid, read by every column block) copied for all iterations at once took frange times the memory
    # (4.8 GB of float64 for one tile of Gemma 7B's GeGLU prefill, which killed search workers confirming it)
    views = [tile_view(x, bg.grid_dim, op.attrs["input_map"], op.attrs["forloop_dim"], bg.forloop_range)
             for op, x in zip(bg.input_ops, args)]
    outs: list[torch.Tensor | None] = [None] * len(bg.output_ops)
    fixed: dict[int, torch.Tensor] = {}   # loaders outside the loop: copied once

    def load(i: int, it: int) -> torch.Tensor:
        v = views[i]
        if v.shape[3] == 1:
            if i not in fixed:
                fixed[i] = blocks_of(v[:, :, :, 0], bg.grid_dim)
            return fixed[i]
        return blocks_of(v[:, :, :, it], bg.grid_dim)

    def save(i: int, value: torch.Tensor) -> None:
        op = bg.output_ops[i]
        outs[i] = scatter_tiles(value, bg.grid_dim, op.attrs["output_map"], op.attrs["out_dims"])

    _execute(bg, load, save)
    return outs  # type: ignore[return-value]


# --------------------------------------------------------------------------- block level, literal
def run_block_graph_per_block(bg: BlockGraph, args: list[torch.Tensor]) -> list[torch.Tensor]:
    """Run a block graph one block at a time, with the spec's tile-index formulas."""
    outs = [torch.full(op.attrs["out_dims"], math.nan, dtype=args[0].dtype, device=args[0].device)
            for op in bg.output_ops]
    gx, gy, gz = bg.grid_dim
    for bz in range(gz):
        for by in range(gy):
            for bx in range(gx):
                block = (bx, by, bz)

                def load(i: int, it: int, block=block) -> torch.Tensor:
                    op = bg.input_ops[i]
                    sl = tile_slices(args[i].shape, bg.grid_dim, op.attrs["input_map"], op.attrs["forloop_dim"],
                                     bg.forloop_range, block, it)
                    return args[i][sl].unsqueeze(0)

                def save(i: int, value: torch.Tensor, block=block) -> None:
                    op = bg.output_ops[i]
                    sl = output_slices(op.inputs[0].dims, bg.grid_dim, op.attrs["output_map"], block)
                    outs[i][sl] = value[0]

                _execute(bg, load, save)
    return outs
