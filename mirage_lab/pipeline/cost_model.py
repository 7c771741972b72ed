"""An H100 timing model of a lowering variant, to spend the tuning budget in the right order.

It ranks; it does not decide: every variant the budget reaches is measured, and the
measurement picks. Each customized op is costed from what its generated kernel does
(``codegen.plan.KernelPlan``: which matmuls stream B through registers, on tensor cores or
FMAs, and with which thread layout):

* **occupancy and waves**: blocks resident per SM are limited by threads (2048 an SM), shared
  memory (tiles are staged as float32), registers and 32 blocks; the grid runs in ``waves``
  rounds over the SMs that have a block at all;
* **bytes**: each block's tiles every iteration; bytes past a tensor's own size are re-reads
  of shared operands, served by L2. A round of resident blocks moves at the grid's share of
  DRAM / L2 or the busiest SM's load rate, whichever is slower, and only with enough warps
  issuing loads;
* **round trips**: an iteration waits one DRAM round trip (plus a barrier) for its loads,
  unless they were issued ahead: a stream's registers ``pipeline_depth`` iterations ahead
  (only the iterations past the first help, as measured), small staged tiles one iteration
  ahead; a long loop pays it every iteration, which is what makes narrow grids slow;
* **compute**: per thread, the instructions the generated code issues: FMA partial sums of a
  streamed matmul (``M * vw`` per row of B, ``K / G`` rows), ``mma.m16n8k16`` (``M`` padded
  to 16 rows), shared-memory FMA loops of staged matmuls, element-wise stages; throughput-bound
  over the resident warps. Serial loops are dependent chains: each output's ``G`` k-group
  partial sums after the loop, ``reduction``, ``rms_norm``'s one thread per row;
* **spills**: registers past the per-thread budget (65536 / threads, at most 255) turn that
  share of a thread's instructions into local-memory accesses;
* launches, and plain kernel-level ops at copy bandwidth (matmuls at cuBLAS's rate).

The constants (:class:`Hardware`) are an H100's: the limits from its data sheet, the measured
copy peak, and ten (``FITTED``) fitted to the measured order of the stored H100 tuning records
(``benchmarks/found/costmodel_h100_records.json``) within 8x of physical guesses (``PRIOR``), with
``benchmarks/rank_quality.py --records ... --fit``. RESULTS.md "Cost model ranking, round 2" gives
the check: Spearman's rho within each program, and with each program held out of the fit.

    >>> from mirage_lab.examples import rms_norm_linear_fused
    >>> from mirage_lab.codegen import CodegenOptions
    >>> g = rms_norm_linear_fused(16, 4096, 4096)
    >>> e_fma, e_mma = estimate(g, CodegenOptions()), estimate(g, CodegenOptions(mma=True))
    >>> e_mma.us < e_fma.us
    True
"""
from __future__ import annotations

from dataclasses import dataclass, fields, replace
from math import ceil

from ..codegen import CodegenOptions
from ..errors import MirageLabError
from ..ir.kernel_graph import KernelGraph


@dataclass(frozen=True)
class Hardware:
    """The machine constants of the model (times in µs, rates per µs).

    ``sms``, ``hbm_bytes_us`` (the measured copy peak), the thread, block, shared-memory and register
    limits are the H100's. The constants named in ``FITTED`` start from the physical guesses of
    ``PRIOR`` and are fitted within 8x of them on the stored H100 records (``benchmarks/rank_quality.py
    --records ... --fit``, which also reports the leave-one-program-out check); the defaults are
    that fit.
    """

    sms: int = 132
    threads_per_sm: int = 2048
    blocks_per_sm: int = 32
    smem_bytes_per_sm: int = 228 * 1024
    registers_per_sm: int = 65536
    max_registers: int = 255
    hbm_bytes_us: float = 3.0e6          # 3.0 TB/s device-to-device copy peak (DESIGN.md)
    l2_bytes_us: float = 8.0e6
    cublas_flops_us: float = 600e6       # cuBLAS fp16 GEMM FLOPs per µs
    launch_us: float = 2.0               # a kernel launch in a CUDA graph, and its first wave's ramp
    torch_op_us: float = 2.0             # a plain torch kernel's fixed cost beyond its launch
    # FITTED, the fit of 2026-11-25 on the six programs of the records (PRIOR's value in brackets):
    sm_bytes_us: float = 35.7e3          # the most one SM's loads draw [60 GB/s]
    dram_latency_us: float = 0.8         # one load round trip under load [0.8]
    prefetch_gain: float = 1.44          # round trips hidden per iteration of register prefetch past the first [0.5]
    piped_exposed: float = 0.425         # share of a round trip a staged tile loaded an iteration ahead costs [0.5]
    warps_for_full_bw: float = 4.76      # resident warps an SM needs to draw its share of DRAM [8]
    sync_us: float = 0.05                # a barrier and the loop's bookkeeping, per iteration [0.05]
    issue_us: float = 41650.0            # thread-instructions an SM issues per µs [2e5: 4 x 32 lanes x 1.6 GHz]
    step_us: float = 0.00253             # one dependent shared-memory step of a thread's chain [0.02]
    spill_us: float = 0.235              # one dependent local-memory access (a spilled register) [0.05]
    scratch_us: float = 0.29             # one dependent access to a buffer in global scratch (L2) [0.25]
    mma_flops_us: float = 6.63e5         # mma.sync m16n8k16 FLOPs per µs per SM [1.89e6: 250 TFLOP/s]
    # blocks resident on one SM that each draw ``sm_bytes_us`` (a block's draw is bounded by its loads in flight);
    # 1 capped an SM at one block's draw. 2: rho within a program over 9 H200 tuner dumps 0.603 -> 0.635, the H100
    # records 0.84 -> 0.83 (RESULTS.md "2026-11-29 (h)")
    sm_parallel_blocks: float = 2.0

FITTED = ("sm_bytes_us", "dram_latency_us", "prefetch_gain", "piped_exposed", "warps_for_full_bw", "sync_us",
          "issue_us", "step_us", "spill_us", "scratch_us", "mma_flops_us")
H100 = Hardware()
# the H200: the H100's SMs with HBM3e. Its device-to-device copy moves 3.9 TB/s (the suite's copy floors on the
# H200, 2026-11-29: Phi-3-mini's 100.9 MB of inputs read in 25.9 µs, half a copy), against the H100's 3.0. With the
# H100's figure LLaMA-3 8B's SwiGLU b1 lowerings were rated 81 µs where the H200 measured 59-72 (63 on these
# constants); Spearman's rho within a program over 9 H200 tuner dumps 0.59 -> 0.62 (RESULTS.md "2026-11-29 (f)")
H200 = replace(H100, hbm_bytes_us=3.9e6)
KNOWN_GPUS: tuple[tuple[str, Hardware], ...] = (("H200", H200), ("H100", H100))
PRIOR = replace(H100, sm_bytes_us=60e3, dram_latency_us=0.8, prefetch_gain=0.5, piped_exposed=0.5,
                warps_for_full_bw=8.0, sync_us=0.05, issue_us=2e5, step_us=0.02, spill_us=0.05, scratch_us=0.25,
                mma_flops_us=250e6 / 132)


@dataclass(frozen=True)
class Estimate:
    """Estimated microseconds and what they are made of.

    ``memory_us``/``compute_us``: the throughput-bound time of the loads and of the issued
    instructions, summed over the kernels; ``latency_us``: their round-trip and barrier time;
    ``waves``: the most rounds of resident blocks one kernel needs; ``sm_share``: the smallest share
    of SMs a kernel's grid covers.
    """

    us: float
    memory_us: float
    compute_us: float
    launches: int
    sm_share: float
    latency_us: float = 0.0
    waves: int = 1

    def as_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def _prod(xs) -> int:
    n = 1
    for x in xs:
        n *= x
    return n


@dataclass
class _Kernel:
    """One customized op's costs, before the hardware's rates turn them into time."""

    blocks: int
    threads: int
    iters: int
    smem: int
    loop_bytes: float        # bytes one block loads per iteration
    l2_share: float          # the part of the loop's bytes that are re-reads (served by L2)
    once_bytes: float        # bytes one block loads before the loop (invariant tiles) and writes after it
    dram_total: float        # unique bytes the whole grid reads and writes
    exposed: dict            # loads an iteration waits for: {"stream": depth prefetched, "staged": 1, "piped": 1}
    loop_instr: float        # instructions one thread issues per iteration (FMA, shared-memory, element-wise)
    loop_chain: float        # dependent shared-memory steps one thread runs per iteration (serial loops)
    loop_mma_flops: float    # tensor-core FLOPs one block issues per iteration (rows padded to 16)
    post_instr: float        # per thread, after the loop
    post_chain: float
    registers: int = 32      # per thread: partial sums, loads in flight, prefetch ring, ~32 of bookkeeping
    scratch_share: float = 0.0   # the part of the kernel's buffers the generator put in global scratch
    combine_trips: float = 0.0   # split-K: round trips of the tile's last block (the counter, the partial sums)


def _registers(streams, options: CodegenOptions) -> int:
    """Registers a thread of the generated kernel needs: each stream's partial sums (``M * vw`` FMA sums, or
    the mma accumulator fragments) and its words in flight, the prefetch ring, ~32 for indices and loop state."""
    # the prefetch ring holds each pipelined stream's words of an iteration, within pipeline_words
    n = 32 + min(options.pipeline_words, sum(s.words for s in streams.values())) * options.pipeline_depth
    for s in streams.values():
        words = max(1, s.vw // 2)
        if s.mma:
            n += (4 * s.vw * max(1, -(-s.M // 16)) + words * 2) * s.CW
        else:
            n += s.M * s.vw + min(s.phase_rows, s.K // max(1, s.G)) * words
    return n


def _exposed_latency(bg, streams, options: CodegenOptions, T: int) -> dict:
    """Which kinds of load an iteration of the loop waits for (block_kernel's prefetch rules): a streamed
    B tile held in registers ``pipeline_depth`` iterations ahead (within ``pipeline_words``) or not at
    all (depth 0), a staged tile loaded into registers an iteration ahead ("piped", up to
    ``PREFETCH_WORDS`` a thread) or one loaded in the iteration itself ("staged")."""
    from ..codegen.plan import PREFETCH_WORDS

    out: dict = {}
    if bg.forloop_range <= 1:
        return out
    budget = options.pipeline_words
    for s in streams.values():
        if s.loader.invariant:
            continue
        piped = budget > 0 and s.words <= budget
        budget -= s.words if piped else 0
        depth = options.pipeline_depth if piped else 0
        out["stream"] = min(out.get("stream", depth), depth)
    streamed = {s.loader.index for s in streams.values()}
    for i, lop in enumerate(bg.input_ops):
        if i in streamed or lop.attrs["forloop_dim"] < 0:
            continue
        t = lop.outputs[0]
        if _async_tile(bg, t, options, T):
            # a cp.async ring: async_stages - 1 iterations in flight, yet measured slower than one iteration
            # staged through registers (H200, RESULTS.md "2026-11-29 (e)": twice the instructions), so no
            # round trip is counted as hidden
            out["piped"] = 1
            continue
        words = -(-t.numel() * t.dtype.itemsize // 4 // T)
        out["piped" if words <= PREFETCH_WORDS else "staged"] = 1
    return out


def _async_tile(bg, t, options: CodegenOptions, T: int) -> bool:
    """Whether the generator copies staged tile ``t`` by ``cp.async`` (``LoaderEmitter.async_tiles``, roughly:
    a 16-bit tile read only by tensor-core staged matmuls; whether the ring fits is the variant list's to check)."""
    from ..codegen.plan import staged_mma_fits

    if not options.async_stages or not options.mma or options.pipeline_depth > 1 or t.dtype.itemsize != 2:
        return False
    readers = [op for op in bg.ops if any(x is t for x in op.inputs)]
    return bool(readers) and all(op.op_type == "matmul" and staged_mma_fits(op, T, options) for op in readers)


def _kernel(bg, options: CodegenOptions) -> _Kernel:
    from ..codegen.plan import KernelPlan, mma_rows, staged_mma_fits
    from ..codegen.split import split_problem

    T = _prod(bg.block_dim)
    tiles = _prod(bg.grid_dim)
    # split-K across blocks (options.split, where the loop divides): S blocks a tile, each FR / S iterations,
    # then each writes its accumulators' sums and the tile's last block reads them all (two round trips)
    S = options.split if options.split > 1 and split_problem(bg, options.split) is None else 1
    B = tiles * S
    FR = bg.forloop_range // S
    carried = sum(op.outputs[0].numel() for op in bg.ops if op.op_type == "forloop_accum") if S > 1 else 0
    try:
        plan = KernelPlan(bg, options=options)
        streams = {s.op.guid: s for s in plan.streams}
    except Exception:  # an unlowerable plan is the compiler's to report; cost it without streams
        plan, streams = None, {}
    streamed_tiles = {s.op.inputs[1].guid for s in streams.values()}
    raw_a = plan.raw_a_tiles() if plan is not None and options.mma else {}   # 16-bit words, read as A fragments

    loop_bytes = once_bytes = dram = replicated = 0.0
    for lop in bg.input_ops:
        tile = lop.outputs[0]
        dims = lop.attrs["dtensor_dims"]
        item = tile.dtype.itemsize
        whole = _prod(dims) * item
        looped = lop.attrs["forloop_dim"] >= 0
        per_block = tile.numel() * item
        traffic = per_block * B * (FR if looped else 1)
        dram += min(traffic, whole)
        replicated += max(0.0, traffic - whole)
        if looped:
            loop_bytes += per_block
        else:
            once_bytes += per_block
    for oop in bg.output_ops:
        t = oop.inputs[0]
        once_bytes += t.numel() * t.dtype.itemsize
        dram += t.numel() * t.dtype.itemsize * tiles
    once_bytes += 4 * carried
    dram += 4 * carried * B * 2
    loop_traffic = loop_bytes * B * FR
    l2_share = min(1.0, replicated / loop_traffic) if loop_traffic else 0.0

    instr = {False: 0.0, True: 0.0}    # after_accum -> per-thread instructions
    chain = {False: 0.0, True: 0.0}
    mma_flops = 0.0
    smem = 0
    for op in bg.ops:
        if op.op_type in ("input", "output"):
            if op.op_type == "input" and op.outputs[0].guid not in streamed_tiles:
                t = op.outputs[0]
                if op.attrs["forloop_dim"] >= 0 and _async_tile(bg, t, options, T):
                    smem += t.numel() * 2 * options.async_stages   # the ring's stages, 16-bit
                else:
                    smem += t.numel() * (2 if t.guid in raw_a else 4)
                instr[False] += ceil(t.numel() / (T * 4))   # vector loads staged into shared memory
            continue
        out = op.outputs[0]
        post = bool(out.after_accum)
        per = ceil(out.numel() / T)
        if op.op_type == "matmul":
            a, b = op.inputs
            M, K, N = a.dims[-2], a.dims[-1], b.dims[-1]
            batch = _prod(a.dims[:-2])
            s = streams.get(op.guid)
            if s is not None and s.mma:
                mma_flops += 2 * 16 * ceil(M / 16) * K * N * batch
                instr[post] += K // max(1, s.G) // 8 * s.CW   # B rows a lane loads and converts, per column chunk
                if s.frag_owner and s.frag_direct is None:   # A packed into 16-bit pairs each iteration
                    words = ceil(M * K / 2 / T)
                    instr[post] += 3 * words
                    chain[post] += words
            elif s is not None:
                rows = K // max(1, s.G)                # B rows one thread walks, M * vw sums each
                instr[post] += rows * (M * s.vw + max(1, s.vw // 2))
            elif plan is not None and staged_mma_fits(op, T, options):
                Mp = mma_rows(M)                       # rows padded to whole 16-row tiles
                mma_flops += 2 * Mp * K * N * batch
                # fragments packed from shared memory; an A tile kept as its loaded words is read a pair at a time
                instr[post] += ceil(Mp * K / T / (2 if a.guid in raw_a else 1)) + ceil(K * N / T)
                chain[post] += K // 16
            else:                                      # staged FMA loop: two shared-memory reads per FMA
                instr[post] += per * K * 3
                chain[post] += per * K
            smem += out.numel() * 4
            continue
        if op.op_type == "forloop_accum" and op.attrs.get("acc") is None and op.inputs[0].op is not None \
                and op.inputs[0].op.guid in streams:
            continue                                   # a stream's sums stay in registers
        if op.op_type == "reduction":
            n = op.inputs[0].dims[op.attrs["dim"]]
            instr[post] += per * n * 2
            chain[post] += per * n
        elif op.op_type == "rms_norm":                 # 1/rms: one thread per row, then element-wise
            x = op.inputs[0]
            w = x.dims[-1]
            rows = x.numel() // w
            instr[post] += per * 3                     # the row loop runs on `rows` threads only: a chain
            chain[post] += ceil(rows / T) * w
        elif op.op_type == "forloop_accum" and out.numel() < op.inputs[0].numel():
            n = op.inputs[0].numel() // max(1, out.numel())
            instr[post] += per * 3 + ceil(op.inputs[0].numel() / T)
            chain[post] += 2 * max(1, n.bit_length())   # tree of partial sums
        else:
            instr[post] += per * 3
        smem += out.numel() * 4
    for s in streams.values():
        if s.G > 1:   # each output's G k-group partial sums, added serially by one thread (streams.stream_reduce)
            rows = max(1, min(s.M, 4096 // (s.G * s.N))) if s.persistent else s.M
            steps = ceil(s.M / rows) * ceil(rows * s.N / T) * s.G
            chain[s.persistent] += steps
    exposed = _exposed_latency(bg, streams, options, T)
    # what the generator laid out: buffers past the pool (48 KB static, or options.smem_kb) go to per-block global scratch.
    # Emitting the kernel tells (milliseconds); where even every buffer side by side fits, nothing moves
    scratch_share = 0.0
    bound = smem + 4 * (plan.int_words if plan is not None else 0) + 4 * sum(
        s.G * s.M * s.N for s in streams.values())
    if bound > options.pool_floats * 4:
        try:
            from ..codegen.block_kernel import emit_block_kernel

            info = emit_block_kernel(bg, "k", options)[1]
            smem = info.pool_floats * 4
            scratch_share = info.scratch_floats_per_block / max(1, info.pool_floats + info.scratch_floats_per_block)
        except Exception:  # noqa: BLE001  (the compiler reports what cannot be generated; keep the estimate)
            pass
    # FR == 1 kernels do all their work "in the loop": one iteration
    return _Kernel(B, T, FR, smem, loop_bytes, l2_share, once_bytes, dram, exposed,
                   instr[False], chain[False], mma_flops, instr[True], chain[True], _registers(streams, options),
                   scratch_share, 2.0 if S > 1 else 0.0)


def _time(k: _Kernel, hw: Hardware) -> tuple[float, float, float, float, int, float]:
    """(µs, memory µs, compute µs, latency µs, waves, SM share) of one kernel."""
    regs = min(hw.max_registers, k.registers)
    fit = min(hw.threads_per_sm // max(1, k.threads), hw.blocks_per_sm,
              hw.smem_bytes_per_sm // max(1, k.smem + 1024), hw.registers_per_sm // max(1, k.threads * regs))
    # past the per-thread budget (65536 / threads, at most 255) ptxas spills to local memory: that share of
    # the thread's register traffic becomes dependent local-memory accesses
    budget = min(hw.max_registers, hw.registers_per_sm // max(1, k.threads))
    spilled = max(0.0, 1.0 - budget / k.registers)
    fit = max(1, fit)
    active = min(hw.sms, k.blocks)
    resident = min(fit, ceil(k.blocks / active))
    waves = ceil(k.blocks / (active * resident))
    # a round's loads: the whole grid's share of DRAM and L2, or the busiest SM's load path
    round_blocks = min(k.blocks, active * resident)
    grid_bytes = round_blocks * k.loop_bytes
    # an SM draws its share only with enough warps issuing loads (each warp has few in flight)
    draw = min(1.0, resident * ceil(k.threads / 32) / hw.warps_for_full_bw)
    mem_iter = max(grid_bytes * ((1 - k.l2_share) / hw.hbm_bytes_us + k.l2_share / hw.l2_bytes_us),
                   resident * k.loop_bytes / (hw.sm_bytes_us * min(resident, hw.sm_parallel_blocks))) / draw
    dram_sm = min(hw.sm_bytes_us, hw.hbm_bytes_us / active)
    warps = resident * ceil(k.threads / 32) * 32
    comp_iter = warps * k.loop_instr / hw.issue_us + resident * k.loop_mma_flops / hw.mma_flops_us
    # a stream prefetched one iteration ahead measured barely faster than none (RMSNorm 2x4096x6144, 64
    # iterations, H100: 48 against 50 µs; two ahead: 35): count the iterations past the first
    waits = [1.0 / (1 + hw.prefetch_gain * max(0, k.exposed["stream"] - 1))] if "stream" in k.exposed else []
    waits += [hw.piped_exposed] if "piped" in k.exposed else []
    waits += [1.0] if "staged" in k.exposed else []
    # shared-memory steps on buffers in global scratch wait on L2 instead
    slow = spilled * hw.spill_us + k.scratch_share * hw.scratch_us
    lat_iter = (hw.dram_latency_us * max(waits, default=0.0) + hw.sync_us + k.loop_chain * hw.step_us
                + k.loop_instr * slow)
    iter_us = max(mem_iter, comp_iter, lat_iter)
    once = resident * k.once_bytes / dram_sm + hw.dram_latency_us
    post = max(warps * k.post_instr / hw.issue_us, k.post_chain * hw.step_us + k.post_instr * slow)
    per_wave = k.iters * iter_us + once + post
    # the grid as a whole cannot beat DRAM
    us = max(waves * per_wave + k.combine_trips * hw.dram_latency_us, k.dram_total / hw.hbm_bytes_us)
    share = active / hw.sms
    return (us, waves * (k.iters * mem_iter + once), waves * (k.iters * comp_iter + post),
            waves * k.iters * lat_iter, waves, share)


@dataclass(frozen=True)
class _TorchOp:
    """A plain kernel-level op (run by torch): its bytes and, for a matmul, its FLOPs."""

    nbytes: int
    flops: float


def profile(graph: KernelGraph, options: CodegenOptions) -> list:
    """What each kernel of ``graph`` lowered with ``options`` does, before any hardware rate applies
    (``estimate`` = :func:`time_profile` of this; the fit reuses one profile under many constants)."""
    if not isinstance(graph, KernelGraph):
        raise MirageLabError(f"estimate: expected a KernelGraph, got {type(graph).__name__}; pass a μGraph "
                             "(a candidate of search(), or a program built with mirage_lab)")
    out: list = []
    for op in graph.ops:
        if op.op_type == "input":
            continue
        if op.op_type == "customized":
            out.append(_kernel(op.block_graph, options))
            continue
        nbytes = sum(t.nbytes() for t in op.inputs) + sum(t.nbytes() for t in op.outputs)
        flops = 0.0
        if op.op_type == "matmul":
            a, b = op.inputs
            flops = 2.0 * _prod(a.dims) * b.dims[-1]
        out.append(_TorchOp(nbytes, flops))
    return out


def time_profile(kernels: list, hw: Hardware = H100) -> Estimate:
    """The :class:`Estimate` of a :func:`profile` on ``hw``."""
    us = mem = comp = lat = 0.0
    waves = 1
    share = 1.0
    for k in kernels:
        if isinstance(k, _TorchOp):
            t_mem, t_comp = k.nbytes / hw.hbm_bytes_us, k.flops / hw.cublas_flops_us
            mem, comp = mem + t_mem, comp + t_comp
            us += max(t_mem, t_comp) + hw.torch_op_us + hw.launch_us
            continue
        t, m, c, l, w, s = _time(k, hw)
        us += t + hw.launch_us
        mem, comp, lat = mem + m, comp + c, lat + l
        waves = max(waves, w)
        share = min(share, s)
    return Estimate(us, mem, comp, len(kernels), share, lat, waves)


def estimate(graph: KernelGraph, options: CodegenOptions, hw: Hardware | None = None) -> Estimate:
    """The estimated latency of ``graph`` lowered with ``options`` (block sizes are the graph's) on ``hw``
    (default: :func:`hardware`, the GPU this process tunes on).

        >>> from mirage_lab.examples import rms_norm_linear_fused
        >>> e = estimate(rms_norm_linear_fused(16, 4096, 4096, grid=128, forloop_range=16), CodegenOptions(mma=True))
        >>> e.launches, e.us > 0
        (1, True)
    """
    return time_profile(profile(graph, options), hardware() if hw is None else hw)


_DEVICE_NAMES: dict[int, str] = {}


def hardware(device: str | None = None) -> Hardware:
    """The model's constants for the CUDA device named ``device`` (default: this process's current device where
    CUDA is already initialised, as in a tuner; else, e.g. in a search worker or without a GPU, the H100's).

    A name containing one of :data:`KNOWN_GPUS`' keys gets its constants, any other the H100's.
    ``MIRAGE_LAB_HBM_TBS`` (TB/s moved by a device-to-device copy) overrides the bandwidth.

        >>> hardware("NVIDIA H200").hbm_bytes_us, hardware("NVIDIA H100 80GB HBM3").hbm_bytes_us
        (3900000.0, 3000000.0)
    """
    import os
    import sys

    if device is None:
        torch = sys.modules.get("torch")
        try:
            if torch is not None and torch.cuda.is_initialized():
                index = torch.cuda.current_device()   # the name once per device: estimate() runs thousands of times
                device = _DEVICE_NAMES.get(index) or _DEVICE_NAMES.setdefault(index, torch.cuda.get_device_name(index))
        except Exception:  # noqa: BLE001 - a broken CUDA set-up: the H100's constants, the launch reports the rest
            device = None
    hw = next((h for key, h in KNOWN_GPUS if device and key in device), H100)
    env = os.environ.get("MIRAGE_LAB_HBM_TBS")
    if env:
        try:
            hw = replace(hw, hbm_bytes_us=float(env) * 1e6)
        except ValueError:
            raise MirageLabError(f"MIRAGE_LAB_HBM_TBS must be a number of TB/s, got {env!r}") from None
    return hw


def with_constants(hw: Hardware = H100, **values: float) -> Hardware:
    """``hw`` with some constants replaced (what ``rank_quality.py --fit`` tries).

        >>> with_constants(sync_us=0.1).sync_us
        0.1
    """
    names = {f.name for f in fields(Hardware)}
    bad = sorted(set(values) - names)
    if bad:
        raise MirageLabError(f"with_constants: no constant named {bad}; the model's constants are {sorted(names)}")
    return replace(hw, **values)
