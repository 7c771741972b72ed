"""A static cost of a μGraph, used to rank candidates before (or without) GPU timings.

Ranked by (number of kernels, estimated bytes moved between device memory and the chip):
fewer launches first, then less traffic. A customized op reads each input tile once per
block and iteration (replicated tiles are read by every block that needs them) and
writes its outputs once; a plain kernel op reads its inputs and writes its output.

    >>> static_cost(g)            # doctest: +SKIP
    StaticCost(kernels=1, bytes=33816576)
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ir.kernel_graph import KernelGraph


@dataclass(frozen=True, order=True)
class StaticCost:
    kernels: int
    bytes: int

    def as_dict(self) -> dict:
        return {"kernels": self.kernels, "bytes": self.bytes}


def static_cost(graph: KernelGraph) -> StaticCost:
    kernels = 0
    total = 0
    for op in graph.ops:
        if op.op_type == "input":
            continue
        kernels += 1
        total += sum(t.nbytes() for t in op.outputs)
        if op.op_type != "customized":
            total += sum(t.nbytes() for t in op.inputs)
            continue
        bg = op.block_graph
        for lop, t in zip(bg.input_ops, op.inputs):
            tile = lop.outputs[0]
            iters = bg.forloop_range if lop.attrs["forloop_dim"] >= 0 else 1
            total += tile.numel() * t.dtype.itemsize * bg.num_blocks * iters
    return StaticCost(kernels, total)
