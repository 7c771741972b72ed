"""What the widgets know about one candidate, as plain data (no widget code here).

    >>> from mirage_lab import examples as ex
    >>> r = CandidateRecord.from_graph(0, ex.rms_norm_linear_fused(4, 256, 256, grid=8, forloop_range=4))
    >>> r.kernels, r.block_graphs, r.grid_text, r.forloop_text
    (1, 1, '8×1×1', '4')
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..ir.kernel_graph import KernelGraph
from ..runtime.latency import LatencyRow


def human_bytes(n: int | float | None) -> str:
    """``198656`` → ``'194 KiB'`` (binary units, three significant digits).

        >>> human_bytes(198656), human_bytes(33816576), human_bytes(512)
        ('194 KiB', '32.2 MiB', '512 B')
    """
    if n is None:
        return "—"
    x = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if x < 1024 or unit == "GiB":
            return f"{x:.0f} {unit}" if unit == "B" or x >= 100 else f"{x:.3g} {unit}"
        x /= 1024
    return f"{x:.3g} TiB"  # pragma: no cover


@dataclass
class CandidateRecord:
    """One candidate μGraph with its static facts and what the notebook learnt about it later."""

    index: int                              # order found (the search's CandidateFound.index)
    graph: KernelGraph
    kernels: int
    block_graphs: int
    grids: list[tuple[int, int, int]]
    forloop_ranges: list[int]
    bytes: int                              # the search's static estimate of device-memory traffic
    hash: str
    found_at: float = 0.0                   # seconds into the search
    latency: LatencyRow | None = None       # measured on a GPU (the fastest lowering's CUDA-graph replay)
    measure_error: str | None = None        # why a measurement failed (compile error, wrong result)
    lowered: Any = None                     # the tuned lowering that was timed: a pipeline Variant (graph, options)
    info: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_graph(cls, index: int, graph: KernelGraph, info: dict[str, Any] | None = None,
                   found_at: float = 0.0) -> "CandidateRecord":
        info = dict(info or {})
        bgs = [op.block_graph for op in graph.customized_ops]
        if "kernels" not in info or "bytes" not in info:
            from ..search.cost import static_cost

            cost = static_cost(graph)
            info.setdefault("kernels", cost.kernels)
            info.setdefault("bytes", cost.bytes)
        return cls(index=index, graph=graph, kernels=int(info["kernels"]), block_graphs=len(bgs),
                   grids=[tuple(b.grid_dim) for b in bgs], forloop_ranges=[b.forloop_range for b in bgs],
                   bytes=int(info["bytes"]), hash=str(info.get("hash") or graph.content_hash()),
                   found_at=found_at, info=info)

    @property
    def latency_us(self) -> float | None:
        """The measured median (µs), if measured."""
        return None if self.latency is None else self.latency.median_us

    @property
    def grid_text(self) -> str:
        return "; ".join("×".join(str(d) for d in g) for g in self.grids) or "—"

    @property
    def forloop_text(self) -> str:
        return ", ".join(str(f) for f in self.forloop_ranges) or "—"

    @property
    def latency_text(self) -> str:
        if self.latency_us is not None:
            return f"{self.latency_us:.3g} µs"
        return "error" if self.measure_error else "—"

    @property
    def module_name(self) -> str:
        """The file name Export suggests for this candidate's module."""
        return f"mirage_candidate_{self.index}_{self.hash[:8]}.py"

    @property
    def total_blocks(self) -> int:
        return sum(g[0] * g[1] * g[2] for g in self.grids)

    def as_dict(self) -> dict[str, Any]:
        """The table row as plain values (what tests and exports read)."""
        return {"index": self.index, "kernels": self.kernels, "block_graphs": self.block_graphs,
                "grid": self.grid_text, "forloop_range": self.forloop_text, "bytes": self.bytes,
                "latency_us": self.latency_us, "hash": self.hash}
