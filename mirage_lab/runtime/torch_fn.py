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

from typing import Callable

import torch

from ..errors import MirageLabError
from ..interp.reference import BINARY, UNARY, run_block_graph
from ..ir.kernel_graph import KernelGraph


def _rms_norm(x: torch.Tensor) -> torch.Tensor:
    xf = x.float()
    return (xf * torch.rsqrt(torch.mean(xf * xf, dim=-1, keepdim=True))).to(x.dtype)


def to_torch_fn(graph: KernelGraph) -> Callable[..., list[torch.Tensor]]:
    """``fn(*inputs) -> [outputs]`` computing ``graph`` with torch ops (traceable by torch.compile)."""
    if not isinstance(graph, KernelGraph):
        raise MirageLabError(f"to_torch_fn: expected a KernelGraph, got {type(graph).__name__}")
    steps = []
    for op in graph.ops:
        if op.op_type == "input":
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
