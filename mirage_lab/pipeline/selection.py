"""Measuring given μGraphs fully, one after another, in this process: the fastest correct one.

Where :func:`~.autotune.autotune` tries the lowering variants of a search's candidates in
parallel within a time budget, :func:`select_fastest` measures exactly the ``(graph,
options)`` pairs it is given, each in every launch mode (CUDA-graph replay, eager launches,
Python call time), as ``benchmarks/gpu_bench.py`` reports them. A candidate is checked
the tuner's way (:func:`~.autotune.check_outputs`) before it is timed.

    >>> import mirage_lab as mi
    >>> sel = mi.pipeline.select_fastest([g1, g2], [X, W])      # doctest: +SKIP
    >>> sel.best.median_us, sel.table()                          # doctest: +SKIP
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

from ..codegen import DEFAULT_OPTIONS, CodegenOptions
from ..errors import MirageLabError
from ..ir.kernel_graph import KernelGraph
from ..runtime.latency import CANDIDATE, LatencyRow, current_device
from .autotune import TOLERANCE, check_outputs

if TYPE_CHECKING:  # pragma: no cover
    import torch

    from ..runtime.kernel import CompiledKernel
    from ..runtime.profile import Timing


@dataclass
class Candidate:
    """One candidate μGraph with what happened to it."""

    graph: KernelGraph
    options: CodegenOptions = DEFAULT_OPTIONS
    kernel: "CompiledKernel | None" = None
    timings: "dict[str, Timing]" = field(default_factory=dict)
    rel_err: float | None = None
    error: str | None = None

    @property
    def median_us(self) -> float:
        t = self.timings.get("cuda_graph")
        return t.median_us if t else float("inf")


@dataclass
class Selection:
    """The fastest correct candidate and every measurement taken on the way."""

    best: Candidate | None
    candidates: list[Candidate]

    def latency_rows(self, numbers: Sequence[int] | None = None, *, mode: str = "cuda_graph",
                     device: str | None = None) -> list[LatencyRow]:
        """One :class:`~mirage_lab.runtime.latency.LatencyRow` per timed, correct candidate (for the plots).

        ``numbers[i]`` is the number ``candidates[i]``'s graph has in the caller's list (its
        label is ``"candidate {n}"``); by default graphs are numbered in the order given. A
        graph timed under several codegen options gets one row per option, the tag in its label.
        ``device``: where it ran (default: torch's current CUDA device).

        >>> Selection(None, []).latency_rows()
        []
        """
        if numbers is not None and len(numbers) != len(self.candidates):
            raise ValueError(f"latency_rows: {len(numbers)} numbers for {len(self.candidates)} candidates")
        graph_no: dict[int, int] = {}
        for c in self.candidates:
            graph_no.setdefault(id(c.graph), len(graph_no))
        several = len(graph_no) < len(self.candidates)  # select_fastest(..., options=[...]) times each graph twice+
        dev = current_device() if device is None else device
        rows = []
        for i, c in enumerate(self.candidates):
            t = c.timings.get(mode)
            if c.error is not None or t is None:
                continue
            n = numbers[i] if numbers is not None else graph_no[id(c.graph)]
            label = f"candidate {n}" + (f" [{c.options.tag()}]" if several else "")
            rows.append(LatencyRow.from_timing(label, t, kind=CANDIDATE, device=dev, options=c.options.tag(),
                                               candidate=n))
        return rows

    def table(self) -> list[dict[str, Any]]:
        """One flat record per candidate: its tiling, options, median, error."""
        rows = []
        for i, c in enumerate(self.candidates):
            bgs = [op.block_graph for op in c.graph.customized_ops]
            rows.append({"index": i, "grids": [b.grid_dim for b in bgs], "franges": [b.forloop_range for b in bgs],
                         "options": c.options.tag(),
                         "median_us": c.median_us, "rel_err": c.rel_err, "error": c.error})
        return rows


def with_options(candidates: Sequence[KernelGraph | tuple[KernelGraph, CodegenOptions]],
                 options: Sequence[CodegenOptions]) -> list[tuple[KernelGraph, CodegenOptions]]:
    """``(graph, options)`` pairs: each μGraph under every one of ``options``; a given pair as it is."""
    out: list[tuple[KernelGraph, CodegenOptions]] = []
    for g in candidates:
        out += [g] if isinstance(g, tuple) else [(g, o) for o in options]
    return out


def select_fastest(candidates: Sequence[KernelGraph | tuple[KernelGraph, CodegenOptions]],
                   inputs: "Sequence[torch.Tensor]", *, check: bool = True,
                   tol: float = TOLERANCE, repeats: int = 200, reference: "Sequence[torch.Tensor] | None" = None,
                   options: Sequence[CodegenOptions] = (DEFAULT_OPTIONS,)) -> Selection:
    """Compile, check and time every candidate μGraph (under each of ``options``); return the fastest correct one.

    A candidate given as ``(graph, options)`` is measured under those options only.

    ``reference``: expected outputs (default: the reference interpreter on float64 inputs,
    computed once from the first candidate). A candidate whose compile or launch fails, or
    whose relative error exceeds ``tol``, is kept with its error and never selected.

    >>> sel = select_fastest([g1, g2], [X, W])       # doctest: +SKIP
    >>> sel.best.median_us, sel.table()              # doctest: +SKIP
    """
    from ..interp.reference import run_reference
    from ..runtime.kernel import compile
    from ..runtime.profile import profile_kernel

    if not candidates:
        raise MirageLabError("select_fastest: no candidates")
    cands = [Candidate(g, o) for g, o in with_options(candidates, options)]
    ref = list(reference) if reference is not None else None
    for c in cands:
        try:
            c.kernel = compile(c.graph, options=c.options)
            if check:
                if ref is None:
                    ref = run_reference(c.graph, [x.double() for x in inputs])
                c.rel_err, c.error = check_outputs(c.kernel, inputs, ref, tol)
                if c.error is not None:
                    continue
            c.timings = profile_kernel(c.kernel, inputs, repeats=repeats)
        except MirageLabError:
            raise
        except Exception as e:  # a candidate that fails to compile or launch is reported, not fatal
            c.error = f"{type(e).__name__}: {e}"[:500]
    ok = [c for c in cands if c.error is None and c.timings]
    best = min(ok, key=lambda c: c.median_us) if ok else None
    return Selection(best, cands)


__all__ = ["Candidate", "Selection", "select_fastest", "with_options"]
