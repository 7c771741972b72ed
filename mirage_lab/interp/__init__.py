"""Reference execution of μGraphs in torch.

Its names load ``interp.reference`` (and torch, 1+ s) on first use, not when ``mirage_lab`` is
imported: building, searching and reading a cached result need no torch.
"""
from ..lazy import lazy_attributes

__all__ = ["run_reference", "run_block_graph", "run_block_graph_per_block"]

__getattr__, __dir__ = lazy_attributes(globals(), {n: ("mirage_lab.interp.reference", n) for n in __all__})
