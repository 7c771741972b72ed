"""Lowering variants of a candidate μGraph: the knobs that change speed, never results.

A variant is a candidate μGraph with a number of threads per block (a μGraph attribute,
``block_dim``) and codegen options (tensor cores or FMA, register prefetch, partial sums per
thread, words issued per phase). The sets below are the ones the hand tuning in
``benchmarks/RESULTS.md`` found to matter; variants whose generated kernels are identical
(an option that does not apply to this μGraph) are kept once.

    >>> from mirage_lab.examples import rms_norm_linear_fused
    >>> vs = lowering_variants(rms_norm_linear_fused(4, 256, 256, grid=8, forloop_range=4), candidate=0)
    >>> len(vs) > 3, sorted({v.threads for v in vs})
    (True, [128, 256, 512])
"""
from __future__ import annotations

import hashlib
import os
import sys
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from typing import Sequence

from ..codegen import CodegenOptions, GeneratedModule, generate_module
from ..codegen.plan import MAX_SMEM_KB, STATIC_SMEM_KB
from ..errors import MirageLabError
from ..ir.kernel_graph import KernelGraph

THREADS = (128, 256, 512)
# FMA first: where tensor cores do not apply, the mma options generate the same kernels and
# are dropped as duplicates under the plain label
OPTION_SETS: tuple[CodegenOptions, ...] = (
    CodegenOptions(),
    CodegenOptions(max_stream_acc=64),
    CodegenOptions(phase_words=64),
    # ldmatrix fragments in register-blocked tensor-core loops (dropped where no such loop reads by it): measured
    # 3-12 % faster on the H200 (Phi-3-mini SwiGLU 32.9 -> 31.9 µs, Qwen-2.5 0.5B 29.3 -> 25.8; RESULTS.md 2026-11-29 (f))
    CodegenOptions(mma=True, ldmatrix=True),
    CodegenOptions(mma=True, pipeline_words=64, ldmatrix=True),
    # two register sets, loop unrolled twice: measured 2% faster on RMSNorm 2x4096x6144 (H100)
    CodegenOptions(mma=True, pipeline_words=64, pipeline_depth=2, ldmatrix=True),
    # 32-column tensor-core warps with 16-byte B loads and movmatrix (the same code elsewhere: dropped);
    # depth 2 was the fastest RMSNorm 16x4096^2 lowering measured (18.2 µs against 19.4, H100)
    CodegenOptions(mma=True, mma_b16=True),
    CodegenOptions(mma=True, pipeline_words=64, mma_b16=True),
    CodegenOptions(mma=True, pipeline_words=64, pipeline_depth=2, mma_b16=True),
)


@dataclass
class Variant:
    """One way to lower one candidate: ``graph`` (with its ``block_dim``) compiled with ``options``."""

    candidate: int
    graph: KernelGraph
    options: CodegenOptions
    threads: int
    source_key: str = ""
    estimate_us: float | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def tag(self) -> str:
        return f"cand{self.candidate}/t{self.threads}/{self.options.tag()}"


def with_block_dim(g: KernelGraph, threads: int) -> KernelGraph:
    """The same μGraph with ``threads`` threads per block in every customized op."""
    from ..ir.serialize import from_dict, to_dict

    if all(op.block_graph.block_dim[0] == threads for op in g.customized_ops):
        return g
    d = to_dict(g)
    for op in d["kernel_graph"]["ops"]:
        if "block_graph" in op:
            op["block_graph"]["block_dim"] = [threads, 1, 1]
            op["block_graph"].pop("thread_graph", None)
    return from_dict(d)


def _uses_mma(g: KernelGraph, options: CodegenOptions) -> bool:
    """Whether ``options`` put any matmul of ``g`` on tensor cores (a stream, or two staged tiles)."""
    from ..codegen.plan import KernelPlan, staged_mma_fits

    try:
        for op in g.customized_ops:
            plan = KernelPlan(op.block_graph, options=options)
            if any(s.mma for s in plan.streams) or any(
                    b.op_type == "matmul" and b.guid not in plan.stream_of and staged_mma_fits(b, plan.T, options)
                    for b in op.block_graph.ops):
                return True
        return False
    except MirageLabError:
        return False


def _source_key(g: KernelGraph, options: CodegenOptions) -> tuple[str, GeneratedModule]:
    gen = generate_module(g, options=options)
    return _key_of(gen), gen


def _ldmatrix_where_read(g: KernelGraph, options: CodegenOptions) -> tuple[CodegenOptions, str, GeneratedModule]:
    """``(options, source key, module)`` of ``g``, without ``ldmatrix`` where no register-blocked loop reads by it
    (there the option would only change the B tiles' layout, read by movt: not measured faster)."""
    key, gen = _source_key(g, options)
    if options.ldmatrix and not any("ldsm4" in src for src in gen.kernel_sources.values()):
        options = replace(options, ldmatrix=False)
        key, gen = _source_key(g, options)
    return options, key, gen


def _key_of(gen: GeneratedModule) -> str:
    body = "".join(gen.kernel_sources.values())  # the header names the options; the kernels are what differ
    return hashlib.sha1(body.encode()).hexdigest()


def device_smem_kb() -> int:
    """KB of shared memory one block may opt in to on the GPU that tunes (``MIRAGE_LAB_SMEM_KB`` overrides).

    Read from torch only where CUDA is already initialised (never in a search worker); otherwise the
    H100/H200 figure, 227. 48 or less turns the dynamic shared-memory variants off.
    """
    env = os.environ.get("MIRAGE_LAB_SMEM_KB")
    if env:
        try:
            return max(0, min(MAX_SMEM_KB, int(env)))
        except ValueError:
            raise MirageLabError(f"MIRAGE_LAB_SMEM_KB must be an integer number of KB, got {env!r}") from None
    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch.cuda.is_initialized():
            props = torch.cuda.get_device_properties(torch.cuda.current_device())
            return min(MAX_SMEM_KB, int(getattr(props, "shared_memory_per_block_optin", MAX_SMEM_KB * 1024)) // 1024)
    except Exception:  # noqa: BLE001 - a broken CUDA set-up: the default, the launch reports the rest
        pass
    return MAX_SMEM_KB


def _smem_variant(options: CodegenOptions, gen: GeneratedModule, limit_kb: int) -> CodegenOptions | None:
    """``options`` with the shared-memory pool grown to hold what spilled to global scratch at 48 KB, or None.

    The pool asked for is what the buffers need (10 % and 2 KB over, for the tiles' row padding and the
    tensor-core fragments, rounded up to 8 KB), so the block keeps as much occupancy as it can.
    """
    spill = [k for k in gen.kernels if k.scratch_floats_per_block]
    if options.smem_kb != STATIC_SMEM_KB or not spill or limit_kb <= STATIC_SMEM_KB:
        return None
    need = max(4 * (k.pool_floats + k.scratch_floats_per_block) for k in spill) * 1.1 / 1024 + 2
    return replace(options, smem_kb=int(min(limit_kb, max(STATIC_SMEM_KB + 8, -(-need // 8) * 8))))


# rings of cp.async stages tried for lowerings whose staged tensor-core tiles qualify (codegen.plan.CodegenOptions):
# none by default. Measured on the H200 (benchmarks/RESULTS.md "2026-11-29 (e)"), every ring was slower than the
# register staging it replaces (Phi-3-mini's SwiGLU 32.9 -> 41.3 µs with 2 stages, 52.6 with 3; Qwen-2.5 0.5B's
# 22.8 -> 30.5), and in the tuner they took the budget (13 of 120 variants timed). Set e.g. (2, 3) to race them.
ASYNC_STAGES: tuple[int, ...] = ()


def _async_variants(g: KernelGraph, options: CodegenOptions, smem_kb: int) -> list[tuple[CodegenOptions, str]]:
    """``options`` with its staged tensor-core tiles copied by ``cp.async`` into rings of ``ASYNC_STAGES`` stages, in
    the dynamic shared memory the device allows: ``(options, source key)`` for each ring that fits (the generated
    kernels copy), from the plain tensor-core options only (the register-prefetch ones change the streams, which a
    ring leaves alone).
    """
    if (not options.mma or options.pipeline_words or options.pipeline_depth > 1 or options.mma_b16
            or options.async_stages or options.smem_kb != STATIC_SMEM_KB or smem_kb <= STATIC_SMEM_KB):
        return []
    out = []
    for S in ASYNC_STAGES:
        o = replace(options, async_stages=S, smem_kb=smem_kb)
        try:
            gen = generate_module(g, options=o)
        except MirageLabError:
            break
        if not any("cp16(sm" in src for src in gen.kernel_sources.values()):
            break   # no tile qualifies, or this ring (and so every longer one) does not fit
        out.append((o, _key_of(gen)))
    return out


# blocks sharing a tile's loop (CodegenOptions.split), tried for grids of fewer tiles than SPLIT_BELOW x the SMs: the
# powers of two that put SPLIT_BLOCKS_PER_SM[0]..[1] blocks an SM (at most two of them). On the H200 (benchmarks/RESULTS.md
# "2026-11-29 (h)") LLaMA-3 70B's QKV b8 over 80 tiles: 75.4 µs whole at best, 65.8 split over 8 blocks (128 threads),
# 71.4 over 4 (256 threads), but 85 over 2 (160 blocks: the SMs that get two take twice as long); grids of 172 and
# 224 tiles split measured 5 % faster once (ReluLLaMA b16, 2 blocks) and slower otherwise, so they stay whole
SPLIT_BELOW = 0.75
SPLIT_BLOCKS_PER_SM = (2, 8)


def split_factors(g: KernelGraph) -> list[int]:
    """The ``split`` values worth a variant of ``g``: its widest kernel's grid leaves SMs without a tile
    (fewer than ``SPLIT_BELOW`` x the SMs), and each split keeps at least 2 iterations of the loop a block.

    >>> from mirage_lab.examples import rms_norm_linear_fused
    >>> split_factors(rms_norm_linear_fused(8, 8192, 10240, grid=80, forloop_range=64))
    [4, 8]
    >>> split_factors(rms_norm_linear_fused(8, 8192, 10240, grid=160, forloop_range=64))
    []
    """
    from ..codegen.split import split_problem
    from .cost_model import hardware

    sms = hardware().sms
    grids = [op.block_graph for op in g.customized_ops if op.block_graph.forloop_range >= 4]
    if not grids:
        return []
    tiles = max(b.grid_dim[0] * b.grid_dim[1] * b.grid_dim[2] for b in grids)
    if tiles >= SPLIT_BELOW * sms:
        return []
    lo, hi = SPLIT_BLOCKS_PER_SM
    out = []
    S = 2
    while S <= 16 and len(out) < 2:
        if lo * sms <= tiles * S <= hi * sms and any(split_problem(b, S) is None and b.forloop_range // S >= 2
                                                     for b in grids):
            out.append(S)
        S *= 2
    return out


def lowering_variants(graph: KernelGraph, *, candidate: int = 0, threads: Sequence[int] = THREADS,
                      option_sets: Sequence[CodegenOptions] = OPTION_SETS) -> list[Variant]:
    """Every distinct (threads, options) lowering of ``graph``; duplicates of generated code dropped.

    A μGraph without customized ops has one variant (its kernels are torch's).
    """
    if not graph.customized_ops:
        return [Variant(candidate, graph, CodegenOptions(), 0, "torch")]
    smem_kb = device_smem_kb()
    memo_key = (graph.content_hash(), tuple(threads), tuple(o.astuple() for o in option_sets), smem_kb)
    kept = _MEMO.get(memo_key)
    if kept is None:
        kept = _MEMO[memo_key] = _lowering_variants(graph, threads, option_sets, smem_kb)
        while len(_MEMO) > MEMO_SIZE:
            _MEMO.popitem(last=False)
    else:
        _MEMO.move_to_end(memo_key)
    return [Variant(candidate, g, o, t, key) for g, o, t, key in kept]


# lowering_variants' answers by the graph's content: one candidate's variants are asked for by the
# search's stop rule, the speculative compiles, the shortlist and the tuner, and each time cost a
# generated module per (threads, options) pair, in the thread the torch.compile warm-up shares the GIL with
MEMO_SIZE = 256
_MEMO: "OrderedDict[tuple, list[tuple[KernelGraph, CodegenOptions, int, str]]]" = OrderedDict()


def _lowering_variants(graph: KernelGraph, threads: Sequence[int], option_sets: Sequence[CodegenOptions],
                       smem_kb: int = MAX_SMEM_KB) -> list[tuple[KernelGraph, CodegenOptions, int, str]]:
    """The distinct ``(graph, options, threads, source key)`` lowerings, in threads-then-options order.

    A lowering whose buffers spill past the static 48 KB to global scratch is followed by the same
    lowering with a dynamic shared-memory pool that holds them (up to ``smem_kb``), and one whose grid
    leaves SMs short of blocks by the same lowering split over blocks (:func:`split_factors`).
    """
    out: list[tuple[KernelGraph, CodegenOptions, int, str]] = []
    seen: set[str] = set()
    errors: list[str] = []
    splits = split_factors(graph)

    def twin(g: KernelGraph, t: int, o: CodegenOptions) -> None:
        """Add the lowering of ``g`` at ``t`` threads with ``o`` (ldmatrix where read) unless its code is kept."""
        try:
            o, key, _ = _ldmatrix_where_read(g, o)
        except MirageLabError as e:
            errors.append(f"{t} threads, {o.tag()}: {e}")
            return
        if key not in seen:
            seen.add(key)
            out.append((g, o, t, key))

    for t in threads:
        try:
            g = with_block_dim(graph, t)
        except MirageLabError as e:  # e.g. a block graph whose reduction needs another block size
            errors.append(f"{t} threads: {e}")
            continue
        for o in option_sets:
            if o.mma and not _uses_mma(g, o):
                o = replace(o, mma=False, ldmatrix=False)  # say what the kernels are: FMA code under its own name
            asked = o
            try:
                o, key, gen = _ldmatrix_where_read(g, o)
            except MirageLabError as e:
                errors.append(f"{t} threads, {o.tag()}: {e}")
                continue
            if key in seen:
                continue
            seen.add(key)
            out.append((g, o, t, key))
            for S in splits:   # the same lowering with each tile's loop split over S blocks
                twin(g, t, replace(o, split=S))
            for o3, key3 in _async_variants(g, asked, smem_kb):
                if key3 not in seen:
                    seen.add(key3)
                    out.append((g, o3, t, key3))
            # the shared-memory twin from the options asked for: a tile that spilled to global scratch at 48 KB
            # may be register-blocked (and read by ldmatrix) once it is in shared memory
            o2 = _smem_variant(asked, gen, smem_kb)
            if o2 is not None:
                twin(g, t, o2)
    if not out:
        raise MirageLabError("no lowering of this μGraph could be generated: " + "; ".join(errors[:3]))
    return out
