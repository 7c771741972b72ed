"""Hand-built (program, μGraph) pairs that compute the same function, at small shapes.

Each entry of ``pairs(size)`` is ``name -> (program, fused)``. ``size="small"`` is for the
numpy tests (hidden 256), ``"tiny"`` for the CUDA simulator (a few hundred elements).
Every pair is checked against the float reference interpreter in test_equivalence.py, so
the corpus itself is known to be right.
"""
from __future__ import annotations

from typing import Callable

import mirage_lab as mi
from mirage_lab import examples

F32 = mi.float32


def _new(*dims):
    g = mi.new_kernel_graph()
    return g, [g.new_input(d, dtype=F32) for d in dims]


# --------------------------------------------------------------------------- RMSNorm variants
def rms_linear_mean_sqrt(b: int, h: int, n: int, grid: int, frange: int):
    """rms via accum 'mean' of x², then sqrt, then divide after the matmul."""
    g, (X, W) = _new((b, h), (h, n))
    bg = mi.new_threadblock_graph((grid, 1, 1), (128, 1, 1), frange, 64)
    x = bg.new_input(X, (-1, -1, -1), 1)
    w = bg.new_input(W, (1, -1, -1), 0)
    r = bg.sqrt(bg.forloop_accum(bg.square(x), "mean"))
    m = bg.forloop_accum(bg.matmul(x, w))
    bg.new_output(bg.div(m, r), (1, -1, -1))
    g.mark_output(g.customized([X, W], bg)[0])
    return g


def rms_linear_transpiled(b: int, h: int, n: int, grid: int, frange: int):
    """Mirage's transpiler decomposition of the rms accumulator:
    square -> mul_scalar(1/(w·frange)) -> plain accum -> reduction -> sqrt."""
    g, (X, W) = _new((b, h), (h, n))
    bg = mi.new_threadblock_graph((grid, 1, 1), (128, 1, 1), frange, 64)
    x = bg.new_input(X, (-1, -1, -1), 1)
    w = bg.new_input(W, (1, -1, -1), 0)
    t = bg.mul_scalar(bg.square(x), 1.0 / h)
    r = bg.sqrt(bg.reduction(bg.forloop_accum(t), 1))
    m = bg.forloop_accum(bg.matmul(x, w))
    bg.new_output(bg.div(m, r), (1, -1, -1))
    g.mark_output(g.customized([X, W], bg)[0])
    return g


def rms_linear_block_rmsnorm(b: int, h: int, n: int, grid: int):
    """Block-level rms_norm on the whole row (no loop), then the matmul."""
    g, (X, W) = _new((b, h), (h, n))
    bg = mi.new_threadblock_graph((grid, 1, 1), (128, 1, 1), 1, 64)
    x = bg.new_input(X, (-1, -1, -1), -1)
    w = bg.new_input(W, (1, -1, -1), -1)
    m = bg.forloop_accum(bg.matmul(bg.rms_norm(x), w))
    bg.new_output(m, (1, -1, -1))
    g.mark_output(g.customized([X, W], bg)[0])
    return g


# --------------------------------------------------------------------------- LoRA
def lora_program(b: int, h: int, n: int, r: int):
    g, (X, W, A, B) = _new((b, h), (h, n), (h, r), (r, n))
    g.mark_output(g.add(g.matmul(X, W), g.matmul(g.matmul(X, A), B)))
    return g


def lora_fused(b: int, h: int, n: int, r: int, grid: int):
    """One customized op, three block matmuls: XW + (XA)B (no loop: XA must be complete)."""
    g, (X, W, A, B) = _new((b, h), (h, n), (h, r), (r, n))
    bg = mi.new_threadblock_graph((grid, 1, 1), (128, 1, 1), 1, 64)
    x = bg.new_input(X, (-1, -1, -1), -1)
    w = bg.new_input(W, (1, -1, -1), -1)
    a = bg.new_input(A, (-1, -1, -1), -1)
    bb = bg.new_input(B, (1, -1, -1), -1)
    s = bg.add(bg.matmul(x, w), bg.matmul(bg.matmul(x, a), bb))
    bg.new_output(bg.forloop_accum(s), (1, -1, -1))
    g.mark_output(g.customized([X, W, A, B], bg)[0])
    return g


def lora_concat(b: int, h: int, n: int, r: int, grid: int):
    """Kernel matmul XA, then one customized op: [X | XA] @ [W ; B] with block concats."""
    g, (X, W, A, B) = _new((b, h), (h, n), (h, r), (r, n))
    XA = g.matmul(X, A)
    bg = mi.new_threadblock_graph((grid, 1, 1), (128, 1, 1), 1, 64)
    x = bg.new_input(X, (-1, -1, -1), -1)
    w = bg.new_input(W, (1, -1, -1), -1)
    bb = bg.new_input(B, (1, -1, -1), -1)
    xa = bg.new_input(XA, (-1, -1, -1), -1)
    m = bg.matmul(bg.concat(x, xa, 1), bg.concat(w, bb, 0))
    bg.new_output(bg.forloop_accum(m), (1, -1, -1))
    g.mark_output(g.customized([X, W, B, XA], bg)[0])
    return g


# --------------------------------------------------------------------------- softmax / attention
def softmax_program(rows: int, cols: int):
    g, (X,) = _new((rows, cols))
    E = g.exp(X)
    g.mark_output(g.div(E, g.reduction(E, 1)))
    return g


def softmax_fused(rows: int, cols: int, grid: int):
    """One block per row group: exp, then 'sum' and plain accumulators, divide after the loop."""
    g, (X,) = _new((rows, cols))
    bg = mi.new_threadblock_graph((grid, 1, 1), (128, 1, 1), 1, 64)
    x = bg.new_input(X, (0, -1, -1), -1)
    e = bg.exp(x)
    bg.new_output(bg.div(bg.forloop_accum(e), bg.forloop_accum(e, "sum")), (0, -1, -1))
    g.mark_output(g.customized([X], bg)[0])
    return g


def attention_onekernel(batch: int, q_len: int, d: int, kv: int, qblocks: int, frange: int):
    """FlashAttention-like single kernel: loop over KV, accumulate rowsum ('sum') and exp(QK)V."""
    g, (Q, K, V) = _new((batch, q_len, d), (batch, d, kv), (batch, kv, d))
    bg = mi.new_threadblock_graph((batch, qblocks, 1), (128, 1, 1), frange, 64)
    q = bg.new_input(Q, (0, 1, -1), -1)
    k = bg.new_input(K, (0, -1, -1), 2)
    v = bg.new_input(V, (0, -1, -1), 1)
    e = bg.exp(bg.matmul(q, k))
    s = bg.forloop_accum(e, "sum")
    o = bg.forloop_accum(bg.matmul(e, v))
    bg.new_output(bg.div(o, s), (0, 1, -1))
    g.mark_output(g.customized([Q, K, V], bg)[0])
    return g


def attention_program(batch: int, q_len: int, d: int, kv: int):
    return examples.gqa_program(batch, q_len, d, kv, dtype=F32)


# --------------------------------------------------------------------------- split-K, 2-D grid, kernel-level add
def matmul_program(b: int, h: int, n: int):
    g, (X, W) = _new((b, h), (h, n))
    g.mark_output(g.matmul(X, W))
    return g


def splitk_2d(b: int, h: int, n: int, gx: int, gy: int, frange: int):
    """2-D grid: x splits N, y splits K; partials stacked on rows, then summed by a second
    customized op whose loop runs over the stacked partials."""
    g, (X, W) = _new((b, h), (h, n))
    b1 = mi.new_threadblock_graph((gx, gy, 1), (128, 1, 1), frange, 64)
    x = b1.new_input(X, (-1, 1, -1), 1)
    w = b1.new_input(W, (1, 0, -1), 0)
    b1.new_output(b1.forloop_accum(b1.matmul(x, w)), (1, 0, -1))
    (Pt,) = g.customized([X, W], b1)  # [b*gy, n]
    b2 = mi.new_threadblock_graph((gx, 1, 1), (128, 1, 1), gy, 64)
    p = b2.new_input(Pt, (1, -1, -1), 0)
    b2.new_output(b2.forloop_accum(p), (1, -1, -1))
    g.mark_output(g.customized([Pt], b2)[0])
    return g


def two_linear_program(b: int, h: int, n: int):
    g, (X, W1, W2) = _new((b, h), (h, n), (h, n))
    g.mark_output(g.add(g.matmul(X, W1), g.matmul(X, W2)))
    return g


def two_linear_kernel_add(b: int, h: int, n: int, grid: int, frange: int):
    """One customized op with two outputs (XW1, XW2), added at the kernel level."""
    g, (X, W1, W2) = _new((b, h), (h, n), (h, n))
    bg = mi.new_threadblock_graph((grid, 1, 1), (128, 1, 1), frange, 64)
    x = bg.new_input(X, (-1, -1, -1), 1)
    w1 = bg.new_input(W1, (1, -1, -1), 0)
    w2 = bg.new_input(W2, (1, -1, -1), 0)
    bg.new_output(bg.forloop_accum(bg.matmul(x, w1)), (1, -1, -1))
    bg.new_output(bg.forloop_accum(bg.matmul(x, w2)), (1, -1, -1))
    P1, P2 = g.customized([X, W1, W2], bg)
    g.mark_output(g.add(P1, P2))
    return g


def two_linear_distributed(b: int, h: int, n: int):
    """X(W1 + W2): distributivity at the kernel level."""
    g, (X, W1, W2) = _new((b, h), (h, n), (h, n))
    g.mark_output(g.matmul(X, g.add(W1, W2)))
    return g


# --------------------------------------------------------------------------- epilogues
def epilogue_program(b: int, h: int, n: int):
    g, (X, W) = _new((b, h), (h, n))
    M = g.matmul(X, W)
    g.mark_output(g.add(g.relu(M), g.clamp(g.gelu(M), -1.0, 2.0)))
    return g


def epilogue_fused(b: int, h: int, n: int, grid: int, frange: int):
    g, (X, W) = _new((b, h), (h, n))
    bg = mi.new_threadblock_graph((grid, 1, 1), (128, 1, 1), frange, 64)
    x = bg.new_input(X, (-1, -1, -1), 1)
    w = bg.new_input(W, (1, -1, -1), 0)
    m = bg.forloop_accum(bg.matmul(x, w))
    bg.new_output(bg.add(bg.relu(m), bg.clamp(bg.gelu(m), -1.0, 2.0)), (1, -1, -1))
    g.mark_output(g.customized([X, W], bg)[0])
    return g


def pow_program(b: int, n: int):
    g, (X, Y) = _new((b, n), (b, n))
    g.mark_output(g.mul(g.pow(X, Y), g.sqrt(g.square(X))))
    return g


def pow_fused(b: int, n: int, grid: int):
    g, (X, Y) = _new((b, n), (b, n))
    bg = mi.new_threadblock_graph((grid, 1, 1), (128, 1, 1), 1, 64)
    x = bg.new_input(X, (1, -1, -1), -1)
    y = bg.new_input(Y, (1, -1, -1), -1)
    s = bg.mul(bg.pow(x, y), bg.sqrt(bg.square(x)))
    bg.new_output(bg.forloop_accum(s), (1, -1, -1))
    g.mark_output(g.customized([X, Y], bg)[0])
    return g


def two_outputs_program(b: int, h: int, n: int):
    g, (X, W) = _new((b, h), (h, n))
    M = g.matmul(X, W)
    g.mark_output(g.exp(M))
    g.mark_output(g.silu(M))
    return g


def two_outputs_swapped(b: int, h: int, n: int, grid: int, frange: int):
    """The same two outputs, produced in the other order by one customized op."""
    g, (X, W) = _new((b, h), (h, n))
    bg = mi.new_threadblock_graph((grid, 1, 1), (128, 1, 1), frange, 64)
    x = bg.new_input(X, (-1, -1, -1), 1)
    w = bg.new_input(W, (1, -1, -1), 0)
    m = bg.forloop_accum(bg.matmul(x, w))
    bg.new_output(bg.silu(m), (1, -1, -1))
    bg.new_output(bg.exp(m), (1, -1, -1))
    S, E = g.customized([X, W], bg)
    g.mark_output(S)
    g.mark_output(E)
    return g


# --------------------------------------------------------------------------- scalars: mul_scalar, clamp bounds, exp scale
def scaled_attention(batch: int, q_len: int, d: int, kv: int, qblocks: int, frange: int):
    """exp(s·QK)V / rowsum with s = 1/sqrt(d) (an irrational constant for d = 8)."""
    g, (Q, K, V) = _new((batch, q_len, d), (batch, d, kv), (batch, kv, d))
    bg = mi.new_threadblock_graph((batch, qblocks, 1), (128, 1, 1), frange, 64)
    q = bg.new_input(Q, (0, 1, -1), -1)
    k = bg.new_input(K, (0, -1, -1), 2 if frange > 1 else -1)
    v = bg.new_input(V, (0, -1, -1), 1 if frange > 1 else -1)
    e = bg.exp(bg.mul_scalar(bg.matmul(q, k), d ** -0.5))
    s = bg.forloop_accum(e, "sum")
    o = bg.forloop_accum(bg.matmul(e, v))
    bg.new_output(bg.div(o, s), (0, 1, -1))
    g.mark_output(g.customized([Q, K, V], bg)[0])
    return g


def clamp_program(b: int, h: int, n: int):
    g, (X, W) = _new((b, h), (h, n))
    g.mark_output(g.clamp(g.matmul(X, W), -0.5, 0.5))
    return g


def clamp_fused(b: int, h: int, n: int, grid: int, frange: int):
    """X scaled by 1/4 before the loop's matmul, the sum by 4 after, then the clamp."""
    g, (X, W) = _new((b, h), (h, n))
    bg = mi.new_threadblock_graph((grid, 1, 1), (128, 1, 1), frange, 64)
    x = bg.new_input(X, (-1, -1, -1), 1)
    w = bg.new_input(W, (1, -1, -1), 0)
    m = bg.forloop_accum(bg.matmul(bg.mul_scalar(x, 0.25), w))
    bg.new_output(bg.clamp(bg.mul_scalar(m, 4.0), -0.5, 0.5), (1, -1, -1))
    g.mark_output(g.customized([X, W], bg)[0])
    return g


def silu_gate_program(b: int, h: int, n: int):
    g, (X, W1, W2) = _new((b, h), (h, n), (h, n))
    g.mark_output(g.mul(g.silu(g.matmul(X, W1)), g.matmul(X, W2)))
    return g


def silu_gate_fused(b: int, h: int, n: int, grid: int, frange: int):
    """silu written as x·sigmoid(x) in the block graph."""
    g, (X, W1, W2) = _new((b, h), (h, n), (h, n))
    bg = mi.new_threadblock_graph((grid, 1, 1), (128, 1, 1), frange, 64)
    x = bg.new_input(X, (-1, -1, -1), 1)
    w1 = bg.new_input(W1, (1, -1, -1), 0)
    w2 = bg.new_input(W2, (1, -1, -1), 0)
    m1 = bg.forloop_accum(bg.matmul(x, w1))
    m2 = bg.forloop_accum(bg.matmul(x, w2))
    bg.new_output(bg.mul(bg.mul(m1, bg.sigmoid(m1)), m2), (1, -1, -1))
    g.mark_output(g.customized([X, W1, W2], bg)[0])
    return g


def mean_exp_program(rows: int, cols: int, grid: int):
    """exp of each row's mean (accumulator 'mean', no loop)."""
    g, (X,) = _new((rows, cols))
    bg = mi.new_threadblock_graph((grid, 1, 1), (128, 1, 1), 1, 64)
    x = bg.new_input(X, (0, -1, -1), -1)
    bg.new_output(bg.exp(bg.forloop_accum(x, "mean")), (0, -1, -1))
    g.mark_output(g.customized([X], bg)[0])
    return g


def mean_exp_fused(rows: int, cols: int, grid: int, frange: int):
    """The same with a loop over columns: 'sum', then mul_scalar(1/cols) as two irrational steps."""
    g, (X,) = _new((rows, cols))
    bg = mi.new_threadblock_graph((grid, 1, 1), (128, 1, 1), frange, 64)
    x = bg.new_input(X, (0, -1, -1), 1)
    s = bg.mul_scalar(bg.mul_scalar(bg.forloop_accum(x, "sum"), 2 ** -0.5), 2 ** 0.5 / cols)
    bg.new_output(bg.exp(s), (0, -1, -1))
    g.mark_output(g.customized([X], bg)[0])
    return g


def scalar_pairs(size: str = "small") -> dict[str, tuple[Callable, Callable]]:
    """Pairs whose blocks use constants: mul_scalar (exact and irrational), clamp bounds, exp of a
    scaled argument, silu as x·sigmoid(x), a mean as a scaled sum."""
    b, h, n, gr, fr = {"small": (4, 256, 128, 8, 8), "mut": (4, 64, 32, 4, 4), "tiny": (2, 16, 8, 2, 2)}[size]
    att = {"small": (2, 32, 8, 256), "mut": (2, 16, 8, 64), "tiny": (1, 4, 8, 16)}[size]
    F = lambda fn, *a, **k: (lambda: fn(*a, **k))  # noqa: E731
    return {
        "scaled_attention": (F(scaled_attention, *att, 1, 1), F(scaled_attention, *att, 2, 4)),
        "clamp_scaled": (F(clamp_program, b, h, n), F(clamp_fused, b, h, n, gr, fr)),
        "silu_as_x_sigmoid": (F(silu_gate_program, b, h, n), F(silu_gate_fused, b, h, n, gr, fr)),
        "mean_exp": (F(mean_exp_program, b * 2, h, b), F(mean_exp_fused, b * 2, h, b, fr)),
    }


# --------------------------------------------------------------------------- the corpus
def pairs(size: str = "small") -> dict[str, tuple[Callable, Callable]]:
    """``name -> (make_program, make_fused)`` (zero-argument builders)."""
    if size == "small":
        b, h, n, gr, fr = 4, 256, 128, 8, 8
        att = (2, 32, 16, 256)
        gqa_kw = dict(kv_splits=4, q_blocks=2, forloop_range=2)
    elif size == "mut":
        b, h, n, gr, fr = 4, 64, 32, 4, 4
        att = (2, 16, 8, 64)
        gqa_kw = dict(kv_splits=2, q_blocks=2, forloop_range=2)
    elif size == "tiny":
        b, h, n, gr, fr = 2, 16, 8, 2, 2
        att = (1, 4, 4, 16)
        gqa_kw = dict(kv_splits=2, q_blocks=2, forloop_range=2)
    else:
        raise ValueError(size)
    F = lambda fn, *a, **k: (lambda: fn(*a, **k))  # noqa: E731
    return {
        "rms_norm_linear": (F(examples.rms_norm_linear_program, b, h, n, dtype=F32),
                            F(examples.rms_norm_linear_fused, b, h, n, grid=gr, forloop_range=fr, dtype=F32)),
        "rms_linear_mean_sqrt": (F(examples.rms_norm_linear_program, b, h, n, dtype=F32),
                                 F(rms_linear_mean_sqrt, b, h, n, gr, fr)),
        "rms_linear_transpiled": (F(examples.rms_norm_linear_program, b, h, n, dtype=F32),
                                  F(rms_linear_transpiled, b, h, n, gr, fr)),
        "rms_linear_block_rmsnorm": (F(examples.rms_norm_linear_program, b, h, n, dtype=F32),
                                     F(rms_linear_block_rmsnorm, b, h, n, gr)),
        "gqa_flashdecoding": (F(examples.gqa_program, *att, dtype=F32),
                              F(examples.gqa_flashdecoding, *att, dtype=F32, **gqa_kw)),
        "attention_onekernel": (F(attention_program, *att),
                                F(attention_onekernel, *att, qblocks=2, frange=gqa_kw["forloop_range"] * 2)),
        "gated_mlp": (F(examples.gated_mlp_program, b, h, n, dtype=F32),
                      F(examples.gated_mlp_fused, b, h, n, grid=gr, forloop_range=fr, dtype=F32)),
        "lora_3_matmuls": (F(lora_program, b, h // 4, n, 8), F(lora_fused, b, h // 4, n, 8, gr)),
        "lora_concat": (F(lora_program, b, h // 4, n, 8), F(lora_concat, b, h // 4, n, 8, gr)),
        "softmax": (F(softmax_program, b * 2, h), F(softmax_fused, b * 2, h, b)),
        "splitk_2d_grid": (F(matmul_program, b, h, n), F(splitk_2d, b, h, n, gr // 2, 2, fr // 2)),
        "two_linear_kernel_add": (F(two_linear_program, b, h, n), F(two_linear_kernel_add, b, h, n, gr, fr)),
        "two_linear_distributed": (F(two_linear_program, b, h, n), F(two_linear_distributed, b, h, n)),
        "epilogue": (F(epilogue_program, b, h, n), F(epilogue_fused, b, h, n, gr, fr)),
        "pow_sqrt": (F(pow_program, b, n), F(pow_fused, b, n, gr)),
        "two_outputs_swapped": (F(two_outputs_program, b, h, n), F(two_outputs_swapped, b, h, n, gr, fr)),
    }
