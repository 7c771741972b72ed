"""Fingerprints of whole μGraphs, composed from a backend's op-level functions (:class:`.numpy_backend.FieldOps`).

A fingerprint of a kernel tensor of dims ``D`` is a uint16 array ``[k, *D]`` of Z_pq values,
one slice per random test. Inputs are drawn uniformly from Z_pq with a seed; every op maps
its inputs' fingerprints to its output's exactly as the reference interpreter maps floats
(MIRAGE_SPEC §1 semantics, §4 arithmetic).

The search computes fingerprints incrementally with :func:`kernel_op` and :func:`block_op`
(one op at a time); :func:`fingerprint_graph` is the same, run over a built graph.

    >>> import mirage_lab as mi
    >>> from mirage_lab import examples
    >>> from mirage_lab.verify.fingerprint import random_inputs, fingerprint_graph
    >>> g = examples.rms_norm_linear_program(4, 64, 32)
    >>> f = examples.rms_norm_linear_fused(4, 64, 32, grid=4, forloop_range=4)
    >>> xs = random_inputs(g, tests=2, seed=0)
    >>> bool((fingerprint_graph(g, xs)[0] == fingerprint_graph(f, xs)[0]).all())
    True
"""
from __future__ import annotations

from typing import Any, Iterator, Sequence

import numpy as np

from ..ir.block_graph import BlockGraph
from ..ir.kernel_graph import DTensor, KernelGraph
from ..ops import binary_ops, unary_ops
from ..ir.shapes import fmt
from .backends import get_ops
from .field import FP_DTYPE, PQ, FieldError
from .numpy_backend import FieldOps

_UNARY = unary_ops()    # the ops table's (mirage_lab.ops)
_BINARY = binary_ops()


def _dims_of(graph_or_dims: Any) -> list[tuple[int, ...]]:
    if isinstance(graph_or_dims, KernelGraph):
        return [t.dims for t in graph_or_dims.inputs]
    try:
        out = []
        for d in graph_or_dims:
            if isinstance(d, DTensor):
                out.append(d.dims)
            else:
                out.append(tuple(int(x) for x in d))
        return out
    except TypeError as e:
        raise FieldError(
            f"random_inputs: expected a KernelGraph or a list of dims tuples, got {type(graph_or_dims).__name__}"
        ) from e


def random_inputs(graph_or_dims: Any, tests: int = 2, seed: int | None = None) -> list[np.ndarray]:
    """Random input fingerprints: one uint16 array ``[tests, *dims]`` per graph input.

    ``graph_or_dims`` is a KernelGraph or a list of dims tuples. The same ``seed`` gives the
    same arrays in any process.

        >>> [x.shape for x in random_inputs([(2, 3), (3,)], tests=2, seed=1)]
        [(2, 2, 3), (2, 3)]
    """
    if not isinstance(tests, int) or isinstance(tests, bool) or tests < 1:
        raise FieldError(f"random_inputs: tests must be a positive int, got {tests!r}")
    rng = field_rng(seed)
    return [field_values(rng, (tests,) + tuple(d)) for d in _dims_of(graph_or_dims)]


def field_rng(seed: int | None) -> np.random.Generator:
    """The generator of every random test input (numpy's SFC64: about 3x the default PCG64's rate)."""
    return np.random.Generator(np.random.SFC64(seed))


DRAW_CHUNK = 1 << 18   # elements a pass: 2 MB of 64-bit temporaries, in cache (1 << 22: twice the time)


def field_values(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Uniform values of Z_PQ: 32 random bits each, mapped by ``(bits * PQ) >> 32`` (no rejection loop;
    bias below 1e-5), in chunks that stay in cache. At full shape these draws dominated a hit's
    confirmation: attention's K of 67M elements took 0.49 s with ``integers(0, PQ)``, 0.11 s this way."""
    out = np.empty(shape, dtype=FP_DTYPE)
    for part in draw_chunks(out):
        bits = rng.bit_generator.random_raw((part.size + 1) // 2).view(np.uint32)[:part.size].astype(np.uint64)
        bits *= PQ
        bits >>= 32
        part[:] = bits
    return out


def draw_chunks(a: np.ndarray) -> Iterator[np.ndarray]:
    """Consecutive flat views of contiguous ``a``, ``DRAW_CHUNK`` elements each, to fill in order."""
    flat = a.reshape(-1)
    for i in range(0, flat.size, DRAW_CHUNK):
        yield flat[i:i + DRAW_CHUNK]


# --------------------------------------------------------------------------- one op at a time
def kernel_op(op_type: str, attrs: dict, inputs: Sequence[Any], ops: FieldOps | None = None) -> Any:
    """The fingerprint of one kernel-level op's output from its inputs' (``[k, *dims]`` each).

    Customized ops go through :func:`fingerprint_block_graph`.

        >>> import numpy as np
        >>> x = np.array([[[1, 2], [3, 4]]], dtype=np.uint16)
        >>> kernel_op("reduction", {"dim": 0}, [x]).tolist()
        [[[4, 6]]]
    """
    ops = ops or get_ops("numpy")
    rank = len(ops.shape(inputs[0])) - 1
    if op_type == "matmul":
        return ops.matmul(inputs[0], inputs[1])
    if op_type == "reduction":
        return ops.reduce_sum(inputs[0], int(attrs["dim"]) - rank)
    if op_type == "rms_norm":
        return ops.rms_norm(inputs[0])
    if op_type in _UNARY:
        return ops.unary(op_type, inputs[0], attrs)
    if op_type in _BINARY:
        return ops.binary(op_type, inputs[0], inputs[1])
    raise FieldError(f"no fingerprint semantics for kernel op {op_type!r}")


def block_op(op_type: str, attrs: dict, inputs: Sequence[Any], tile_rank: int, forloop_range: int = 1,
             reduction_dimx: int = 64, ops: FieldOps | None = None) -> Any:
    """The fingerprint of one non-loader, non-saver block op (tiles ``[k, B, (R,) *tile]``).

    ``tile_rank`` is the number of tile dims of the first input (so ``attrs["dim"]`` can be
    addressed from the end). ``forloop_accum`` reduces axis 2 (the iterations).
    """
    ops = ops or get_ops("numpy")
    x = inputs[0]
    if op_type == "forloop_accum":
        return ops.accum(attrs.get("acc"), x, axis=2, frange=forloop_range, dimx=reduction_dimx)
    if op_type == "matmul":
        return ops.matmul(x, inputs[1])
    if op_type == "reduction":
        return ops.reduce_sum(x, int(attrs["dim"]) - tile_rank)
    if op_type == "rms_norm":
        return ops.rms_norm(x)
    if op_type == "concat":
        return ops.concat(x, inputs[1], int(attrs["dim"]) - tile_rank)
    if op_type in _UNARY:
        return ops.unary(op_type, x, attrs)
    if op_type in _BINARY:
        return ops.binary(op_type, x, inputs[1])
    raise FieldError(f"no fingerprint semantics for block op {op_type!r}")


# --------------------------------------------------------------------------- whole graphs
def fingerprint_block_graph(bg: BlockGraph, input_fps: Sequence[Any], backend: str = "numpy",
                            ops: FieldOps | None = None) -> list[Any]:
    """Fingerprints of a customized op's outputs (``[k, *out_dims]``, saver order).

    Runs the block program for the whole grid at once: loaders gather every block's tiles
    for every iteration (``[k, B, R, *tile]``), in-loop ops run on all iterations together
    (they are independent before accumulation), accumulators reduce the iteration axis,
    after-loop ops run on ``[k, B, *tile]``, savers scatter.
    """
    ops = ops or get_ops(backend)
    if len(input_fps) != len(bg.input_ops):
        raise FieldError(f"fingerprint_block_graph: the block graph has {len(bg.input_ops)} inputs, got {len(input_fps)}")
    vals: dict[int, Any] = {}
    outs: list[Any] = [None] * len(bg.output_ops)
    n_in = 0
    n_out = 0
    for op in bg.ops:
        t = op.op_type
        if t == "input":
            x = input_fps[n_in]
            n_in += 1
            vals[op.outputs[0].guid] = ops.gather_tiles(x, bg.grid_dim, op.attrs["input_map"], op.attrs["forloop_dim"],
                                                        bg.forloop_range)
        elif t == "output":
            outs[n_out] = ops.scatter_tiles(vals[op.inputs[0].guid], bg.grid_dim, op.attrs["output_map"],
                                            op.attrs["out_dims"])
            n_out += 1
        else:
            vals[op.outputs[0].guid] = block_op(t, op.attrs, [vals[s.guid] for s in op.inputs], op.inputs[0].num_dims,
                                                bg.forloop_range, bg.reduction_dimx, ops)
    return outs


def _check_inputs(graph: KernelGraph, inputs_fp: Sequence[Any], ops: FieldOps) -> list[Any]:
    if len(inputs_fp) != len(graph.inputs):
        raise FieldError(f"fingerprint_graph: the graph takes {len(graph.inputs)} inputs, got {len(inputs_fp)} fingerprints")
    out = []
    k = None
    for i, (x, t) in enumerate(zip(inputs_fp, graph.inputs)):
        x = ops.asarray(x)
        shp = ops.shape(x)
        if tuple(shp[1:]) != t.dims:
            raise FieldError(
                f"fingerprint_graph: input {i} fingerprint has shape {fmt(shp)}, expected [tests]+{fmt(t.dims)}"
            )
        if k is not None and shp[0] != k:
            raise FieldError(f"fingerprint_graph: inputs have different numbers of tests ({k} and {shp[0]})")
        k = shp[0]
        out.append(x)
    return out


def fingerprint_graph(graph: KernelGraph, inputs_fp: Sequence[Any], backend: str = "numpy",
                      return_all: bool = False, ops: FieldOps | None = None) -> Any:
    """Fingerprints of ``graph``'s outputs (numpy uint16 ``[k, *dims]``, mark_output order).

    ``inputs_fp`` come from :func:`random_inputs`. ``backend`` is ``"numpy"``, ``"cuda"`` or
    ``"auto"``. With ``return_all=True`` returns ``{tensor guid: fingerprint}`` for every
    DTensor instead (host numpy arrays).
    """
    if not isinstance(graph, KernelGraph):
        raise FieldError(f"fingerprint_graph: expected a KernelGraph, got {type(graph).__name__}")
    ops = ops or get_ops(backend)
    env: dict[int, Any] = {}
    for x, t in zip(_check_inputs(graph, inputs_fp, ops), graph.inputs):
        env[t.guid] = x
    for op in graph.ops:
        if op.op_type == "input":
            continue
        args = [env[t.guid] for t in op.inputs]
        if op.op_type == "customized":
            res = fingerprint_block_graph(op.block_graph, args, ops=ops)
        else:
            res = [kernel_op(op.op_type, op.attrs, args, ops)]
        for t, r in zip(op.outputs, res):
            if tuple(ops.shape(r)[1:]) != t.dims:  # an internal invariant
                raise FieldError(f"fingerprint_graph: {op!r} produced {ops.shape(r)}, expected [k]+{fmt(t.dims)}")
            env[t.guid] = r
    if return_all:
        return {g: ops.to_numpy(v) for g, v in env.items()}
    return [ops.to_numpy(env[t.guid]) for t in graph.outputs]
