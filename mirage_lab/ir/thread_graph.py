"""The thread level: fusion chains derived from a block graph (MIRAGE_SPEC §1.4).

Mirage never searches thread graphs; it derives them by one rule: an elementwise unary op
(or a plain, non-reducing accumulator) runs in registers as the epilogue of its producer
when that producer has exactly one consumer and is not an input loader or a plain
accumulator. Each chain is a leading op plus the epilogue ops applied per element before
the chain's result is stored (or store-accumulated).

    >>> tg = bg.thread_graph()          # doctest: +SKIP
    >>> [c.describe() for c in tg.chains]  # doctest: +SKIP
    ['matmul -> forloop_accum', ...]
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .block_graph import UNARY_OPS

if TYPE_CHECKING:  # pragma: no cover
    from .block_graph import BlockGraph, TBOp

# Elementwise ops that can run per element in registers.
EPILOGUE_OPS = frozenset(UNARY_OPS) | {"clamp", "mul_scalar"}


def _is_plain_accum(op: "TBOp") -> bool:
    return op.op_type == "forloop_accum" and op.attrs.get("acc") is None


def can_fuse(op: "TBOp") -> bool:
    """Whether ``op`` may be an epilogue (it is elementwise unary or a plain accumulator)."""
    return op.op_type in EPILOGUE_OPS or _is_plain_accum(op)


def can_lead_into(producer: "TBOp") -> bool:
    """Whether ``producer`` may take an epilogue (Mirage: not loaders, plain accumulators or max-reductions)."""
    return producer.op_type not in ("input", "output") and not _is_plain_accum(producer)


@dataclass
class FusionChain:
    """A leading op and the epilogue ops fused after it, in order."""

    ops: list["TBOp"] = field(default_factory=list)

    @property
    def lead(self) -> "TBOp":
        return self.ops[0]

    @property
    def epilogue(self) -> list["TBOp"]:
        return self.ops[1:]

    @property
    def output(self):
        return self.ops[-1].outputs[0] if self.ops[-1].outputs else None

    def describe(self) -> str:
        return " -> ".join(op.op_type if op.op_type != "forloop_accum" else f"accum({op.attrs['acc'] or 'none'})"
                           for op in self.ops)


@dataclass
class ThreadGraph:
    """The fusion chains of one block graph; every block op is in exactly one chain."""

    block_graph: "BlockGraph"
    chains: list[FusionChain]

    @classmethod
    def from_block_graph(cls, bg: "BlockGraph") -> "ThreadGraph":
        consumers: dict[int, int] = {}
        for op in bg.ops:
            for t in op.inputs:
                consumers[t.guid] = consumers.get(t.guid, 0) + 1
        chain_of: dict[int, FusionChain] = {}
        chains: list[FusionChain] = []
        for op in bg.ops:
            if can_fuse(op):
                src = op.inputs[0]
                producer = src.op
                if producer is not None and consumers.get(src.guid, 0) == 1 and can_lead_into(producer):
                    chain = chain_of[producer.guid]
                    # Only the chain's tail may take an epilogue: the chain is a straight line.
                    if chain.ops[-1] is producer:
                        chain.ops.append(op)
                        chain_of[op.guid] = chain
                        continue
            chain = FusionChain([op])
            chains.append(chain)
            chain_of[op.guid] = chain
        return cls(bg, chains)

    def chain_of(self, op: "TBOp") -> FusionChain:
        for c in self.chains:
            if any(o is op for o in c.ops):
                return c
        raise KeyError(op)

    def to_dict(self) -> dict:
        return {"chains": [[op.guid for op in c.ops] for c in self.chains]}

    def __repr__(self) -> str:
        lines = [f"ThreadGraph({len(self.chains)} chains)"]
        for c in self.chains:
            lines.append("  " + c.describe())
        return "\n".join(lines)
