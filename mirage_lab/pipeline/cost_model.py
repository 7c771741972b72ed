"""A roofline + occupancy estimate of a lowering variant's latency, to spend the tuning budget well.

It ranks; it does not decide: every variant the budget reaches is measured, and the
measurement picks. Per customized op:

* memory: each input tensor read once from HBM (``unique`` bytes) plus the tiles blocks
  re-read (replicated tiles, served by L2 at ``L2_TBPS``), outputs written once;
* the bandwidth a launch can draw grows with the warps resident per SM (latency hiding):
  full at ``WARPS_FOR_FULL_BW`` warps, proportionally less below, and with the share of SMs
  that have a block at all;
* compute: every block's matmul FLOPs at the tensor-core rate (streams the plan lowers to
  ``mma``), the FP32 FMA rate (streamed B operands) or a shared-memory FMA rate (staged
  matmuls), scaled by the same SM share;
* a launch costs ``LAUNCH_US``; plain kernel-level ops cost their bytes at copy bandwidth.

The constants are an H100's (measured copy peak; rates a Numba kernel reaches, from the
measurements in ``benchmarks/RESULTS.md``); ``benchmarks/e2e_bench.py`` prints the estimate
beside the measurement of every tuned variant.

    >>> from mirage_lab.examples import rms_norm_linear_fused
    >>> from mirage_lab.codegen import CodegenOptions
    >>> g = rms_norm_linear_fused(16, 4096, 4096)
    >>> e_fma, e_mma = estimate(g, CodegenOptions()), estimate(g, CodegenOptions(mma=True))
    >>> e_mma.us < e_fma.us
    True
"""
from __future__ import annotations

from dataclasses import dataclass

from ..codegen import CodegenOptions
from ..ir.kernel_graph import KernelGraph

SMS = 132                 # H100 SXM
HBM_TBPS = 3.0            # device-to-device copy peak (DESIGN.md)
L2_TBPS = 8.0
MMA_TFLOPS = 250.0        # mma.sync m16n8k16 from a Numba kernel, fed from registers
FMA_TFLOPS = 25.0         # fp32 FMAs on a B operand streamed into registers (~1.3 instructions per FMA)
SMEM_FMA_TFLOPS = 6.0     # fp32 FMAs with both operands read from shared memory (a staged matmul)
STAGED_MMA_TFLOPS = 12.0  # mma.sync with fragments packed from float32 shared-memory tiles (GQA, H100: ~10)
WARPS_FOR_FULL_BW = 16    # resident warps per SM that hide HBM latency for streamed loads
LAUNCH_US = 2.0


@dataclass(frozen=True)
class Estimate:
    """Estimated microseconds and what they are made of."""

    us: float
    memory_us: float
    compute_us: float
    launches: int
    sm_share: float

    def as_dict(self) -> dict:
        return {"us": self.us, "memory_us": self.memory_us, "compute_us": self.compute_us,
                "launches": self.launches, "sm_share": self.sm_share}


def _prod(xs) -> int:
    n = 1
    for x in xs:
        n *= x
    return n


def _streams(bg, options: CodegenOptions) -> dict[int, str]:
    """How the code generator lowers each block matmul: guid -> "mma" | "fma" (streamed B), "smma"
    (both tiles staged, on tensor cores); the others are staged FMA loops."""
    from ..codegen.plan import KernelPlan, staged_mma_fits

    try:
        plan = KernelPlan(bg, options=options)
    except Exception:  # an unlowerable plan is the compiler's to report; estimate it as staged
        return {}
    kinds = {s.op.guid: "mma" if s.mma else "fma" for s in plan.streams}
    for op in bg.ops:
        if op.op_type == "matmul" and op.guid not in kinds and staged_mma_fits(op, plan.T, options):
            kinds[op.guid] = "smma"
    return kinds


def estimate(graph: KernelGraph, options: CodegenOptions) -> Estimate:
    """The estimated latency of ``graph`` lowered with ``options`` (block sizes are the graph's)."""
    mem = comp = 0.0
    launches = 0
    share = 1.0
    for op in graph.ops:
        if op.op_type == "input":
            continue
        launches += 1
        out_bytes = sum(t.nbytes() for t in op.outputs)
        if op.op_type != "customized":
            mem += (sum(t.nbytes() for t in op.inputs) + out_bytes) / (HBM_TBPS * 1e6)
            if op.op_type == "matmul":
                a, b = op.inputs
                comp += 2 * _prod(a.dims) * b.dims[-1] / (MMA_TFLOPS * 4 * 1e6)  # cuBLAS: ~4x our mma rate
            continue
        bg = op.block_graph
        blocks = _prod(bg.grid_dim)
        threads = _prod(bg.block_dim)
        fr = bg.forloop_range
        unique = replicated = 0
        for lop, t in zip(bg.input_ops, op.inputs):
            tile = lop.outputs[0]
            iters = fr if lop.attrs["forloop_dim"] >= 0 else 1
            traffic = tile.numel() * t.dtype.itemsize * blocks * iters
            unique += min(traffic, t.nbytes())
            replicated += max(0, traffic - t.nbytes())
        blocks_per_sm = -(-blocks // SMS)
        op_share = min(1.0, blocks / SMS)
        warps = min(64, blocks_per_sm * threads // 32)
        bw_eff = op_share * min(1.0, warps / WARPS_FOR_FULL_BW)
        mem += ((unique + out_bytes) / (HBM_TBPS * 1e6) + replicated / (L2_TBPS * 1e6)) / max(bw_eff, 1e-3)
        kinds = _streams(bg, options)
        rate = {"mma": MMA_TFLOPS, "fma": FMA_TFLOPS, "smma": STAGED_MMA_TFLOPS}
        t_comp = 0.0
        for bop in bg.ops:
            if bop.op_type == "matmul":
                a, b = bop.inputs
                f = 2 * _prod(a.dims) * b.dims[-1] * blocks * fr
                t_comp += f / (rate.get(kinds.get(bop.guid, ""), SMEM_FMA_TFLOPS) * 1e6)
        comp_eff = op_share * min(1.0, warps / 8)
        comp += t_comp / max(comp_eff, 1e-3)
        share = min(share, op_share)
    us = max(mem, comp) + 0.25 * min(mem, comp) + LAUNCH_US * launches
    return Estimate(us, mem, comp, launches, share)
