"""Emit one Numba-CUDA kernel (readable Python source) for one customized op's block graph.

The kernel follows the block graph's semantics (MIRAGE_SPEC §1.3) literally:

    prologue   thread/block indices, tile bases, zeroed accumulators, loop-invariant tiles
    for it in range(forloop_range):
        issue every global load of this iteration (vector loads into registers)
        store staged tiles to shared memory (as float32)
        run the in-loop fusion chains (bg.thread_graph().chains), each per element in registers
        accumulate (registers where each thread owns a few elements)
    epilogue   finish accumulators (cross-thread reductions), after-loop chains, savers

A streamed matmul (see :mod:`.plan`) never stages its B tile: each thread loads its rows
of B straight into registers and keeps ``M x vw`` partial sums. ``__syncthreads`` is
placed only where a stage reads what another thread wrote since the last barrier (or
overwrites what one read).

This module holds the emitter's core (barrier placement, per-element loops, the loop and its
register-set ring, assembly of the kernel text); the stages are mixed in from their own
modules: :mod:`.elementwise` (per-op text, values, sinks), :mod:`.loaders`, :mod:`.streams`
(streamed FMA / tensor-core matmuls), :mod:`.chains` (fusion chains, accumulator placement),
:mod:`.staged_mma` and :mod:`.accumulators` (row reductions over the loop).

    >>> src, info = emit_block_kernel(bg, "k0")      # doctest: +SKIP
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from ..ir.tiling import scatter_plan
from .accumulators import AccumulatorEmitter
from .buffers import BufferPlanner
from .chains import ChainEmitter
from .elementwise import ElementwiseEmitter
from .loaders import LoaderEmitter
from .index_ops import shift_pow2
from .plan import AXIS_VARS, DEFAULT_OPTIONS, MAX_REG_ELEMS, STATIC_SMEM_KB, CodegenOptions, KernelPlan, Loader, Stream
from .source import Src, add, mul
from .split import SplitEmitter
from .staged_mma import StagedMmaEmitter
from .streams import StreamEmitter

if TYPE_CHECKING:  # pragma: no cover
    from ..ir.block_graph import BlockGraph, STensor, TBOp


@dataclass
class KernelInfo:
    """What the host needs to launch a generated kernel."""

    name: str
    grid: tuple[int, int, int]
    threads: int
    pool_floats: int
    scratch_floats_per_block: int
    dyn_smem_bytes: int                # 0: static shared arrays; else the dynamic area to launch with
    input_views: list[str]           # "int32" | "int16" per input
    output_dtypes: list[str]
    streamed_inputs: list[int] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    counters: int = 0                  # split-K: tiles whose blocks count their arrivals (an int32 argument)

    @property
    def scratch_floats(self) -> int:
        g = self.grid
        return self.scratch_floats_per_block * g[0] * g[1] * g[2]


class _Sync:
    """Tracks shared/scratch buffers read and written since the last barrier."""

    def __init__(self) -> None:
        self.read: set[str] = set()
        self.written: set[str] = set()

    def conflicts(self, reads: set[str], writes: set[str], owned: set[str]) -> bool:
        return bool(reads & self.written or writes & (self.read | self.written) or owned & self.read)

    def note(self, reads: set[str], writes: set[str], owned: set[str]) -> None:
        self.read |= reads
        self.written |= writes | owned

    def clear(self) -> None:
        self.read.clear()
        self.written.clear()

    @property
    def dirty(self) -> bool:
        return bool(self.read or self.written)


class _Emitter(BufferPlanner, ElementwiseEmitter, LoaderEmitter, StreamEmitter, ChainEmitter, StagedMmaEmitter,
               AccumulatorEmitter, SplitEmitter):
    # where `index_ops.shift_pow2` rewrites // and % by powers of two: "all", "outside" the loop,
    # "none", or "auto": all of a kernel with tensor-core staged matmuls, none elsewhere. Measured
    # on the H100 (benchmarks/codegen_ab_probe.py, RESULTS.md): GQA 2x256 19.3 -> 18.0 µs, but
    # the RMSNorm and MLP stream kernels 18.7 -> 22.2 and 29.1 -> 31.0 (only their lane indices
    # changed: `tid % 32` -> `tid & 31`), so the rewrite goes where it was measured to pay
    shift_scope = "auto"
    def __init__(self, bg: "BlockGraph", name: str, options: CodegenOptions = DEFAULT_OPTIONS,
                 pad: bool = True) -> None:
        self.options = options
        self.p = KernelPlan(bg, name, options)
        self.bg = bg
        self.name = name
        self.T = self.p.T
        self.FR = bg.forloop_range
        self.sync = _Sync()
        self.split_init()   # FR: the iterations one block runs (FR_total / options.split)
        self.loop_head: list[tuple[set[str], set[str], set[str]]] = []
        self._head_open = True
        self.in_loop = False
        self.materialized: set[int] = set()      # tensors with a buffer or register values
        self.sunk_savers: set[int] = set()       # saver ops already written directly
        self.reg_acc: dict[int, str] = {}        # accum tensor guid -> register name prefix
        self.post_actions: list[Callable[[Src], None]] = []
        self.pre_loop: list[Callable[[Src], None]] = []   # after the loop-invariant tiles are stored
        self.notes: list[str] = []
        self._rsw: dict[int, int] = {}           # streamed loader index -> words per row of B
        self._tmp = 0                            # counter of direct_fragments' temporaries
        # streams whose next iteration's rows load during this one (in order, within the word budget)
        self._piped: set[int] = set()
        # register sets of the prefetch ring (at most one per iteration); each set of a stream
        # costs its words. 1: the double buffer (next tile loaded at the loop top, moved at the end)
        self.depth = max(1, min(options.pipeline_depth, self.FR))
        sets = self.depth if self.depth > 1 else 1
        budget = options.pipeline_words
        for st in self.p.streams:
            if self.FR > 1 and st.words * sets <= budget:
                self._piped.add(st.op.guid)
                budget -= st.words * sets
        # Row pitch (floats) of the tiles a tensor-core staged matmul reads: rows padded to 4 mod 8
        # words, so a warp's B-fragment reads (k rows 2t, 2t + 1 of column g) hit 32 banks and its
        # A-fragment reads (rows g, k pair 2t) 16, where the dense layout hit 8 and 4 (ncu: the
        # attention kernel was bound by shared-memory wavefronts, L1 throughput 89 %)
        # 16-bit tiles read only as the B operand of tensor-core staged matmuls are k-pair words
        # instead (buffer name -> row pitch in words; :meth:`LoaderEmitter.pair_tiles`)
        self.pair_pitch: dict[str, int] = self.pair_tiles() if pad else {}
        # and those read only as the A operand keep their loaded words: (m, k pair) words, an A-fragment
        # register each (:meth:`LoaderEmitter.raw_a_tiles`)
        self.raw_a_pitch: dict[str, int] = self.raw_a_tiles() if pad else {}
        # 16-bit tensor-core tiles copied by cp.async into a ring of stages (options.async_stages), kept as
        # loaded: buffer name -> row pitch in words (:meth:`LoaderEmitter.async_tiles`); B tiles among them
        # are no longer k-pairs
        self.async_pitch: dict[str, int] = self.async_tiles() if pad else {}
        for name in self.async_pitch:
            self.pair_pitch.pop(name, None)
        # with ldmatrix fragments (options.ldmatrix), B tiles kept as loaded too, read by ldmatrix.trans
        # instead of k-pair words (:meth:`LoaderEmitter.raw_b_tiles`)
        self.raw_b_pitch: dict[str, int] = self.raw_b_tiles() if pad and options.ldmatrix and options.mma else {}
        for name in self.raw_b_pitch:
            self.pair_pitch.pop(name, None)
        self.pitch: dict[str, tuple[int, int]] = {}   # buffer name -> (cols, pitch)
        for op in bg.ops if pad else ():
            if self.is_staged_mma(op):
                for t in op.inputs:
                    cols = t.dims[-1]
                    if (cols % 4 == 0 and t.numel() > cols and self.bufname(t) not in self.pair_pitch
                            and self.bufname(t) not in self.raw_a_pitch and self.bufname(t) not in self.async_pitch
                            and self.bufname(t) not in self.raw_b_pitch):
                        self.pitch[self.bufname(t)] = (cols, cols + (4 - cols) % 8)
        # sum/mean/rms accumulators of a staged loader tile's rows, summed from the load registers
        self.fused_acc: dict[int, list["TBOp"]] = {}
        for ch in self.p.chains:
            op = ch.lead
            if op.op_type != "forloop_accum" or op.attrs["acc"] not in ("sum", "mean", "rms"):
                continue
            ld = self.p.loader_of.get(op.inputs[0].guid)
            if (ld is not None and ld.mode == "staged" and not ld.invariant and ld.view == "int32"
                    and len(ld.tile) >= 2 and self.staged_prefetchable(ld)):
                self.fused_acc.setdefault(ld.index, []).append(op)
        # only where it spares the tile's float32 copy (every other reader is a tensor-core matmul
        # fed from the registers): next to a shared-memory copy it measured slower (FMA path)
        for li, ops in list(self.fused_acc.items()):
            ld = self.p.loaders[li]
            if not all(c in ops or self.frag_direct_reader(c, ld) for c in self.consumers(ld.out)):
                del self.fused_acc[li]

    # ------------------------------------------------------------------ helpers
    def consumers(self, t: "STensor") -> list["TBOp"]:
        return self.p.consumers.get(t.guid, [])

    def frag_direct_reader(self, op: "TBOp", ld: Loader) -> bool:
        """``op`` is a tensor-core matmul whose A fragments come straight from ``ld``'s load registers."""
        st = self.p.stream_of.get(op.guid) if op.op_type == "matmul" else None
        return st is not None and st.frag_direct is ld

    def savers(self, t: "STensor") -> list["TBOp"]:
        return [c for c in self.consumers(t) if c.op_type == "output"]

    def stage(self, s: Src, reads: set[str] = frozenset(), writes: set[str] = frozenset(),
              owned: set[str] = frozenset()) -> None:
        """Declare the smem/scratch buffers the next stage touches; emit a barrier if needed."""
        reads, writes, owned = set(reads), set(writes), set(owned)
        if self.sync.conflicts(reads, writes, owned):
            s("cuda.syncthreads()")
            self.sync.clear()
            if self.in_loop:
                self._head_open = False
        if self.in_loop and self._head_open:
            self.loop_head.append((reads, writes, owned))
        self.sync.note(reads, writes, owned)

    def barrier(self, s: Src) -> None:
        if self.sync.dirty:
            s("cuda.syncthreads()")
            self.sync.clear()

    def per_element(self, s: Src, count: int, body: Callable[[Src, str, int | None], None],
                    unroll: bool | None = None, var: str = "e") -> None:
        """``for`` each index ``tid + T*i < count`` (unrolled when small): body(src, index_var, i)."""
        T = self.T
        n = -(-count // T)
        if unroll is None:
            unroll = n <= MAX_REG_ELEMS
        if unroll:
            for i in range(n):
                vi = f"{var}{i}"
                s(f"{vi} = tid + {T * i}" if i else f"{vi} = tid")
                if (i + 1) * T > count:
                    with s.block(f"if {vi} < {count}:"):
                        body(s, vi, i)
                else:
                    body(s, vi, i)
        else:
            with s.block(f"for i in range({n}):"):
                s(f"{var} = tid + {T} * i")
                if n * T > count:
                    with s.block(f"if {var} < {count}:"):
                        body(s, var, None)
                else:
                    body(s, var, None)

    def ring_names(self, staged: list[Loader], streams: list[Stream]) -> "re.Pattern | None":
        """The registers of the prefetch ring (one set per unrolled iteration), as one pattern."""
        if self.depth == 1:
            return None
        names = [f"r{ld.index}_{j}{h}" for ld in staged for j in range(self.staged_vectors(ld)[1])
                 for h in ("", "h")[:1 + self.paired(ld)]]
        names += [f"b{st.loader.index}_{u}" for st in streams for u, *_ in self.stream_units(st, self.stream_rows(st))]
        return re.compile(r"\b(" + "|".join(map(re.escape, names)) + r")\b") if names else None

    @staticmethod
    def in_set(lines: list[str], ring: "re.Pattern | None", k: int, it: str | None, indent: int = 0) -> list[str]:
        """``lines`` for register set ``k`` of the ring (names suffixed ``s{k}``), ``it`` -> the iteration."""
        out = []
        for ln in lines:
            if ring is not None and k:
                ln = ring.sub(lambda m: f"{m.group(1)}s{k}", ln)
            if it is not None:
                ln = re.sub(r"\bit\b", it, ln)
            out.append(("    " * indent + ln) if ln else ln)
        return out

    # ------------------------------------------------------------------ savers
    def emit_savers(self, s: Src) -> None:
        for j, sv in enumerate(self.bg.output_ops):
            if sv.guid in self.sunk_savers:
                continue
            t = sv.inputs[0]
            s.comment(f"save {t.name} -> out{j}")
            self.stage(s, reads={self.bufname(t)})
            self.per_element(s, t.numel(), lambda s, e, i, j=j, sv=sv, t=t: s(
                f"out{j}[{add(f'ob{j}', self.saver_index(sv, e))}] = {self.store_conv(sv, self.ref(t, e))}"),
                unroll=False)

    def saver_bases(self, s: Src) -> None:
        """``ob{j}``: where this block's tile of output ``j`` starts (the grid strides of its scatter plan)."""
        grid = self.bg.grid_dim
        for j, sv in enumerate(self.bg.output_ops):
            _, strides = scatter_plan(sv.inputs[0].dims, grid, sv.attrs["output_map"], sv.attrs["out_dims"])
            s(f"ob{j} = {add(*(mul(AXIS_VARS[a], strides[a]) for a in range(3) if grid[a] > 1))}")

    # ------------------------------------------------------------------ the kernel
    def emit(self) -> tuple[str, KernelInfo]:
        p = self.p
        bg = self.bg
        self._acc_inits: list[tuple["STensor", int]] = []
        self._red_inits: list[str] = []
        # every buffer placed before any text is written: the stages write sm[...] / scr[...] directly
        pool, scratch = self.plan_buffers()
        if scratch and (self.pitch or self.pair_pitch or self.raw_a_pitch or self.async_pitch or self.raw_b_pitch):
            raise _PaddingOverflow  # the padded tiles (or a cp.async ring) pushed a buffer out of shared memory
        # past numba's static 48 KB (options.smem_kb allows it): dynamic shared memory, opted in at launch
        dyn_bytes = 4 * (pool + p.int_words) if 4 * (pool + p.int_words) > STATIC_SMEM_KB * 1024 else 0
        in_loop, post = self.stage_chains()

        # --- prologue, part 1: indices and tile bases (the loop body refers to them)
        pro = Src(1)
        for ld in p.loaders:
            self.loader_base(pro, ld)
        for st in p.streams:
            self.stream_setup(pro, st)

        # --- the loop body (emitted before the rest: it discovers accumulators and buffers)
        body = Src(2 if self.FR > 1 else 1)
        self.in_loop = True
        staged = [ld for ld in p.loaders if ld.mode == "staged" and not ld.invariant]
        asyncs = [ld for ld in staged if self.is_async(ld)]
        staged = [ld for ld in staged if ld not in asyncs]
        piped_staged = [ld for ld in staged if self.staged_piped(ld)]
        piped_streams = [st for st in p.streams if self.stream_pipelined(st)]
        D = self.depth
        S = self.options.async_stages
        if asyncs:
            # the cp.async ring: this iteration's stage has landed (at most S - 2 later groups still in
            # flight) and every thread is past the last iteration's reads, so its stage can be refilled
            body.comment(f"cp.async ring of {S} stages: wait for iteration it's copies, refill the stage read last iteration")
            body(f"cp_wait{S - 2}()")
            body("cuda.syncthreads()")
            self.sync.clear()
            self._head_open = False   # the barrier above orders this iteration after the last one
            for ld in asyncs:
                body(f"cs{ld.index} = it % {S} * {self.async_words(self.bufname(ld.out))}")
            with body.block(f"if it + {S - 1} < {self.FR}:"):
                for ld in asyncs:
                    self.issue_async(body, ld, f"(it + {S - 1})", f"(it + {S - 1}) % {S}")
            body("cp_commit()   # a group every iteration, empty ones too: the wait counts groups")
        if piped_streams and D == 1:  # double buffer: the next iteration's rows load while this one computes
            with body.block(f"if it + 1 < {self.FR}:"):
                for st in piped_streams:
                    body.comment(f"prefetch streamed {st.loader.out.name} rows for iteration it + 1")
                    self.issue_stream(body, st, self.stream_rows(st), prefix="n", it="(it + 1)")
        prefetched = {ld.index: (ld in piped_staged) or self.issue_staged(body, ld) for ld in staged}
        for st in p.streams:
            if st not in piped_streams:
                rows = st.phases[0]
                body.comment(f"issue the first {len(rows)} {'k-steps' if st.mma else 'rows'} of streamed {st.loader.out.name}")
                self.issue_stream(body, st, rows)
        for ld in staged:
            self.store_staged(body, ld, prefetched[ld.index])
        if piped_staged:  # this iteration's registers are stored: reuse them for iteration it + D
            with body.block(f"if it + {D} < {self.FR}:"):
                for ld in piped_staged:
                    self.issue_staged(body, ld, it=f"(it + {D})")
        for ch in in_loop:
            self.emit_chain_loop(body, ch)
        for st in piped_streams:
            i = st.loader.index
            units = [u for u, *_ in self.stream_units(st, self.stream_rows(st))]
            if D == 1:
                body("; ".join(f"b{i}_{u} = n{i}_{u}" for u in units))
            else:  # consumed: the same registers take the rows of iteration it + D
                with body.block(f"if it + {D} < {self.FR}:"):
                    body.comment(f"prefetch streamed {st.loader.out.name} rows for iteration it + {D}")
                    self.issue_stream(body, st, self.stream_rows(st), it=f"(it + {D})")
        # wrap-around: the next iteration's first stages must not race this one's last ones
        if self.FR > 1 and any(self.sync.conflicts(r, w, o) for r, w, o in self.loop_head):
            body("cuda.syncthreads()")
            self.sync.clear()
        self.in_loop = False

        # --- after the loop (loop and post buffers share memory: one barrier first)
        tail = Src(1)
        if asyncs:
            tail("cp_wait0()")   # no copy may land in buffers the work after the loop reuses
        if self.sync.dirty:
            tail("cuda.syncthreads()")
            self.sync.clear()
        self.saver_bases(tail)
        if self.split:
            self.split_begin(scratch)
        for act in self.post_actions:
            act(tail)
        if self.split:
            self.split_carry(tail)
            self.split_arrive(tail)
            self.split_combine(tail, scratch)
        for ch in post:
            self.elementwise_chain(tail, ch, None, list(ch.ops[1:]))
        self.emit_savers(tail)

        # --- prologue, part 2: accumulators and loop-invariant tiles
        pro2 = Src(1)
        for line in self._red_inits:
            pro2(line)
        for t, n in self._acc_inits:
            if n:
                for i in range(n):
                    pro2(f"acc{t.guid}_{i} = f32(0.0)")
            else:
                pro2.comment(f"zero {t.name} (accumulated in shared memory, element-owned)")
                self.per_element(pro2, t.numel(), lambda s, e, i, t=t: s(f"{self.ref(t, e)} = f32(0.0)"),
                                 unroll=False)
        for k in range(S - 1 if asyncs else 0):  # the ring's first S - 1 stages before the loop
            for ld in asyncs if k < self.FR else ():
                self.issue_async(pro2, ld, str(k), str(k))
            pro2("cp_commit()")
        ring = self.ring_names(piped_staged, piped_streams)
        for k in range(D):  # the ring's register sets hold iterations 0 .. D-1 before the loop
            first = Src(1)
            for ld in piped_staged:
                self.issue_staged(first, ld, it=str(k))
            for st in piped_streams:
                first.comment(f"streamed {st.loader.out.name}: rows of iteration {k}"
                              + (" (later ones arrive one iteration ahead)" if D == 1 else f", register set {k}"))
                self.issue_stream(first, st, self.stream_rows(st), it=str(k))
                if D == 1:
                    i = st.loader.index
                    first("; ".join(f"n{i}_{u} = b{i}_{u}" for u, *_ in self.stream_units(st, self.stream_rows(st))))
            pro2.lines.extend(self.in_set(first.lines, ring, k, None))
        for st in p.streams:
            if st.mma and st.frag_owner:
                self.mma_zero_rows(pro2, st)
        inv = [ld for ld in p.loaders if ld.invariant]
        loop_tracker, self.sync = self.sync, _Sync()
        for ld in inv:
            self.store_staged(pro2, ld, self.issue_staged(pro2, ld))
        self.sync = loop_tracker
        if inv or any(n == 0 for _, n in self._acc_inits):
            pro2("cuda.syncthreads()")  # the loop reads what the prologue wrote
        for act in self.pre_loop:
            act(pro2)

        scope = self.shift_scope
        if scope == "auto":
            scope = "all" if any(self.is_staged_mma(op) for op in bg.ops) else "none"
        if scope != "none":
            for part in (pro, pro2, tail) + ((body,) if scope == "all" else ()):
                part.lines = shift_pow2("\n".join(part.lines)).split("\n")
        out = Src(0)
        args = [f"in{i}" for i in range(len(p.loaders))] + [f"out{j}" for j in range(len(bg.output_ops))] + ["scr"]
        args += ["cnt"] if self.split else []
        area = self.area_floats(scratch)
        regs = f", max_registers={self.options.max_registers}" if self.options.max_registers else ""
        out(f"@cuda.jit(cache=True, fastmath=True{regs}, **_bounds({self.T}))")
        with out.block(f"def {self.name}({', '.join(args)}):"):
            out.extend(self._doc())
            if dyn_bytes:   # one dynamic area, sized at launch: the floats, then the ints
                out("sm = cuda.shared.array(0, dtype=F32)")
                if p.int_words:
                    out(f"smi = cuda.shared.array(0, dtype=I32)[{pool}:{pool + p.int_words}]")
            else:
                if pool:
                    out(f"sm = cuda.shared.array({pool}, dtype=f32)")
                if p.int_words:
                    out(f"smi = cuda.shared.array({p.int_words}, dtype=i32)")
            out("tid = cuda.threadIdx.x")
            self.block_indices(out)
            if area:
                out(f"sbase = {mul(self.block_linear(), area)}")
            out.extend(pro)
            out.extend(pro2)
            if D > 1:
                # unrolled D times, iteration it0 + k in register set k: a load's registers are next
                # read D iterations later, never moved (a move would wait for the load to land)
                out(f"for it0 in range(0, {self.FR}, {D}):" if self.FR > D else "it0 = 0")
                extra = 1 if self.FR > D else 0
                for k in range(D):
                    guard = self.FR % D and k >= self.FR % D
                    if guard:
                        out("    " * extra + f"if it0 + {k} < {self.FR}:")
                    lines = body.lines if extra else [ln[4:] for ln in body.lines]
                    out.lines.extend(self.in_set(lines, ring, k, "it0" if k == 0 else f"(it0 + {k})",
                                                 indent=1 if guard else 0))
            else:
                if self.FR > 1:
                    out(f"for it in range({self.FR}):")
                else:
                    out("it = 0")
                out.extend(body)
            out.extend(tail)
        text = out.text()
        info = KernelInfo(
            name=self.name, grid=self.launch_grid(), threads=self.T, pool_floats=pool,
            scratch_floats_per_block=area, dyn_smem_bytes=dyn_bytes, input_views=[ld.view for ld in p.loaders],
            output_dtypes=[sv.inputs[0].dtype.name for sv in bg.output_ops],
            streamed_inputs=[st.loader.index for st in p.streams], notes=self.notes,
            counters=self.tiles if self.split else 0)
        return text, info

    def _doc(self) -> Src:
        from ..ir.printing import format_block_graph

        d = Src(1)
        d('"""Generated by mirage_lab.codegen for the block graph:')
        d("")
        for line in format_block_graph(self.bg).splitlines():
            d(line.replace("\\", "\\\\"))
        tg = self.p.tg
        d("")
        d("Fusion chains (thread graph): " + "; ".join(c.describe() for c in tg.chains))
        if self.p.streams:
            d("Streamed (register) matmul operands: " + ", ".join(
                f"in{s.loader.index} ({'split-K, reduced after the loop' if s.persistent else 'reduced per iteration'}"
                f"{', tensor cores: mma.m16n8k16' if s.mma else ''})"
                for s in self.p.streams))
        d('"""')
        return d


def emit_block_kernel(bg: "BlockGraph", name: str,
                      options: CodegenOptions = DEFAULT_OPTIONS) -> tuple[str, KernelInfo]:
    """The source of one ``@cuda.jit`` kernel for ``bg`` and its launch information.

    >>> import mirage_lab as mi
    >>> from mirage_lab.examples import rms_norm_linear_fused
    >>> g = rms_norm_linear_fused(4, 256, 256, grid=8, forloop_range=4)
    >>> src, info = emit_block_kernel(g.customized_ops[0].block_graph, "k0")
    >>> info.grid, info.threads
    ((8, 1, 1), 128)
    """
    try:
        return _Emitter(bg, name, options).emit()
    except _PaddingOverflow:
        return _Emitter(bg, name, options, pad=False).emit()


class _PaddingOverflow(Exception):
    """Internal: padding the tensor-core tiles' rows would move a buffer to global scratch."""
