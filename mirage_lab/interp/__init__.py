"""Reference execution of μGraphs in torch."""
from .reference import run_block_graph, run_block_graph_per_block, run_reference

__all__ = ["run_reference", "run_block_graph", "run_block_graph_per_block"]
