"""The seed programs and hand-built μGraphs for them (MIRAGE_SPEC §7).

Each ``*_program`` builds the plain kernel graph a user would write; each ``*_fused``
builds the μGraph Mirage found for it, by hand, with the builder API. Tests, the demo,
benchmarks and notebooks share these.

    >>> g = rms_norm_linear_program(16, 4096, 4096)
    >>> f = rms_norm_linear_fused(16, 4096, 4096)
    >>> len(f.customized_ops)
    1
"""
from __future__ import annotations

from .ir.block_graph import new_threadblock_graph
from .ir.dtypes import DType, float16
from .ir.kernel_graph import KernelGraph, new_kernel_graph


def rms_norm_linear_program(batch: int = 16, hidden: int = 4096, out: int = 4096, dtype: DType = float16) -> KernelGraph:
    """``O = rms_norm(X) @ W`` as the Mirage README writes it."""
    g = new_kernel_graph()
    X = g.new_input(dims=(batch, hidden), dtype=dtype)
    W = g.new_input(dims=(hidden, out), dtype=dtype)
    g.mark_output(g.matmul(g.rms_norm(X, normalized_shape=(hidden,)), W))
    return g


def rms_norm_linear_fused(batch: int = 16, hidden: int = 4096, out: int = 4096, grid: int | None = None,
                          forloop_range: int | None = None, dtype: DType = float16) -> KernelGraph:
    """One customized op: accumulate ``rms(X)`` and ``X @ W`` over the loop, divide after it."""
    grid = grid or _largest_divisor(out, 256)
    frange = forloop_range or _largest_divisor(hidden, 32)
    g = new_kernel_graph()
    X = g.new_input(dims=(batch, hidden), dtype=dtype)
    W = g.new_input(dims=(hidden, out), dtype=dtype)
    bg = new_threadblock_graph(grid_dim=(grid, 1, 1), block_dim=(128, 1, 1), forloop_range=frange, reduction_dimx=64)
    x = bg.new_input(X, input_map=(-1, -1, -1), forloop_dim=1)
    w = bg.new_input(W, input_map=(1, -1, -1), forloop_dim=0)
    r = bg.forloop_accum(x, "rms")
    m = bg.forloop_accum(bg.matmul(x, w))
    bg.new_output(bg.div(m, r), output_map=(1, -1, -1))
    (O,) = g.customized([X, W], bg)
    g.mark_output(O)
    return g


def gqa_program(batch: int = 2, q_len: int = 256, head_dim: int = 64, kv_len: int = 4096,
                dtype: DType = float16) -> KernelGraph:
    """Group-query attention as the Mirage README writes it: ``exp(QK) / rowsum . V``."""
    g = new_kernel_graph()
    Q = g.new_input(dims=(batch, q_len, head_dim), dtype=dtype)
    K = g.new_input(dims=(batch, head_dim, kv_len), dtype=dtype)
    V = g.new_input(dims=(batch, kv_len, head_dim), dtype=dtype)
    A = g.matmul(Q, K)
    E = g.exp(A)
    S = g.reduction(E, 2)
    D = g.div(E, S)
    O = g.matmul(D, V)
    g.mark_output(O)
    return g


def gqa_flashdecoding(batch: int = 2, q_len: int = 256, head_dim: int = 64, kv_len: int = 4096,
                      kv_splits: int = 8, q_blocks: int = 16, forloop_range: int = 4,
                      dtype: DType = float16, combine_blocks: int | None = None) -> KernelGraph:
    """The FlashDecoding-like two-kernel μGraph of MIRAGE_SPEC §7 (grid (2,8,16), then (2,16,1)).

    Kernel 1 splits the KV length across grid axis y and the queries across z; each block
    accumulates partial ``exp(QK)`` row sums and partial ``exp(QK) V``. Kernel 2 sums the
    partials (``sum`` and ``sum_todimx``) and divides, split over the queries in
    ``combine_blocks`` blocks per batch (default ``q_blocks``).
    """
    dimx = head_dim
    g = new_kernel_graph()
    Q = g.new_input(dims=(batch, q_len, head_dim), dtype=dtype)
    K = g.new_input(dims=(batch, head_dim, kv_len), dtype=dtype)
    V = g.new_input(dims=(batch, kv_len, head_dim), dtype=dtype)
    b1 = new_threadblock_graph(grid_dim=(batch, kv_splits, q_blocks), block_dim=(128, 1, 1),
                               forloop_range=forloop_range, reduction_dimx=dimx)
    q = b1.new_input(Q, input_map=(0, -1, 1), forloop_dim=-1)
    k = b1.new_input(K, input_map=(0, 2, -1), forloop_dim=2)
    v = b1.new_input(V, input_map=(0, 1, -1), forloop_dim=1)
    e = b1.exp(b1.matmul(q, k))
    s = b1.forloop_accum(e)
    o = b1.forloop_accum(b1.matmul(e, v))
    b1.new_output(s, output_map=(0, 2, 1))
    b1.new_output(o, output_map=(0, 2, 1))
    S_part, O_part = g.customized([Q, K, V], b1)
    b2 = new_threadblock_graph(grid_dim=(batch, combine_blocks or q_blocks, 1), block_dim=(128, 1, 1), forloop_range=1,
                               reduction_dimx=dimx)
    sp = b2.new_input(S_part, input_map=(0, 1, -1), forloop_dim=-1)
    op = b2.new_input(O_part, input_map=(0, 1, -1), forloop_dim=-1)
    den = b2.forloop_accum(sp, "sum")
    num = b2.forloop_accum(op, "sum_todimx")
    b2.new_output(b2.div(num, den), output_map=(0, 1, -1))
    (O,) = g.customized([S_part, O_part], b2)
    g.mark_output(O)
    return g


def gated_mlp_program(batch: int = 8, hidden: int = 4096, out: int = 4096, dtype: DType = float16) -> KernelGraph:
    """``silu(X @ W1) * (X @ W2)``."""
    g = new_kernel_graph()
    X = g.new_input(dims=(batch, hidden), dtype=dtype)
    W1 = g.new_input(dims=(hidden, out), dtype=dtype)
    W2 = g.new_input(dims=(hidden, out), dtype=dtype)
    g.mark_output(g.mul(g.silu(g.matmul(X, W1)), g.matmul(X, W2)))
    return g


def gated_mlp_fused(batch: int = 8, hidden: int = 4096, out: int = 4096, grid: int | None = None,
                    forloop_range: int | None = None, dtype: DType = float16) -> KernelGraph:
    """One customized op: both matmuls accumulate over the loop; silu and the product after it."""
    grid = grid or _largest_divisor(out, 128)
    frange = forloop_range or _largest_divisor(hidden, 64)
    g = new_kernel_graph()
    X = g.new_input(dims=(batch, hidden), dtype=dtype)
    W1 = g.new_input(dims=(hidden, out), dtype=dtype)
    W2 = g.new_input(dims=(hidden, out), dtype=dtype)
    bg = new_threadblock_graph(grid_dim=(grid, 1, 1), block_dim=(128, 1, 1), forloop_range=frange, reduction_dimx=64)
    x = bg.new_input(X, input_map=(-1, -1, -1), forloop_dim=1)
    w1 = bg.new_input(W1, input_map=(1, -1, -1), forloop_dim=0)
    w2 = bg.new_input(W2, input_map=(1, -1, -1), forloop_dim=0)
    m1 = bg.forloop_accum(bg.matmul(x, w1))
    m2 = bg.forloop_accum(bg.matmul(x, w2))
    bg.new_output(bg.mul(bg.silu(m1), m2), output_map=(1, -1, -1))
    (O,) = g.customized([X, W1, W2], bg)
    g.mark_output(O)
    return g


def matmul_split_k(rows: int = 32, hidden: int = 4096, out: int = 4608, splits: int = 4, col_blocks: int = 72,
                   forloop_range: int = 16, l2_norm: bool = False, dtype: DType = float16) -> KernelGraph:
    """Split-K ``X @ W`` (or ``(X / ||X||) @ W`` with ``l2_norm``) in two customized ops, the form
    the search's ``split_reduction`` finds for skinny matmuls.

    The first, grid ``(splits, col_blocks)``: each block sums one ``hidden / splits`` chunk of K
    for its columns (and, for the norm, the chunk's sum of squares), written as rows of a
    ``[splits * rows, ...]`` partial. The second adds the partials up, looping over the splits,
    and finishes (square root and division after the sums).

        >>> g = matmul_split_k(8, 256, 512, splits=4, col_blocks=8, forloop_range=4, l2_norm=True)
        >>> [op.block_graph.grid_dim for op in g.customized_ops]
        [(4, 8, 1), (8, 1, 1)]
    """
    g = new_kernel_graph()
    X = g.new_input(dims=(rows, hidden), dtype=dtype)
    W = g.new_input(dims=(hidden, out), dtype=dtype)
    loop = forloop_range > 1
    bg = new_threadblock_graph(grid_dim=(splits, col_blocks, 1), block_dim=(128, 1, 1), forloop_range=forloop_range,
                               reduction_dimx=64)
    x = bg.new_input(X, input_map=(1, -1, -1), forloop_dim=1 if loop else -1)
    w = bg.new_input(W, input_map=(0, 1, -1), forloop_dim=0 if loop else -1)
    bg.new_output(bg.forloop_accum(bg.matmul(x, w)), output_map=(0, 1, -1))
    if l2_norm:
        bg.new_output(bg.forloop_accum(bg.square(x), "sum"), output_map=(0, 1, -1))
    parts = g.customized([X, W], bg)
    cg = new_threadblock_graph(grid_dim=(col_blocks, 1, 1), block_dim=(128, 1, 1), forloop_range=splits,
                               reduction_dimx=64)
    acc = cg.forloop_accum(cg.new_input(parts[0], input_map=(1, -1, -1), forloop_dim=0))
    if l2_norm:
        ss = cg.forloop_accum(cg.new_input(parts[1], input_map=(1, -1, -1), forloop_dim=0))
        acc = cg.div(acc, cg.sqrt(ss))
    cg.new_output(acc, output_map=(1, -1, -1))
    (O,) = g.customized(list(parts), cg)
    g.mark_output(O)
    return g


def lora_program(rows: int = 16, hidden: int = 4096, out: int = 4096, rank: int = 16,
                 dtype: DType = float16) -> KernelGraph:
    """``O = X @ W + (X @ A) @ B``: a frozen projection with its rank-``rank`` LoRA adapter."""
    g = new_kernel_graph()
    X = g.new_input(dims=(rows, hidden), dtype=dtype)
    W = g.new_input(dims=(hidden, out), dtype=dtype)
    A = g.new_input(dims=(hidden, rank), dtype=dtype)
    B = g.new_input(dims=(rank, out), dtype=dtype)
    g.mark_output(g.add(g.matmul(X, W), g.matmul(g.matmul(X, A), B)))
    return g


def lora_fused(rows: int = 16, hidden: int = 4096, out: int = 4096, rank: int = 16, grid: int | None = None,
               forloop_range: int | None = None, dtype: DType = float16) -> KernelGraph:
    """Two kernels: ``T = X @ A`` (a plain matmul), then one customized op whose loop walks the hidden
    dim of ``X``/``W`` and the rank of ``T``/``B`` together, summing ``X W`` and ``T B`` in one pass
    (W read once; the rank-r product computed once, not by every block)."""
    grid = grid or _largest_divisor(out, 128)
    frange = forloop_range or _largest_divisor(rank, 4)
    g = new_kernel_graph()
    X = g.new_input(dims=(rows, hidden), dtype=dtype)
    W = g.new_input(dims=(hidden, out), dtype=dtype)
    A = g.new_input(dims=(hidden, rank), dtype=dtype)
    B = g.new_input(dims=(rank, out), dtype=dtype)
    T = g.matmul(X, A)
    bg = new_threadblock_graph(grid_dim=(grid, 1, 1), block_dim=(128, 1, 1), forloop_range=frange)
    x = bg.new_input(X, input_map=(-1, -1, -1), forloop_dim=1)
    w = bg.new_input(W, input_map=(1, -1, -1), forloop_dim=0)
    b = bg.new_input(B, input_map=(1, -1, -1), forloop_dim=0)
    t = bg.new_input(T, input_map=(-1, -1, -1), forloop_dim=1)
    acc = bg.add(bg.forloop_accum(bg.matmul(x, w)), bg.forloop_accum(bg.matmul(t, b)))
    bg.new_output(acc, output_map=(1, -1, -1))
    (O,) = g.customized([X, W, B, T], bg)
    g.mark_output(O)
    return g


def _largest_divisor(n: int, at_most: int) -> int:
    for d in range(min(n, at_most), 0, -1):
        if n % d == 0:
            return d
    return 1
