"""What a search must reproduce: the program's input shapes, output fingerprints and expressions."""
from __future__ import annotations

from typing import Any

from ..ir.kernel_graph import KernelGraph
from .config import SearchConfig


class Target:
    """What the search must reproduce: input shapes, output fingerprints and expressions."""

    def __init__(self, graph: KernelGraph, cfg: SearchConfig, oracle: Any | None = None,
                 fingerprints: tuple[Any, Any] | None = None):
        """``fingerprints``: the (inputs, outputs) fingerprint arrays of an equal Target, reused
        as they are (at a layer's full size, computing them takes seconds)."""
        from ..expr import SubexprOracle, abstract_graph
        from ..verify.fingerprint import fingerprint_graph, random_inputs

        self.graph = graph
        self.cfg = cfg
        self.input_dims = [t.dims for t in graph.inputs]
        self.dtype = graph.inputs[0].dtype
        if fingerprints is None:
            self.inputs_fp = random_inputs(graph, tests=cfg.search_tests, seed=cfg.seed)
            self.outputs_fp = fingerprint_graph(graph, self.inputs_fp)
        else:
            self.inputs_fp, self.outputs_fp = fingerprints
        self.output_dims = [t.dims for t in graph.outputs]
        exprs = abstract_graph(graph)
        self.input_exprs = [exprs[t.guid] for t in graph.inputs]
        self.output_exprs = [exprs[t.guid] for t in graph.outputs]
        self.oracle = oracle or SubexprOracle(self.output_exprs)
        from ..expr.terms import variables

        self.needed_inputs = sorted(set().union(*(variables(e) for e in self.output_exprs)))
        self.clamp_bounds = sorted({(op.attrs["lo"], op.attrs["hi"]) for op in graph.ops if op.op_type == "clamp"})
