"""A kernel graph as a plain torch function: the baselines (eager, CUDA graph, torch.compile).

Kernel-level ops use the reference interpreter's semantics on the inputs' own dtype (fp16
stays fp16, as a user's torch program would); ``rms_norm`` is computed in float32 and cast
back; customized ops run the reference block interpreter (float32) and cast back.

    >>> import torch
    >>> from mirage_lab.examples import rms_norm_linear_program
    >>> fn = to_torch_fn(rms_norm_linear_program(2, 64, 32))
    >>> X, W = torch.randn(2, 64).half(), torch.randn(64, 32).half()
    >>> fn(X, W)[0].shape
    torch.Size([2, 32])
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import torch

from ..errors import MirageLabError
from ..interp.reference import BINARY, UNARY, run_block_graph
from ..ir.kernel_graph import KernelGraph


def _rms_norm(x: torch.Tensor) -> torch.Tensor:
    xf = x.float()
    return (xf * torch.rsqrt(torch.mean(xf * xf, dim=-1, keepdim=True))).to(x.dtype)


@dataclass(frozen=True)
class Substitute:
    """One library call standing in for a sub-graph of a program (``pipeline.library`` finds them).

    ``ops``: the guids of the program ops it replaces; ``inputs``: the guids of the tensors it reads;
    ``output``: the guid of the one tensor it produces (the last replaced op's); ``fn``: the torch
    function, called with those tensors; ``source``: ``fn``'s own module-level source text (``def
    name(...)``: torch only), which :func:`mirage_lab.runtime.export.export_program` writes out.
    """

    name: str
    ops: frozenset[int]
    inputs: tuple[int, ...]
    output: int
    fn: Callable[..., torch.Tensor]
    source: str


def check_substitutes(graph: KernelGraph, substitutes: Sequence[Substitute]) -> dict[int, Substitute]:
    """``{guid of the op each substitute's call takes the place of: substitute}``, after checking that
    nothing outside a substitute reads a tensor it hides (its replaced ops' outputs, but the one it makes)."""
    at: dict[int, Substitute] = {}
    hidden: dict[int, str] = {}
    covered: set[int] = set()
    for s in substitutes:
        if covered & s.ops:
            raise MirageLabError(f"library call {s.name}: it replaces ops another library call replaces")
        covered |= s.ops
        ops = [op for op in graph.ops if op.guid in s.ops]
        if len(ops) != len(s.ops) or s.output not in {t.guid for op in ops for t in op.outputs}:
            raise MirageLabError(f"library call {s.name}: its ops or its output are not this program's")
        at[max(op.guid for op in ops)] = s
        hidden.update({t.guid: s.name for op in ops for t in op.outputs if t.guid != s.output})
    for op in graph.ops:
        if op.guid in covered:
            continue
        for t in op.inputs:
            if t.guid in hidden:
                raise MirageLabError(f"library call {hidden[t.guid]}: op {op.guid} ({op.op_type}) reads t{t.guid}, "
                                     "which the call does not produce")
    for t in graph.outputs:
        if t.guid in hidden:
            raise MirageLabError(f"library call {hidden[t.guid]}: the program's output t{t.guid} is hidden inside it")
    return at


def to_torch_fn(graph: KernelGraph, substitutes: Sequence[Substitute] = ()) -> Callable[..., list[torch.Tensor]]:
    """``fn(*inputs) -> [outputs]`` computing ``graph`` with torch ops (traceable by torch.compile).

    ``substitutes``: library calls (:class:`Substitute`) that replace sub-graphs; each runs where
    the last op it replaces was, the other ops run as torch ops.
    """
    if not isinstance(graph, KernelGraph):
        raise MirageLabError(f"to_torch_fn: expected a KernelGraph, got {type(graph).__name__}")
    at = check_substitutes(graph, substitutes)
    covered = {g for s in substitutes for g in s.ops}
    steps = []
    for op in graph.ops:
        if op.op_type == "input":
            continue
        if op.guid in covered:
            s = at.get(op.guid)
            if s is not None:
                steps.append((s.fn, list(s.inputs), [s.output], False))
            continue
        t = op.op_type
        ins = [x.guid for x in op.inputs]
        outs = [x.guid for x in op.outputs]
        if t == "matmul":
            f = torch.matmul
        elif t == "reduction":
            d = op.attrs["dim"]
            f = lambda x, d=d: x.sum(dim=d, keepdim=True)  # noqa: E731
        elif t == "rms_norm":
            f = _rms_norm
        elif t == "clamp":
            lo, hi = op.attrs["lo"], op.attrs["hi"]
            f = lambda x, lo=lo, hi=hi: torch.clamp(x, lo, hi)  # noqa: E731
        elif t in UNARY:
            f = UNARY[t]
        elif t in BINARY:
            f = BINARY[t]
        elif t == "customized":
            bg = op.block_graph

            def f(*xs, bg=bg):
                return [o.to(xs[0].dtype) for o in run_block_graph(bg, [x.float() for x in xs])]
        else:
            raise MirageLabError(f"to_torch_fn: op type {t!r} has no torch lowering")
        steps.append((f, ins, outs, t == "customized"))
    in_ids = [t.guid for t in graph.inputs]
    out_ids = [t.guid for t in graph.outputs]

    def fn(*inputs: torch.Tensor) -> list[torch.Tensor]:
        env = dict(zip(in_ids, inputs))
        for f, ins, outs, multi in steps:
            r = f(*[env[i] for i in ins])
            if multi:
                env.update(zip(outs, r))
            else:
                env[outs[0]] = r
        return [env[i] for i in out_ids]

    fn.__name__ = "mugraph_torch_fn"
    return fn
