"""Builders of the suite's program kinds, with the public API only (``mi.new_kernel_graph()`` and its ops).

Each builder takes the layer's shape and a dtype and returns the plain kernel graph a user
would write for it; heads are folded into the batch dim of the attention programs (Mirage's
GQA form: the query heads that share a KV head stacked along the rows of Q).

    >>> g = gated_mlp(8, 256, 512, "silu", mi.float16)
    >>> [t.dims for t in g.inputs]
    [(8, 256), (256, 512), (256, 512)]
"""
from __future__ import annotations

from typing import Any

import torch

import mirage_lab as mi
from mirage_lab.examples import lora_program
from mirage_lab.ir.dtypes import DType
from mirage_lab.ir.kernel_graph import DTensor, KernelGraph


def _l2_norm(g: KernelGraph, x: DTensor, dim: int) -> DTensor:
    """``x / ||x||`` over ``dim``: the builder has no norm op for it, so square, sum, sqrt, divide."""
    return g.div(x, g.sqrt(g.reduction(g.square(x), dim)))


def norm_linear(rows: int, hidden: int, out: int, dtype: DType, *, weight: bool) -> KernelGraph:
    """``rms_norm(X) @ W``, or ``(rms_norm(X) * G) @ W`` with the norm's weight ``G`` [1, hidden]."""
    g = mi.new_kernel_graph()
    X = g.new_input(dims=(rows, hidden), dtype=dtype)
    G = g.new_input(dims=(1, hidden), dtype=dtype) if weight else None
    W = g.new_input(dims=(hidden, out), dtype=dtype)
    n = g.rms_norm(X, G) if weight else g.rms_norm(X, normalized_shape=(hidden,))
    g.mark_output(g.matmul(n, W))
    return g


def l2_norm_linear(rows: int, hidden: int, out: int, dtype: DType) -> KernelGraph:
    """``(X / ||X||) @ W`` (nGPT keeps hidden states on the unit sphere)."""
    g = mi.new_kernel_graph()
    X = g.new_input(dims=(rows, hidden), dtype=dtype)
    W = g.new_input(dims=(hidden, out), dtype=dtype)
    g.mark_output(g.matmul(_l2_norm(g, X, 1), W))
    return g


def residual_norm_linear(rows: int, hidden: int, out: int, dtype: DType) -> KernelGraph:
    """``(rms_norm(X + R) * G) @ W``: the residual add before a pre-norm block's projection."""
    g = mi.new_kernel_graph()
    X = g.new_input(dims=(rows, hidden), dtype=dtype)
    R = g.new_input(dims=(rows, hidden), dtype=dtype)
    G = g.new_input(dims=(1, hidden), dtype=dtype)
    W = g.new_input(dims=(hidden, out), dtype=dtype)
    g.mark_output(g.matmul(g.rms_norm(g.add(X, R), G), W))
    return g


def gated_mlp(rows: int, hidden: int, inter: int, act: str, dtype: DType) -> KernelGraph:
    """``act(X @ W1) * (X @ W2)``: the gate and up projections of a GLU MLP (``act``: silu, gelu, relu)."""
    g = mi.new_kernel_graph()
    X = g.new_input(dims=(rows, hidden), dtype=dtype)
    W1 = g.new_input(dims=(hidden, inter), dtype=dtype)
    W2 = g.new_input(dims=(hidden, inter), dtype=dtype)
    g.mark_output(g.mul(getattr(g, act)(g.matmul(X, W1)), g.matmul(X, W2)))
    return g


def attention(groups: int, q_rows: int, head_dim: int, kv_len: int, dtype: DType) -> KernelGraph:
    """``softmax(Q K) V`` as ``exp(QK) / rowsum . V`` (Mirage's form; the 1/sqrt(d) scale folded into Q).

    ``groups`` = batch x KV heads; ``q_rows`` = query heads per KV head x query tokens. K is
    stored transposed, [groups, head_dim, kv_len], as in Mirage's benchmarks.
    """
    g = mi.new_kernel_graph()
    Q = g.new_input(dims=(groups, q_rows, head_dim), dtype=dtype)
    K = g.new_input(dims=(groups, head_dim, kv_len), dtype=dtype)
    V = g.new_input(dims=(groups, kv_len, head_dim), dtype=dtype)
    E = g.exp(g.matmul(Q, K))
    g.mark_output(g.matmul(g.div(E, g.reduction(E, 2)), V))
    return g


def qknorm_decode_attention(groups: int, q_rows: int, head_dim: int, kv_len: int, dtype: DType) -> KernelGraph:
    """Decode attention of a QK-norm model: the new queries RMS-normed over the head dim (weight ``Gq``), the
    cached keys were normed when written. ``exp(rms_norm(Q) Gq K) / rowsum . V``."""
    g = mi.new_kernel_graph()
    Q = g.new_input(dims=(groups, q_rows, head_dim), dtype=dtype)
    Gq = g.new_input(dims=(1, 1, head_dim), dtype=dtype)
    K = g.new_input(dims=(groups, head_dim, kv_len), dtype=dtype)
    V = g.new_input(dims=(groups, kv_len, head_dim), dtype=dtype)
    E = g.exp(g.matmul(g.rms_norm(Q, Gq), K))
    g.mark_output(g.matmul(g.div(E, g.reduction(E, 2)), V))
    return g


def qknorm_attention(groups: int, q_rows: int, head_dim: int, kv_len: int, dtype: DType) -> KernelGraph:
    """QKNorm attention (Henry et al. 2020): ``softmax(g * q^ k^) V`` with q, k L2-normed over the head dim
    and a learned scalar gain ``g`` (an input [1,1,1]); both normed here, as in a prefill."""
    g = mi.new_kernel_graph()
    Q = g.new_input(dims=(groups, q_rows, head_dim), dtype=dtype)
    K = g.new_input(dims=(groups, head_dim, kv_len), dtype=dtype)
    V = g.new_input(dims=(groups, kv_len, head_dim), dtype=dtype)
    gain = g.new_input(dims=(1, 1, 1), dtype=dtype)
    E = g.exp(g.mul(g.matmul(_l2_norm(g, Q, 2), _l2_norm(g, K, 1)), gain))
    g.mark_output(g.matmul(g.div(E, g.reduction(E, 2)), V))
    return g


def lora(rows: int, hidden: int, out: int, rank: int, dtype: DType) -> KernelGraph:
    """``X W + (X A) B``: a frozen projection with its rank-``rank`` LoRA adapter (scale folded into B)."""
    return lora_program(rows, hidden, out, rank, dtype)


def softmax_linear(rows: int, hidden: int, out: int, dtype: DType) -> KernelGraph:
    """``softmax(X W)`` over the last dim as ``exp(XW) / rowsum`` (a router's or an LM head's probabilities)."""
    g = mi.new_kernel_graph()
    X = g.new_input(dims=(rows, hidden), dtype=dtype)
    W = g.new_input(dims=(hidden, out), dtype=dtype)
    E = g.exp(g.matmul(X, W))
    g.mark_output(g.div(E, g.reduction(E, 1)))
    return g


def ntrans(rows: int, hidden: int, dtype: DType) -> KernelGraph:
    """nGPT's hidden-state update (Loshchilov et al. 2024, eq. 10/11): ``h <- Norm(h + a (Norm(h_A) - h))``.

    The builder has no kernel-level subtraction, so the update is written ``Norm((1-a) h + a Norm(h_A))``
    with ``1-a`` a parameter input (``OneMinusA``) beside the eigen learning rate ``a`` ([1, hidden] each);
    ``Norm`` is the L2 norm over the hidden dim.
    """
    g = mi.new_kernel_graph()
    H = g.new_input(dims=(rows, hidden), dtype=dtype)
    HA = g.new_input(dims=(rows, hidden), dtype=dtype)
    Alpha = g.new_input(dims=(1, hidden), dtype=dtype)
    OneMinusA = g.new_input(dims=(1, hidden), dtype=dtype)
    mixed = g.add(g.mul(H, OneMinusA), g.mul(_l2_norm(g, HA, 1), Alpha))
    g.mark_output(_l2_norm(g, mixed, 1))
    return g


BUILDERS = {"norm_linear": norm_linear, "l2_norm_linear": l2_norm_linear, "residual_norm_linear": residual_norm_linear,
            "gated_mlp": gated_mlp, "attention": attention, "qknorm_decode_attention": qknorm_decode_attention,
            "qknorm_attention": qknorm_attention, "lora": lora, "softmax_linear": softmax_linear, "ntrans": ntrans}


def sdpa_library(xs: list[torch.Tensor]) -> tuple[list[torch.Tensor], Any]:
    """FlashAttention through ``torch.nn.functional.scaled_dot_product_attention`` for :func:`attention`'s inputs.

    The same function (softmax subtracts the row max, which exp/rowsum does not: equal in exact
    arithmetic) with K in the layout a KV cache keeps, [groups, kv_len, head_dim], prepared once,
    outside the timing; ``scale=1.0`` as the program folds the scale into Q. Returns the inputs
    it takes and the function.
    """
    q, k, v = xs
    prepared = [q.unsqueeze(1), k.transpose(1, 2).contiguous().unsqueeze(1), v.unsqueeze(1)]

    def fn(q4: torch.Tensor, k4: torch.Tensor, v4: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.scaled_dot_product_attention(q4, k4, v4, scale=1.0).squeeze(1)

    return prepared, fn


LIBRARIES = {"sdpa": sdpa_library}
