"""μGraph data model: dtypes, kernel graph, block graph, thread graph, JSON."""
from .block_graph import BlockGraph, STensor, TBOp, new_threadblock_graph
from .dtypes import DType, bfloat16, float16, float32
from .kernel_graph import DTensor, KernelGraph, KNOp, new_kernel_graph
from .thread_graph import FusionChain, ThreadGraph

__all__ = ["BlockGraph", "STensor", "TBOp", "new_threadblock_graph", "DType", "bfloat16", "float16", "float32",
           "DTensor", "KernelGraph", "KNOp", "new_kernel_graph", "FusionChain", "ThreadGraph"]
