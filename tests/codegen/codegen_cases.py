"""Small μGraphs for generated-kernel tests: the seed examples plus hand-built block graphs
that together use every block op, every accumulator kind, broadcasting, a streamed and a
staged matmul, loop-invariant tiles, a scratch spill, odd last dims and the three dtypes.

Each case is ``(name, build() -> KernelGraph, make_inputs(graph, generator) -> [tensors])``.
Shapes are small: the CUDA simulator runs ~1k threads a second.
"""
from __future__ import annotations

from typing import Callable

import torch

import mirage_lab as mi
from mirage_lab.examples import gated_mlp_fused, gqa_flashdecoding, lora_fused, matmul_split_k, rms_norm_linear_fused


def randn_inputs(scale: float = 1.0, positive: bool = False):
    def make(g: mi.KernelGraph, gen: torch.Generator) -> list[torch.Tensor]:
        out = []
        for t in g.inputs:
            x = torch.randn(t.dims, generator=gen, dtype=torch.float32) * scale
            if positive:
                x = x.abs() + 0.5
            out.append(x.to(t.dtype.torch))
        return out
    return make


def gqa_inputs(g: mi.KernelGraph, gen: torch.Generator) -> list[torch.Tensor]:
    q, k, v = g.inputs
    d = q.dims[-1]
    # without a softmax scale, exp(QK) must stay inside fp16's range for the fp16 intermediates
    Q = (torch.randn(q.dims, generator=gen) / d ** 0.5).to(torch.float16)
    K = (torch.randn(k.dims, generator=gen) * 0.5).to(torch.float16)
    V = torch.randn(v.dims, generator=gen).to(torch.float16)
    return [Q, K, V]


def elementwise_graph(dtype=mi.float16) -> mi.KernelGraph:
    """Broadcast binary ops, every unary op, clamp, mul_scalar, pow; accumulators None/sum/mean/rms."""
    g = mi.new_kernel_graph()
    X = g.new_input((8, 64), dtype=dtype)
    Y = g.new_input((8, 64), dtype=dtype)
    Z = g.new_input((1, 64), dtype=dtype)
    bg = mi.new_threadblock_graph(grid_dim=(2, 1, 1), block_dim=(128, 1, 1), forloop_range=2)
    x = bg.new_input(X, input_map=(0, -1, -1), forloop_dim=1)   # [4, 32]
    y = bg.new_input(Y, input_map=(0, -1, -1), forloop_dim=1)
    z = bg.new_input(Z, input_map=(-1, -1, -1), forloop_dim=1)  # [1, 32], broadcast over rows
    a = bg.exp(bg.mul_scalar(bg.add(x, z), 0.25))
    c = bg.clamp(bg.mul(a, y), -2.0, 2.0)
    s1 = bg.forloop_accum(c)                    # [4, 32]
    s2 = bg.forloop_accum(bg.square(x), "sum")  # [4, 1]
    s3 = bg.forloop_accum(y, "mean")            # [4, 1]
    s4 = bg.forloop_accum(x, "rms")             # [4, 1]
    e = bg.sub(bg.div(s1, s2), s3)
    h = bg.sqrt(bg.square(bg.mul_scalar(e, 0.5)))
    p = bg.pow(h, s4)
    bg.new_output(p, output_map=(0, -1, -1))
    bg.new_output(bg.silu(bg.gelu(bg.relu(bg.add(s3, s4)))), output_map=(0, -1, -1))
    O1, O2 = g.customized([X, Y, Z], bg)
    g.mark_output(O1)
    g.mark_output(O2)
    return g


def structural_graph() -> mi.KernelGraph:
    """Staged matmul with an epilogue and accumulator, block reduction, rms_norm, concat,
    sum_todimx, a matmul after the loop, two outputs."""
    g = mi.new_kernel_graph()
    X = g.new_input((4, 128))
    W = g.new_input((128, 64))
    bg = mi.new_threadblock_graph(grid_dim=(2, 1, 1), block_dim=(128, 1, 1), forloop_range=4, reduction_dimx=8)
    x = bg.new_input(X, input_map=(-1, -1, -1), forloop_dim=1)  # [4, 32]
    w = bg.new_input(W, input_map=(1, -1, -1), forloop_dim=0)   # [32, 32], used twice: staged
    acc1 = bg.forloop_accum(bg.relu(bg.matmul(x, w)))          # [4, 32]
    acc2 = bg.forloop_accum(bg.reduction(w, 0), "sum_todimx")  # [1, 8]
    acc3 = bg.forloop_accum(bg.rms_norm(x), "sum")             # [4, 1]
    acc4 = bg.forloop_accum(bg.concat(x, bg.exp(x), 1), "sum_todimx")  # [4, 8]
    mm = bg.matmul(acc3, acc2)                                  # [4, 8] after the loop
    bg.new_output(bg.div(acc1, acc3), output_map=(1, -1, -1))   # [4, 64]
    bg.new_output(bg.add(acc4, mm), output_map=(1, -1, -1))     # [4, 16]
    O1, O2 = g.customized([X, W], bg)
    g.mark_output(O1)
    g.mark_output(O2)
    return g


def streamed_epilogue_graph() -> mi.KernelGraph:
    """A streamed matmul reduced every iteration (matmul -> exp -> accum), a grid-mapped and
    looped dim (tile index b*frange+i), and a kernel-level op after the customized one."""
    g = mi.new_kernel_graph()
    X = g.new_input((2, 64))
    W = g.new_input((64, 256))
    bg = mi.new_threadblock_graph(grid_dim=(2, 1, 1), block_dim=(128, 1, 1), forloop_range=2)
    x = bg.new_input(X, input_map=(-1, -1, -1), forloop_dim=-1)  # [2, 64], loop-invariant
    w = bg.new_input(W, input_map=(1, -1, -1), forloop_dim=1)    # [64, 64]: dim 1 is grid- and loop-split
    acc = bg.forloop_accum(bg.exp(bg.mul_scalar(bg.matmul(x, w), 0.125)))  # [2, 64]
    bg.new_output(acc, output_map=(1, -1, -1))                    # [2, 128]
    O = g.customized([X, W], bg)
    g.mark_output(g.sqrt(O[0]))
    return g


def spill_graph() -> mi.KernelGraph:
    """A float32 tile too large for 48 KB of shared memory: it moves to global scratch."""
    g = mi.new_kernel_graph()
    X = g.new_input((128, 128), dtype=mi.float32)
    bg = mi.new_threadblock_graph(grid_dim=(1, 1, 1), block_dim=(128, 1, 1), forloop_range=1)
    x = bg.new_input(X, input_map=(-1, -1, -1), forloop_dim=-1)   # [128, 128] f32 = 64 KB
    s = bg.forloop_accum(bg.square(x), "sum")                      # [128, 1]
    bg.new_output(bg.div(bg.forloop_accum(x), bg.sqrt(s)), output_map=(-1, -1, -1))
    (O,) = g.customized([X], bg)
    g.mark_output(O)
    return g


def odd_dims_graph(dtype=mi.float16) -> mi.KernelGraph:
    """Odd last dims (scalar 16-bit loads through an int16 view) and a 3-D tile."""
    g = mi.new_kernel_graph()
    X = g.new_input((2, 3, 15), dtype=dtype)
    bg = mi.new_threadblock_graph(grid_dim=(2, 1, 1), block_dim=(128, 1, 1), forloop_range=3)
    x = bg.new_input(X, input_map=(0, -1, -1), forloop_dim=2)   # [1, 3, 5]
    s = bg.forloop_accum(bg.gelu(x))                             # [1, 3, 5]
    m = bg.forloop_accum(x, "mean")                              # [1, 3, 1]
    bg.new_output(bg.mul(s, m), output_map=(0, -1, -1))
    (O,) = g.customized([X], bg)
    g.mark_output(O)
    return g


CASES: list[tuple[str, Callable[[], mi.KernelGraph], Callable]] = [
    ("rms_norm_linear", lambda: rms_norm_linear_fused(4, 256, 256, grid=8, forloop_range=4), randn_inputs()),
    ("rms_norm_linear_m16", lambda: rms_norm_linear_fused(16, 128, 64, grid=2, forloop_range=2), randn_inputs()),
    ("rms_norm_linear_bf16", lambda: rms_norm_linear_fused(2, 128, 128, grid=4, forloop_range=2, dtype=mi.bfloat16),
     randn_inputs()),
    ("gated_mlp", lambda: gated_mlp_fused(4, 128, 128, grid=4, forloop_range=4), randn_inputs(0.5)),
    ("gqa_decode", lambda: gqa_flashdecoding(batch=2, q_len=1, head_dim=32, kv_len=256, kv_splits=4, q_blocks=1,
                                             forloop_range=2), gqa_inputs),
    ("gqa_prefill", lambda: gqa_flashdecoding(batch=1, q_len=16, head_dim=16, kv_len=128, kv_splits=2, q_blocks=2,
                                              forloop_range=2), gqa_inputs),
    # 32 queries x 16 keys per block: both matmuls are 16-row multiples (tensor cores on staged tiles)
    ("gqa_prefill_mma", lambda: gqa_flashdecoding(batch=1, q_len=32, head_dim=16, kv_len=64, kv_splits=2, q_blocks=1,
                                                  forloop_range=2), gqa_inputs),
    # 20 queries: both matmuls on tensor cores with the second row of tiles padded (rows 20..31 read
    # row 19 again and are never stored)
    ("gqa_prefill_mma_padded", lambda: gqa_flashdecoding(batch=1, q_len=20, head_dim=16, kv_len=64, kv_splits=2,
                                                         q_blocks=1, forloop_range=2), gqa_inputs),
    # exp(S)V with 2 x 4 tiles over 4 warps: each warp takes two tiles of one row, A packed once
    ("gqa_prefill_mma_blocked", lambda: gqa_flashdecoding(batch=1, q_len=32, head_dim=32, kv_len=64, kv_splits=2,
                                                          q_blocks=1, forloop_range=2), gqa_inputs),
    # both at once: exp(S)V's 2 x 4 tiles of 20 padded rows, a 1 x 2 block per warp
    ("gqa_prefill_mma_padded_blocked", lambda: gqa_flashdecoding(batch=1, q_len=20, head_dim=32, kv_len=64,
                                                                 kv_splits=2, q_blocks=1, forloop_range=2), gqa_inputs),
    # one key per iteration: K's tile is a 1-wide column of a 16-bit tensor (once compiled to `// 0`)
    ("gqa_one_key_per_iteration", lambda: gqa_flashdecoding(batch=2, q_len=8, head_dim=16, kv_len=32, kv_splits=2,
                                                            q_blocks=1, forloop_range=16), gqa_inputs),
    # 32 rows of X against W1, W2: both matmuls on tensor cores with X's tile kept as its loaded words
    # (the A fragments read as they are) and the W tiles as k-pair words
    ("gated_mlp_m32", lambda: gated_mlp_fused(32, 128, 64, grid=2, forloop_range=2), randn_inputs(0.5)),
    # 40 k-steps an iteration: the register-blocked loop runs in groups of 10 written out (20 mma a body)
    ("gated_mlp_m32_long_k", lambda: gated_mlp_fused(32, 1280, 64, grid=2, forloop_range=2), randn_inputs(0.25)),
    # 64 x 64 per block over 4 warps: a 2 x 4 block of tiles a warp, its k loop kept rolled (8 mma a step)
    ("gated_mlp_m64_rolled", lambda: gated_mlp_fused(64, 128, 128, grid=2, forloop_range=2), randn_inputs(0.5)),
    # tensor-core streams whose warps cannot split the block's columns evenly (plan.Stream.CW): 80 columns
    # over 4 warps are five 16-column chunks, all in each warp, the warps along K; a gated MLP's two streams of
    # 48 columns (three chunks a warp, sharing A's fragments); 384 columns as 2 warps x three 64-column chunks
    ("rms_norm_linear_80_columns", lambda: rms_norm_linear_fused(8, 128, 160, grid=2, forloop_range=2), randn_inputs()),
    ("gated_mlp_48_columns", lambda: gated_mlp_fused(4, 128, 96, grid=2, forloop_range=2), randn_inputs(0.5)),
    ("rms_norm_linear_384_columns", lambda: rms_norm_linear_fused(4, 64, 384, grid=1, forloop_range=2),
     randn_inputs()),
    # LoRA's two kernels: X·A as a plain matmul, then X·W and (X·A)·B summed in one loop that walks the hidden
    # dim and the rank together (two streams, two accumulators added after the loop; the rank's 4-wide
    # k-slices stay on FMA under mma=True)
    ("lora_fused", lambda: lora_fused(8, 128, 64, 16, grid=2, forloop_range=4), randn_inputs(0.5)),
    # split-K: partial sums on a (splits, column blocks) grid, then a combine kernel looping over them
    ("split_k_l2_norm", lambda: matmul_split_k(4, 64, 64, splits=4, col_blocks=2, forloop_range=2, l2_norm=True),
     randn_inputs()),
    ("split_k_m16", lambda: matmul_split_k(16, 128, 64, splits=4, col_blocks=2, forloop_range=2), randn_inputs()),
    ("elementwise", elementwise_graph, randn_inputs(0.5, positive=True)),
    ("elementwise_f32", lambda: elementwise_graph(mi.float32), randn_inputs(0.5, positive=True)),
    ("structural", structural_graph, randn_inputs(0.5)),
    ("streamed_epilogue", streamed_epilogue_graph, randn_inputs(0.5)),
    ("spill", spill_graph, randn_inputs()),
    ("odd_dims", odd_dims_graph, randn_inputs()),
    ("odd_dims_bf16", lambda: odd_dims_graph(mi.bfloat16), randn_inputs()),
]


# CodegenOptions(mma=True, mma_b16=True): tensor-core streams whose warps cover 32 columns read B
# with 16-byte loads and movmatrix (the "mv" layout). The CASES above whose blocks own 32
# columns (N = grid * 32), plus: two warps across 64 columns whose 64-column layout does not
# fit (2 k-steps per iteration over 4 warps), 16 rows in bf16, and the gated MLP at 256.
_MV_FROM_CASES = ("rms_norm_linear", "rms_norm_linear_m16", "rms_norm_linear_bf16", "gated_mlp")
MV_CASES: list[tuple[str, Callable[[], mi.KernelGraph], Callable]] = [c for c in CASES if c[0] in _MV_FROM_CASES] + [
    ("rms_norm_linear_mv_2warps", lambda: rms_norm_linear_fused(4, 64, 128, grid=2, forloop_range=2), randn_inputs()),
    ("rms_norm_linear_mv_m16_bf16", lambda: rms_norm_linear_fused(16, 128, 64, grid=2, forloop_range=2,
                                                                  dtype=mi.bfloat16), randn_inputs()),
    ("gated_mlp_mv", lambda: gated_mlp_fused(4, 256, 256, grid=8, forloop_range=2), randn_inputs(0.5)),
]
# streams per case that take the mv layout (gated_mlp's 2 k-steps per iteration do not split over 4
# warps of 32 columns: it keeps the 16-column layout, the fallback under the option)
MV_STREAMS = {"rms_norm_linear": 1, "rms_norm_linear_m16": 1, "rms_norm_linear_bf16": 1, "gated_mlp": 0,
              "rms_norm_linear_mv_2warps": 1, "rms_norm_linear_mv_m16_bf16": 1, "gated_mlp_mv": 2}


# CodegenOptions(mma=True, async_stages=3, smem_kb=227): the staged tensor-core tiles copied by (simulated)
# cp.async into a ring of 3 stages. Attention (K and V as B tiles read through movt, 20 query rows padded),
# the rolled 2 x 4 blocks, and 6 iterations of a 32-row gated MLP: the ring is refilled in the loop and
# wraps around twice (a stage off by one reads another iteration's tile).
ASYNC_CASES: list[tuple[str, Callable[[], mi.KernelGraph], Callable]] = [
    c for c in CASES if c[0] in ("gqa_prefill_mma_padded_blocked", "gated_mlp_m64_rolled")] + [
    ("gated_mlp_m32_ring", lambda: gated_mlp_fused(32, 384, 64, grid=2, forloop_range=6), randn_inputs(0.5)),
]


# CodegenOptions(smem_kb=227): pools past numba's static 48 KB become dynamic shared memory instead of
# moving buffers to global scratch. The f32 spill (192 KB of buffers), an RMSNorm+Linear block holding
# all of X (its tensor-core A fragments, int32, follow the floats in the one dynamic area), and a
# FlashDecoding block of 512 keys (150 KB).
SMEM_CASES: list[tuple[str, Callable[[], mi.KernelGraph], Callable]] = [c for c in CASES if c[0] == "spill"] + [
    ("rms_norm_linear_whole_x", lambda: rms_norm_linear_fused(16, 1024, 64, grid=1, forloop_range=1), randn_inputs()),
    ("gqa_decode_512_keys", lambda: gqa_flashdecoding(batch=1, q_len=32, head_dim=64, kv_len=512, kv_splits=1,
                                                      q_blocks=1, forloop_range=2), gqa_inputs),
]


# cases of every kind of accumulator a split kernel hands to its tile's last block: streamed FMA and tensor-core
# matmuls, rms / sum accumulators fused into the loads, attention's two sums (one staged on tensor cores, its sums
# kept in the mma registers), a two-kernel split-K μGraph, bf16, and element-wise kernels that have no loop to split
SPLIT_CASES = ["rms_norm_linear", "rms_norm_linear_m16", "rms_norm_linear_bf16", "gated_mlp", "gqa_decode",
               "gqa_prefill_mma", "gated_mlp_m32", "split_k_m16", "structural", "streamed_epilogue", "elementwise"]
