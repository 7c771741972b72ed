"""Abstract expressions of μGraph ops (MIRAGE_SPEC §3 table), one op at a time or per graph.

    >>> import mirage_lab as mi
    >>> from mirage_lab import examples
    >>> g = examples.rms_norm_linear_program(16, 4096, 4096)
    >>> str(mi.expr.abstract(g.outputs[0]))
    'sum(4096, mul(div(x0, rms(4096, x0)), x1))'

A tile's expression equals its full tensor's: partitioning is invisible and only the
reduction sizes carry information. Constants are ``scale`` terms (``mul_scalar(x, c)`` is
``scale(c, x)``, the ``mean`` accumulator ``scale(1/(frange·w), sum(frange·w, e))``): the
oracle ignores them, as Mirage does, except under a function such as exp, so
``exp(c·y)`` and ``exp(y)`` are different expressions (see :func:`.terms.scale`).
"""
from __future__ import annotations

from typing import Any, Sequence

from ..ir.block_graph import BlockGraph, STensor
from ..ir.kernel_graph import DTensor, KernelGraph
from ..ops import KERNEL, binary_ops, unary_ops
from . import terms as T
from .terms import Expr, ExprError

_UNARY = unary_ops(attrs=False)   # the ops table's (mirage_lab.ops); clamp and mul_scalar have attributes
_BINARY = binary_ops(level=KERNEL)


def _matmul(a: Expr, b: Expr, k: int, a_dims: Sequence[int] | None = None, b_dims: Sequence[int] | None = None) -> Expr:
    # concat-then-matmul (Mirage's LoRA macro): [A|B] @ [C;D] = A·C + B·D.
    if (a.op == "concat" and b.op == "concat" and a_dims is not None and b_dims is not None
            and a.n[0] == len(a_dims) - 1 and b.n[0] == len(b_dims) - 2 and a.n[1:] == b.n[1:]):
        (a1, a2), (b1, b2) = a.args, b.args
        return T.add(T.red(a.n[1], T.mul(a1, b1)), T.red(a.n[2], T.mul(a2, b2)))
    return T.red(k, T.mul(a, b))


def _elementwise_or_reduce(op_type: str, attrs: dict, input_exprs: Sequence[Expr], d0: tuple) -> Expr | None:
    """The ops kernel and block level map alike (None for the others)."""
    x = input_exprs[0]
    if op_type == "reduction":
        return T.red(d0[int(attrs["dim"])], x)
    if op_type == "rms_norm":
        return T.div(x, T.rms(d0[-1], x))
    if op_type == "clamp":
        return T.clamp(attrs["lo"], attrs["hi"], x)
    if op_type == "mul_scalar":
        return T.scale(attrs["scalar"], x)
    if op_type in _UNARY:
        return T.CONSTRUCTORS[op_type](x)
    if op_type in _BINARY:
        return T.CONSTRUCTORS[op_type](x, input_exprs[1])
    return None


def for_kernel_op(op_type: str, attrs: dict | None, input_exprs: Sequence[Expr],
                  input_dims: Sequence[Sequence[int]]) -> Expr:
    """The expression of a kernel-level op's output from its inputs' expressions and dims.

        >>> from mirage_lab.expr.terms import var
        >>> str(for_kernel_op("matmul", {}, [var(0), var(1)], [(16, 4096), (4096, 4096)]))
        'sum(4096, mul(x0, x1))'
    """
    attrs = attrs or {}
    if not input_exprs:
        raise ExprError(f"for_kernel_op: {op_type} needs input expressions")
    x = input_exprs[0]
    d0 = tuple(input_dims[0])
    if op_type == "matmul":
        return _matmul(x, input_exprs[1], d0[-1])
    e = _elementwise_or_reduce(op_type, attrs, input_exprs, d0)
    if e is not None:
        return e
    raise ExprError(f"for_kernel_op: no abstract expression for kernel op {op_type!r} "
                    "(customized ops: use for_block_op on their block graph, or abstract_graph)")


def for_block_op(op_type: str, attrs: dict | None, input_exprs: Sequence[Expr], input_dims: Sequence[Sequence[int]],
                 forloop_range: int = 1, reduction_dimx: int = 64) -> Expr:
    """The expression of a block-level op's output (tiles' dims in ``input_dims``).

    Loaders (``input``) and savers (``output``) pass their DTensor's / STensor's expression
    through. Accumulators: ``None`` → ``sum(frange, e)``; ``sum`` → ``sum(frange·w, e)``;
    ``mean`` → ``scale(1/(frange·w), sum(frange·w, e))``; ``sum_todimx`` → ``sum(frange·w/dimx, e)``; ``rms`` →
    ``rms(frange·w, e)`` (w = the tile's last dim).

        >>> from mirage_lab.expr.terms import var
        >>> str(for_block_op("forloop_accum", {"acc": "rms"}, [var(0)], [(16, 128)], forloop_range=32))
        'rms(4096, x0)'
    """
    attrs = attrs or {}
    if not input_exprs:
        raise ExprError(f"for_block_op: {op_type} needs input expressions")
    x = input_exprs[0]
    d0 = tuple(input_dims[0]) if input_dims else ()
    if op_type in ("input", "output"):
        return x
    if op_type == "forloop_accum":
        kind = attrs.get("acc")
        w = d0[-1]
        if kind is None:
            return T.red(forloop_range, x)
        if kind == "sum":
            return T.red(forloop_range * w, x)
        if kind == "mean":
            return T.scale(1.0 / (forloop_range * w), T.red(forloop_range * w, x))
        if kind == "sum_todimx":
            if (forloop_range * w) % reduction_dimx:
                raise ExprError(f"for_block_op: sum_todimx of width {w} does not fold into dimx={reduction_dimx}")
            return T.red(forloop_range * w // reduction_dimx, x)
        if kind == "rms":
            return T.rms(forloop_range * w, x)
        raise ExprError(f"for_block_op: unknown accumulator {kind!r}")
    if op_type == "matmul":
        return _matmul(x, input_exprs[1], d0[-1], d0, tuple(input_dims[1]))
    if op_type == "concat":
        ax = int(attrs["dim"])
        return T.concat(x, input_exprs[1], ax, d0[ax], tuple(input_dims[1])[ax])
    if op_type == "sub":
        return T.add(x, T.neg(input_exprs[1]))
    e = _elementwise_or_reduce(op_type, attrs, input_exprs, d0)
    if e is not None:
        return e
    raise ExprError(f"for_block_op: no abstract expression for block op {op_type!r}")


def abstract_block_graph(bg: BlockGraph, input_exprs: Sequence[Expr]) -> dict[int, Expr]:
    """``{STensor guid: expression}`` for a block graph whose loaders see ``input_exprs``.

    The savers' expressions are under key ``("output", i)`` for saver ``i``.
    """
    vals: dict[Any, Expr] = {}
    n_in = n_out = 0
    for op in bg.ops:
        if op.op_type == "input":
            vals[op.outputs[0].guid] = input_exprs[n_in]
            n_in += 1
        elif op.op_type == "output":
            vals[("output", n_out)] = vals[op.inputs[0].guid]
            n_out += 1
        else:
            vals[op.outputs[0].guid] = for_block_op(op.op_type, op.attrs, [vals[t.guid] for t in op.inputs],
                                                    [t.dims for t in op.inputs], bg.forloop_range, bg.reduction_dimx)
    return vals


def abstract_graph(graph: KernelGraph) -> dict[int, Expr]:
    """``{DTensor guid: expression}`` for every tensor of a kernel graph (inputs are ``x0, x1, ...``)."""
    if not isinstance(graph, KernelGraph):
        raise ExprError(f"abstract_graph: expected a KernelGraph, got {type(graph).__name__}")
    env: dict[int, Expr] = {}
    for i, t in enumerate(graph.inputs):
        env[t.guid] = T.var(i)
    for op in graph.ops:
        if op.op_type == "input":
            continue
        ins = [env[t.guid] for t in op.inputs]
        if op.op_type == "customized":
            vals = abstract_block_graph(op.block_graph, ins)
            for i, t in enumerate(op.outputs):
                env[t.guid] = vals[("output", i)]
        else:
            env[op.outputs[0].guid] = for_kernel_op(op.op_type, op.attrs, ins, [t.dims for t in op.inputs])
    return env


def abstract(tensor: DTensor | STensor) -> Expr:
    """The abstract expression of a DTensor (or of an STensor of a bound block graph).

        >>> import mirage_lab as mi
        >>> g = mi.new_kernel_graph(); a = g.new_input((4, 8)); b = g.new_input((8, 2))
        >>> str(abstract(g.exp(g.matmul(a, b))))
        'exp(sum(8, mul(x0, x1)))'
    """
    if isinstance(tensor, DTensor):
        return abstract_graph(tensor.graph)[tensor.guid]
    if isinstance(tensor, STensor):
        bg = tensor.graph
        kg = bg.input_dtensors[0].graph if bg.input_dtensors else None
        if kg is None:
            raise ExprError("abstract: this block graph has no inputs yet")
        env = abstract_graph(kg)
        vals = abstract_block_graph(bg, [env[t.guid] for t in bg.input_dtensors])
        return vals[tensor.guid]
    raise ExprError(f"abstract: expected a DTensor or STensor, got {type(tensor).__name__}")
