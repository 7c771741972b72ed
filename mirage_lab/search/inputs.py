"""What a search accepts: a plain kernel graph with inputs, outputs and one input dtype."""
from __future__ import annotations

from ..errors import MirageLabError
from ..ir.kernel_graph import KernelGraph


class SearchInputError(MirageLabError, ValueError):
    """The program cannot be searched as given."""



def check_searchable(graph: KernelGraph) -> None:
    """Raise :class:`SearchInputError`, saying what to change, if ``graph`` cannot be searched."""
    if not isinstance(graph, KernelGraph):
        raise SearchInputError(f"search: expected a KernelGraph, got {type(graph).__name__}")
    if not graph.outputs:
        raise SearchInputError("search: the program has no outputs; call graph.mark_output(t) first")
    if not graph.inputs:
        raise SearchInputError("search: the program has no inputs")
    if len({t.dtype for t in graph.inputs}) > 1:
        raise SearchInputError("search: all inputs must have one dtype")
    if any(op.op_type == "customized" for op in graph.ops):
        raise SearchInputError("search: the program already contains customized ops; search a plain kernel graph")
