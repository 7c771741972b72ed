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

    >>> src, info = emit_block_kernel(bg, "k0")      # doctest: +SKIP
"""
from __future__ import annotations

import re
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from ..errors import CodegenError
from ..ir.thread_graph import FusionChain
from .plan import DEFAULT_OPTIONS, MAX_REG_ELEMS, Buf, CodegenOptions, KernelPlan, Loader, Stream, staged_mma_fits
from .source import Src, add, dot, mul, prod, row_strides, unravel

if TYPE_CHECKING:  # pragma: no cover
    from ..ir.block_graph import BlockGraph, STensor, TBOp

AXIS_VARS = ("bx", "by", "bz")
PREFETCH_WORDS = 64  # staged-loader words a thread may hold in registers at the loop top
MAX_MMA_ACC = 64     # float32 sums a thread may keep across the loop for a staged tensor-core matmul

_UNARY = {
    "exp": "v = fexp(v)",
    "silu": "v = v / (f32(1.0) + fexp(-v))",
    "gelu": "v = f32(0.5) * v * (f32(1.0) + ferf(v * f32(0.7071067811865476)))",
    "relu": "v = max(v, f32(0.0))",
    "sqrt": "v = fsqrt(v)",
    "square": "v = v * v",
}
_BINARY = {"add": "{a} + {b}", "sub": "{a} - {b}", "mul": "{a} * {b}", "div": "{a} / {b}",
           "pow": "f32(fpow({a}, {b}))"}


@dataclass
class KernelInfo:
    """What the host needs to launch a generated kernel."""

    name: str
    grid: tuple[int, int, int]
    threads: int
    pool_floats: int
    scratch_floats_per_block: int
    input_views: list[str]           # "int32" | "int16" per input
    output_dtypes: list[str]
    streamed_inputs: list[int] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

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


class _Emitter:
    def __init__(self, bg: "BlockGraph", name: str, options: CodegenOptions = DEFAULT_OPTIONS) -> None:
        self.options = options
        self.p = KernelPlan(bg, name, options)
        self.bg = bg
        self.name = name
        self.T = self.p.T
        self.FR = bg.forloop_range
        self.sync = _Sync()
        self.loop_head: list[tuple[set[str], set[str], set[str]]] = []
        self._head_open = True
        self.in_loop = False
        self.materialized: set[int] = set()      # tensors with a buffer or register values
        self.sunk_savers: set[int] = set()       # saver ops already written directly
        self.reg_acc: dict[int, str] = {}        # accum tensor guid -> register name prefix
        self.post_actions: list[Callable[[Src], None]] = []
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

    def needs_buf(self, t: "STensor") -> bool:
        return any(c.op_type != "output" for c in self.consumers(t))

    def savers(self, t: "STensor") -> list["TBOp"]:
        return [c for c in self.consumers(t) if c.op_type == "output"]

    def tbuf(self, t: "STensor", region: str) -> Buf:
        return self.p.buf(f"t{t.guid}", t.numel(), region)

    def bufname(self, t: "STensor") -> str:
        return f"t{t.guid}"

    def ref(self, t: "STensor", idx: str) -> str:
        return f"«t{t.guid}»[{idx}]"

    @staticmethod
    def ref_buf(b: Buf, idx: str) -> str:
        return f"«{b.name}»[{idx}]"

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

    # ------------------------------------------------------------------ values
    def read_bcast(self, x: "STensor", od: tuple[int, ...], e: str) -> str:
        if tuple(x.dims) == tuple(od):
            return self.ref(x, e)
        t = unravel(e, od)
        idx = [t[k] if x.dims[k] == od[k] else "0" for k in range(len(od))]
        return self.ref(x, dot(idx, row_strides(x.dims)))

    def apply(self, s: Src, op: "TBOp") -> None:
        t = op.op_type
        if t in _UNARY:
            s(_UNARY[t])
        elif t == "clamp":
            s(f"v = min(max(v, f32({op.attrs['lo']!r})), f32({op.attrs['hi']!r}))")
        elif t == "mul_scalar":
            s(f"v = v * f32({op.attrs['scalar']!r})")
        else:  # pragma: no cover - the thread graph only fuses the ops above
            raise CodegenError(f"cannot apply {t} as an epilogue")

    def lead_value(self, s: Src, op: "TBOp", e: str, reads: set[str]) -> None:
        """Emit code leaving the value of ``op``'s output at flat index ``e`` in ``v``."""
        t = op.op_type
        od = op.outputs[0].dims
        ins = op.inputs
        for x in ins:
            reads.add(self.bufname(x))
        if t in _UNARY or t in ("clamp", "mul_scalar"):
            s(f"v = {self.ref(ins[0], e)}")
            self.apply(s, op)
        elif t in _BINARY:
            a = self.read_bcast(ins[0], od, e)
            b = self.read_bcast(ins[1], od, e)
            s(f"v = {_BINARY[t].format(a=a, b=b)}")
        elif t == "forloop_accum":  # a plain accumulator leading its own chain: accumulate its input
            s(f"v = {self.ref(ins[0], e)}")
        elif t == "reduction":
            d = op.attrs["dim"]
            xs = row_strides(ins[0].dims)
            base = dot(unravel(e, od), xs)
            s("v = f32(0.0)")
            with s.block(f"for j in range({ins[0].dims[d]}):"):
                s(f"v += {self.ref(ins[0], add(base, mul('j', xs[d])))}")
        elif t == "rms_norm":
            w = od[-1]
            rs = self.p.buf(f"rs{op.guid}", op.outputs[0].numel() // w, "loop" if self.in_loop else "post")
            reads.add(rs.name)
            s(f"v = {self.ref(ins[0], e)} * {self.ref_buf(rs, f'{e} // {w}' if w > 1 else e)}")
        elif t == "concat":
            d = op.attrs["dim"]
            a, b = ins
            tix = unravel(e, od)
            ia = dot(tix, row_strides(a.dims))
            tb = list(tix)
            tb[d] = f"({tix[d]} - {a.dims[d]})"
            ib = dot(tb, row_strides(b.dims))
            s(f"v = {self.ref(a, ia)} if {tix[d]} < {a.dims[d]} else {self.ref(b, ib)}")
        else:
            raise CodegenError(f"block op {t!r} cannot lead an element-wise stage")

    def rms_prestage(self, s: Src, op: "TBOp") -> None:
        """rms_norm needs each row's 1/rms before its element-wise stage: one thread per row."""
        x = op.inputs[0]
        w = x.dims[-1]
        rows = x.numel() // w
        rs = self.p.buf(f"rs{op.guid}", rows, "loop" if self.in_loop else "post")
        s.comment(f"rms_norm {x.name}: 1/rms of each of {rows} rows")
        self.stage(s, reads={self.bufname(x)}, writes={rs.name})

        def body(s: Src, r: str, i: int | None) -> None:
            s("q = f32(0.0)")
            with s.block(f"for j in range({w}):"):
                s(f"x = {self.ref(x, add(mul(r, w), 'j'))}")
                s("q += x * x")
            s(f"{self.ref_buf(rs, r)} = f32(1.0) / fsqrt(q * f32({1.0 / w!r}))")

        self.per_element(s, rows, body, unroll=False, var="r")

    # ------------------------------------------------------------------ sinks
    def sink(self, s: Src, t: "STensor", e: str, v: str = "v") -> None:
        """Store value ``v`` of tensor ``t`` at flat tile index ``e``: buffer and/or outputs."""
        if self.needs_buf(t):
            s(f"{self.ref(t, e)} = {v}")
        for sv in self.savers(t):
            j = self.bg.output_ops.index(sv)
            s(f"out{j}[{add(f'ob{j}', self.saver_index(sv, e))}] = {self.store_conv(sv, v)}")
            self.sunk_savers.add(sv.guid)

    def sink_sets(self, t: "STensor", region: str) -> set[str]:
        if self.needs_buf(t):
            self.tbuf(t, region)
            return {self.bufname(t)}
        return set()

    def saver_index(self, sv: "TBOp", e: str) -> str:
        tile = sv.inputs[0].dims
        return dot(unravel(e, tile), row_strides(sv.attrs["out_dims"]))

    @staticmethod
    def store_conv(sv: "TBOp", v: str) -> str:
        dt = sv.inputs[0].dtype.name
        if dt == "float16":
            return f"f2h({v})"
        if dt == "bfloat16":
            return f"f2bf({v})"
        return v

    # ------------------------------------------------------------------ loaders
    def loader_unit(self, ld: Loader) -> int:
        return ld.epw if ld.view == "int32" else 1

    def loader_base(self, s: Src, ld: Loader) -> None:
        """Block part of the tile's first word, and the per-iteration word step."""
        strides = row_strides(ld.dims)
        unit = self.loader_unit(ld)
        grid = self.bg.grid_dim
        terms = []
        self._it_step = getattr(self, "_it_step", {})
        step = 0
        for k in range(len(ld.dims)):
            axis = next((a for a in range(3) if grid[a] > 1 and ld.imap[a] == k), None)
            scale = ld.tile[k] * strides[k] // unit
            if axis is not None:
                per_block = scale * (self.FR if ld.fmap == k else 1)
                terms.append(mul(AXIS_VARS[axis], per_block))
            if ld.fmap == k:
                step = scale
        self._it_step[ld.index] = step
        s(f"lb{ld.index} = {add(*terms)}")

    def loader_word(self, ld: Loader, it: str = "it") -> str:
        """Expression of the first word of the tile of iteration ``it``."""
        step = self._it_step[ld.index]
        if ld.fmap >= 0 and not ld.invariant and self.FR > 1:
            return add(f"lb{ld.index}", mul(it, step))
        return f"lb{ld.index}"

    def load_expr(self, ld: Loader, word: str) -> str:
        n = ld.vw // self.loader_unit(ld)
        if n == 4:
            return f"ldg4(in{ld.index}, {word})"
        if n == 2:
            return f"ldg2(in{ld.index}, {word})"
        return f"in{ld.index}[{word}]"

    def decode(self, ld: Loader, reg: str) -> list[str]:
        """Float32 expressions of the ``vw`` elements held in register(s) ``reg``."""
        nw = ld.vw // self.loader_unit(ld)
        words = [f"{reg}[{q}]" for q in range(nw)] if nw > 1 else [reg]
        out = []
        for w in words:
            if ld.dtype == "float32":
                out.append(f"u2f({w})")
            elif ld.view == "int16":
                out.append(f"h2f({w})" if ld.dtype == "float16" else f"bf2f({w})")
            elif ld.dtype == "float16":
                out += [f"h2f({w})", f"h2f({w} >> 16)"]
            else:
                out += [f"bf2f({w})", f"bf2f({w} >> 16)"]
        return out

    def staged_vectors(self, ld: Loader) -> tuple[int, int]:
        nv = prod(ld.tile) // ld.vw
        return nv, -(-nv // self.T)

    def staged_word(self, ld: Loader, v: str, it: str = "it") -> str:
        unit = self.loader_unit(ld)
        strides = row_strides(ld.dims)
        nvr = ld.tile[-1] // ld.vw
        row = v if nvr == 1 else f"{v} // {nvr}"
        col = "0" if nvr == 1 else f"{v} % {nvr}"
        tix = unravel(row, ld.tile[:-1]) if len(ld.tile) > 1 else []
        rowpart = dot(tix, [st // unit for st in strides[:-1]])
        return add(self.loader_word(ld, it), rowpart, mul(col, ld.vw // unit))

    def staged_prefetchable(self, ld: Loader) -> bool:
        nv, nj = self.staged_vectors(ld)
        return nj * max(1, ld.vw // self.loader_unit(ld)) <= PREFETCH_WORDS

    def staged_piped(self, ld: Loader) -> bool:
        """A staged tile loaded into registers an iteration (or ``depth`` iterations) ahead."""
        if self.FR <= 1 or ld.invariant or ld.mode != "staged" or not self.staged_prefetchable(ld):
            return False
        _, nj = self.staged_vectors(ld)
        return self.depth == 1 or nj * max(1, ld.vw // self.loader_unit(ld)) * self.depth <= PREFETCH_WORDS

    def issue_staged(self, s: Src, ld: Loader, it: str = "it", prefix: str = "r") -> bool:
        """Emit the loads of a staged tile into registers; False if it is loaded in a loop instead."""
        nv, nj = self.staged_vectors(ld)
        if not self.staged_prefetchable(ld):
            return False
        nbytes = (ld.vw // self.loader_unit(ld)) * (4 if ld.view == "int32" else 2)
        s.comment(f"load {ld.out.name} {list(ld.tile)} of in{ld.index}, iteration {it} ({nbytes}-byte loads)")
        for j in range(nj):
            v = f"tid + {self.T * j}" if j else "tid"
            if (j + 1) * self.T > nv:
                v = f"min({v}, {nv - 1})"
            s(f"vi{j} = {v}")
            s(f"{prefix}{ld.index}_{j} = {self.load_expr(ld, self.staged_word(ld, f'vi{j}', it))}")
        return True

    def store_staged(self, s: Src, ld: Loader, prefetched: bool) -> None:
        nv, nj = self.staged_vectors(ld)
        direct = [st for st in self.p.streams if st.mma and st.frag_owner and st.frag_direct is ld]
        fused = self.fused_acc.get(ld.index, []) if prefetched else []
        # a tile read only by tensor-core matmuls (its words are the A fragments) and by register-fused
        # accumulators needs no float32 copy in shared memory
        f32_copy = not all(self.frag_direct_reader(c, ld) or c in fused for c in self.consumers(ld.out))
        buf = self.tbuf(ld.out, "persistent" if ld.invariant else "loop") if f32_copy else None
        self.stage(s, writes=({buf.name} if buf else set()) | {f"frag{st.frag_offset}" for st in direct})

        def store(s: Src, v: str, reg: str, j: int | None = None) -> None:
            xs = self.decode(ld, reg)
            if fused and j is not None:  # sum / mean / rms of each row, straight from the registers
                names = [f"xh{ld.index}_{j}_{q}" for q in range(len(xs))]
                s("; ".join(f"{nm} = {x}" for nm, x in zip(names, xs)))
                xs = names
                for op in fused:
                    terms = [f"{x} * {x}" if op.attrs["acc"] == "rms" else x for x in xs]
                    s(f"qf{op.guid}_{j} += {' + '.join(terms)}")
            if buf is not None:
                n = 4 if len(xs) % 4 == 0 else 2 if len(xs) % 2 == 0 else 1
                base = mul(v, ld.vw)
                for h in range(0, len(xs), n):
                    if n == 1:
                        s(f"{self.ref_buf(buf, add(base, str(h)))} = {xs[h]}")
                    else:  # one 16- or 8-byte shared store (buffers start on 16 bytes; vw is a multiple of n)
                        s(f"sts{n}(«&{buf.name}», {add(base, str(h))}, {', '.join(xs[h:h + n])})")
            for st in direct:
                self.direct_fragments(s, st, ld, v, reg)

        if prefetched:
            for j in range(nj):
                v = f"tid + {self.T * j}" if j else "tid"
                if (j + 1) * self.T > nv:
                    with s.block(f"if {v} < {nv}:"):
                        store(s, f"({v})" if j else "tid", f"r{ld.index}_{j}", j)
                else:
                    store(s, f"({v})" if j else "tid", f"r{ld.index}_{j}", j)
        else:
            s.comment(f"load {ld.out.name} {list(ld.tile)} of in{ld.index}")

            def body(s: Src, v: str, i: int | None) -> None:
                s(f"w = {self.load_expr(ld, self.staged_word(ld, v))}")
                store(s, v, "w")

            self.per_element(s, nv, body, unroll=False, var="vi")

    # ------------------------------------------------------------------ streamed matmul
    def stream_setup(self, s: Src, st: Stream) -> None:
        i = st.loader.index
        unit = self.loader_unit(st.loader)
        rsw = self._rsw[i] = row_strides(st.loader.dims)[-2] // unit
        if st.mma:
            self.mma_setup(s, st, rsw, unit)
            return
        s.comment(f"{st.op.outputs[0].name} = matmul: B={st.loader.out.name} streamed into registers; "
                  f"{st.G} k-groups x {st.NC} column chunks of {st.vw}, {st.KR} rows per thread")
        s(f"sg{i} = tid // {st.NC}" if st.NC > 1 else f"sg{i} = tid")
        s(f"sc{i} = tid % {st.NC}" if st.NC > 1 else f"sc{i} = 0")
        s(f"sk{i} = min(sg{i}, {st.G - 1})")
        s(f"sw{i} = {add(mul(f'sk{i}', rsw), mul(f'sc{i}', st.vw // unit))}")
        self.zero_partials(s, st)

    def zero_partials(self, s: Src, st: Stream) -> None:
        # a local array indexed only by constants: LLVM keeps it in registers, and numba's SSA
        # pass sees element stores rather than thousands of re-definitions of scalars
        i = st.loader.index
        s(f"pa{i} = cuda.local.array({self.partials(st)}, f32)")
        if st.persistent:
            self.zero_array(s, f"pa{i}", self.partials(st))

    @staticmethod
    def partials(st: Stream) -> int:
        """fp32 partial sums per thread: M x vw (FMA), or 4 accumulators of each of vw mma tiles."""
        return 4 * st.vw if st.mma else st.M * st.vw

    def ring_names(self, staged: list[Loader], streams: list[Stream]) -> "re.Pattern | None":
        """The registers of the prefetch ring (one set per unrolled iteration), as one pattern."""
        if self.depth == 1:
            return None
        names = [f"r{ld.index}_{j}" for ld in staged for j in range(self.staged_vectors(ld)[1])]
        names += [f"b{st.loader.index}_{u}" for st in streams for u, _ in self.stream_units(st, self.stream_rows(st))]
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

    @staticmethod
    def zero_array(s: Src, name: str, n: int) -> None:
        for z in range(0, n, 8):
            s("; ".join(f"{name}[{q}] = f32(0.0)" for q in range(z, min(n, z + 8))))

    @staticmethod
    def stream_units(st: Stream, rows: range) -> list[tuple[str, int]]:
        """(register suffix, row offset from the thread's first row) of each load of ``rows``.

        FMA layout: one row per unit, G rows apart. mma layout: ``rows`` are k-steps; four
        rows (4t..4t+3 of the step) per step, steps 16*G rows apart.
        """
        if st.mma:
            return [(f"{j}_{q}", j * 16 * st.G + q) for j in rows for q in range(4)]
        return [(str(r), r * st.G) for r in rows]

    def issue_stream(self, s: Src, st: Stream, rows: range, prefix: str = "b", it: str = "it") -> None:
        i = st.loader.index
        base = add(self.loader_word(st.loader, it), f"sw{i}")
        for u, off in self.stream_units(st, rows):
            s(f"{prefix}{i}_{u} = {self.load_expr(st.loader, add(base, str(off * self._rsw[i])))}")

    def stream_pipelined(self, st: Stream) -> bool:
        """Load iteration it+1's rows during iteration it (streams in order, within the word budget)."""
        return st.op.guid in self._piped

    def stream_fma(self, s: Src, st: Stream) -> None:
        if st.mma:
            self.stream_mma(s, st)
            return
        i = st.loader.index
        a = st.op.inputs[0]
        self.stage(s, reads={self.bufname(a)})
        s.comment(f"{st.op.outputs[0].name} partial sums: rows sk + {st.G}*r of B, all {st.M} rows of {a.name}")
        if not st.persistent:
            self.zero_array(s, f"pa{i}", st.M * st.vw)
        phases = [self.stream_rows(st)] if self.stream_pipelined(st) else st.phases
        for pi, rows in enumerate(phases):
            if pi + 1 < len(phases):
                self.issue_stream(s, st, phases[pi + 1])
            for r in rows:  # one row at a time: only its M values of A and vw of B are live
                ws = self.decode(st.loader, f"b{i}_{r}")
                s("; ".join(f"w{r}_{n} = {x}" for n, x in enumerate(ws)))
                s("; ".join(f"a{r}_{m} = {self.ref(a, add(f'sk{i}', str(m * st.K + r * st.G)))}"
                            for m in range(st.M)))
                for m in range(st.M):
                    s("; ".join(f"pa{i}[{m * st.vw + n}] += a{r}_{m} * w{r}_{n}" for n in range(st.vw)))

    @staticmethod
    def stream_rows(st: Stream) -> range:
        """All load rows (FMA) or k-steps (mma) of one iteration."""
        return range(st.KS if st.mma else st.KR)

    # ------------------------------------------------------------------ tensor-core streamed matmul
    def mma_setup(self, s: Src, st: Stream, rsw: int, unit: int) -> None:
        """Lane roles of the mma layout (see :meth:`.plan.KernelPlan._mma_stream`)."""
        i = st.loader.index
        cols = 8 * st.vw
        s.comment(f"{st.op.outputs[0].name} = matmul on tensor cores (mma.m16n8k16, {st.M} of 16 rows used): "
                  f"B={st.loader.out.name} streamed into registers; {st.NCW} warp(s) x {cols} columns, "
                  f"{st.G} warp(s) along K, {st.KS} k-steps of 16 rows per warp and iteration")
        s(f"ml{i} = tid % 32")
        s(f"mg{i} = ml{i} // 4")
        s(f"mt{i} = ml{i} % 4")
        if st.NCW > 1:
            s(f"mcw{i} = (tid // 32) % {st.NCW}")
            s(f"mkw{i} = tid // {32 * st.NCW}")
        else:
            s(f"mcw{i} = 0")
            s(f"mkw{i} = tid // 32")
        # first word of the lane's rows 16*mkw + 4*mt (+q) and columns mcw*8*vw + mg*vw
        s(f"sw{i} = {add(mul(f'mkw{i}', 16 * rsw), mul(f'mt{i}', 4 * rsw), mul(f'mcw{i}', cols // unit), mul(f'mg{i}', st.vw // unit))}")
        # the lane's A fragments: word (step*AR + r)*32 + ((lane + 8*step + 4*(r // (AR/2))) & 31)
        s(f"mfa{i} = {add(str(st.frag_offset), mul(f'mkw{i}', st.AR * 32))}")
        self.zero_partials(s, st)

    @staticmethod
    def frag_index(st: Stream, m: str, p: str) -> str:
        """Word of ``smi`` holding pair ``p`` (A[m, 2p], A[m, 2p+1]) of row ``m`` in mma A-fragment order.

        k-step p // 8, lane (m % 8) * 4 + (p % 8) // 2, register m // 8 + (AR/2) * (p % 2), each
        32-word row of lanes rotated by 4*(step % 8) + (step // 8) % 2 + 16*(p % 2): a warp that
        writes 32 consecutive pairs, or a loader's 2 or 4 words of 32 consecutive vectors, and a
        warp that reads one register of one step each touch 32 different banks.
        """
        AR = st.AR
        ks, sel = f"({p}) // 8", f"({p}) % 2"
        reg = add(f"({m}) // 8" if AR == 4 else "0", mul(sel, AR // 2))
        rot = f"({ks}) % 8 * 4 + ({ks}) // 8 % 2 + {sel} * 16"
        lane = f"({m}) % 8 * 4 + ({p}) % 8 // 2"
        return add(str(st.frag_offset), f"(({ks}) * {AR} + {reg}) * 32", f"(({lane} + {rot}) & 31)")

    def direct_fragments(self, s: Src, st: Stream, ld: Loader, v: str, reg: str) -> None:
        """Vector ``v`` of A's loader tile, still in registers: its words are pairs of one row -> ``smi``."""
        CR = ld.tile[-1] // ld.vw            # vectors per row
        nw = ld.vw // 2
        self._tmp += 1
        k = self._tmp
        s(f"dm{k} = {v} // {CR}" if CR > 1 else f"dm{k} = {v}")
        s(f"dp{k} = {mul(f'({v}) % {CR}', nw)}" if CR > 1 else f"dp{k} = 0")
        for q in range(nw):
            word = f"{reg}[{q}]" if nw > 1 else reg
            s(f"smi[{self.frag_index(st, f'dm{k}', add(f'dp{k}', str(q)))}] = {word}")

    def mma_zero_rows(self, s: Src, st: Stream) -> None:
        """Rows M..15 (M..7 when M <= 8) of the A fragments are zero: written once, before the loop."""
        MR = 16 if st.AR == 4 else 8
        if st.M >= MR:
            return
        K2 = st.K // 2
        s.comment(f"mma A fragments: rows {st.M}..{MR - 1} of {st.op.inputs[0].name} are zero")

        def body(s: Src, e: str, u: int | None) -> None:
            s(f"smi[{self.frag_index(st, add(f'{e} // {K2}', str(st.M)), f'{e} % {K2}')}] = 0")

        self.per_element(s, (MR - st.M) * K2, body, unroll=False, var="z")

    def mma_fragments(self, s: Src, st: Stream) -> None:
        """A (M x K, any buffer) -> packed 16-bit pairs in mma A-fragment order in ``smi`` (rows < M)."""
        a = st.op.inputs[0]
        K2 = st.K // 2
        cv = "f2h" if st.loader.dtype == "float16" else "f2bf"
        s.comment(f"{a.name} -> mma A fragments ({st.loader.dtype} pairs)")
        self.stage(s, reads={self.bufname(a)}, writes={f"frag{st.frag_offset}"})

        def body(s: Src, e: str, u: int | None) -> None:
            x = "" if u is None else f"{u}"
            s(f"fm{x} = {e} // {K2}" if st.M > 1 else f"fm{x} = 0")
            s(f"fp{x} = {e} % {K2}" if st.M > 1 else f"fp{x} = {e}")
            val = (f"pk16({cv}({self.ref(a, add(mul(f'fm{x}', st.K), mul(f'fp{x}', 2)))}), "
                   f"{cv}({self.ref(a, add(mul(f'fm{x}', st.K), mul(f'fp{x}', 2), '1'))}))")
            s(f"smi[{self.frag_index(st, f'fm{x}', f'fp{x}')}] = {val}")

        self.per_element(s, st.M * K2, body)

    def stream_mma(self, s: Src, st: Stream) -> None:
        i = st.loader.index
        if st.frag_owner and st.frag_direct is None:  # shared by streams with the same A (gated MLP)
            self.mma_fragments(s, st)
        self.stage(s, reads={f"frag{st.frag_offset}"})
        s.comment(f"{st.op.outputs[0].name} partial sums on tensor cores: {st.KS} k-steps x {st.vw} mma.m16n8k16")
        if not st.persistent:
            self.zero_array(s, f"pa{i}", self.partials(st))
        mma = "mma_f16" if st.loader.dtype == "float16" else "mma_bf16"
        nw = st.vw // 2
        phases = [self.stream_rows(st)] if self.stream_pipelined(st) else st.phases
        half = st.AR // 2
        for pi, steps in enumerate(phases):
            if pi + 1 < len(phases):
                self.issue_stream(s, st, phases[pi + 1])
            for j in steps:
                fa = [f"fa{i}_{j}_{r}" for r in range(st.AR)]
                ks = add(f"mkw{i}", str(st.G * j))
                s(f"mr{i}_{j} = ml{i} + ({ks}) % 8 * 4 + ({ks}) // 8 % 2")
                s("; ".join(
                    f"{fa[r]} = smi[mfa{i} + {(st.G * j * st.AR + r) * 32} + ((mr{i}_{j} + {16 * (r // half)}) & 31)]"
                    for r in range(st.AR)))
                regs = fa if st.AR == 4 else [fa[0], "0", fa[1], "0"]
                for c in range(st.vw):
                    w = (lambda q: f"b{i}_{j}_{q}[{c // 2}]") if nw > 1 else (lambda q: f"b{i}_{j}_{q}")
                    pk = "pkl" if c % 2 == 0 else "pkh"
                    acc = [f"pa{i}[{4 * c + r}]" for r in range(4)]
                    s(f"{', '.join(acc)} = {mma}({', '.join(regs)}, {pk}({w(0)}, {w(1)}), {pk}({w(2)}, {w(3)}), "
                      f"{', '.join(acc)})")

    def mma_write_partials(self, s: Src, st: Stream, rows: range, red: Buf) -> None:
        """Each warp's accumulators -> ``red[kgroup, m - rows.start, n]`` for the rows in ``rows``.

        Lane (g, t), tile c: accumulators 0, 1 are row g, columns (2t, 2t+1)*vw + c of the warp's
        8*vw; 2, 3 are row g + 8.
        """
        i = st.loader.index
        MC, N, vw = len(rows), st.N, st.vw
        m0, mend = rows.start, rows.stop
        for h in ((0, 1) if st.AR == 4 else (0,)):
            lo, hi = 8 * h, 8 * h + 8          # rows this half of the accumulators holds
            if hi <= m0 or lo >= mend:
                continue
            row = add(f"mg{i}", str(lo - m0))
            with s.block(f"if {m0 - lo} <= mg{i} < {mend - lo}:") if (lo < m0 or hi > mend) else nullcontext():
                for c in range(vw):
                    for u in range(2):
                        n = add(mul(f"mcw{i}", 8 * vw), mul(f"mt{i}", 2 * vw), str(u * vw + c))
                        idx = add(mul(f"mkw{i}", MC * N), mul(f"({row})" if row != f"mg{i}" else row, N), n)
                        s(f"{self.ref_buf(red, idx)} = pa{i}[{4 * c + 2 * h + u}]")

    def stream_reduce(self, s: Src, st: Stream, rows: range, region: str,
                      then: Callable[[Src, str, int | None], None], out_reads: set[str], out_writes: set[str]) -> None:
        """Partial sums of rows ``rows`` -> a reduction buffer -> ``then(src, e)`` with the sum in ``v``."""
        i = st.loader.index
        MC = len(rows)
        N = st.N
        red = self.p.buf(f"red{i}_{region}", st.G * MC * N, region)
        self.stage(s, writes={red.name})
        if st.mma:
            self.mma_write_partials(s, st, rows, red)
        else:
            with s.block(f"if sg{i} < {st.G}:"):
                for mm, m in enumerate(rows):
                    for n in range(st.vw):
                        idx = add(mul(f"sg{i}", MC * N), mul(f"sc{i}", st.vw), str(mm * N + n))
                        s(f"{self.ref_buf(red, idx)} = pa{i}[{m * st.vw + n}]")
        self.stage(s, reads={red.name} | out_reads, writes=out_writes)

        def body(s: Src, e: str, i: int | None) -> None:
            s("v = f32(0.0)")
            if st.G <= 8:
                for g in range(st.G):
                    s(f"v += {self.ref_buf(red, add(e, str(g * MC * N)))}")
            else:
                with s.block(f"for g in range({st.G}):"):
                    s(f"v += {self.ref_buf(red, add(e, mul('g', MC * N)))}")
            then(s, e if rows.start == 0 else add(e, str(rows.start * N)), i)

        self.per_element(s, MC * N, body)

    # ------------------------------------------------------------------ chains
    def emit_chain_loop(self, s: Src, ch: FusionChain) -> None:
        """An in-loop chain: its per-iteration work."""
        lead = ch.lead
        if lead.op_type == "forloop_accum" and lead.attrs["acc"] is not None:
            self.reduce_accum_loop(s, ch)
            return
        tail_acc = ch.ops[-1] if (ch.ops[-1].op_type == "forloop_accum" and len(ch.ops) > 1) or \
            (lead.op_type == "forloop_accum") else None
        epilogue = [op for op in ch.ops[1:] if op is not tail_acc]
        st = self.p.stream_of.get(lead.guid)
        if st is not None:
            self.stream_fma(s, st)
            if st.persistent:
                acc = ch.ops[1]
                self.post_actions.append(lambda s, st=st, acc=acc: self.stream_persistent_post(s, st, acc))
                return
            # per-iteration: reduce, then continue the chain element-wise
            out_t = tail_acc.outputs[0] if tail_acc else ch.ops[-1].outputs[0]
            reads, writes, owned = self.chain_sets(ch, tail_acc, out_t, set())

            def then(s: Src, e: str, i: int | None) -> None:
                for op in epilogue:
                    self.apply(s, op)
                self.finish_elem(s, tail_acc, out_t, e, i)

            if tail_acc is not None and tail_acc.outputs[0].guid not in self.reg_acc:
                self.setup_acc(tail_acc, st.M * st.N)
            self.stream_reduce(s, st, range(st.M), "loop", then, reads, writes | owned)
            return
        self.elementwise_chain(s, ch, tail_acc, epilogue)

    def chain_sets(self, ch: FusionChain, tail_acc: "TBOp | None", out_t: "STensor", reads: set[str]):
        owned: set[str] = set()
        writes: set[str] = set()
        if tail_acc is not None:
            if self.reg_acc.get(out_t.guid) == "smem":
                owned.add(self.bufname(out_t))
        else:
            writes = self.sink_sets(out_t, "loop" if self.in_loop else "post")
        return reads, writes, owned

    def setup_acc(self, acc: "TBOp", count: int, smem: bool = False) -> None:
        """Decide registers vs. shared memory for a plain accumulator owned element-wise.

        ``smem``: in shared memory whatever its size (a tensor-core chain owns its elements in
        the mma layout, not as ``tid + T*i``, which register accumulators are written back by).
        """
        n = -(-count // self.T)
        t = acc.outputs[0]
        if n <= MAX_REG_ELEMS and not smem:
            self.reg_acc[t.guid] = f"acc{t.guid}"
            self._acc_inits.append((t, n))
        else:
            self.reg_acc[t.guid] = "smem"
            self.tbuf(t, "persistent")
            self._acc_inits.append((t, 0))
        self.post_actions.append(lambda s, t=t, count=count: self.acc_writeback(s, t, count))

    def finish_elem(self, s: Src, tail_acc: "TBOp | None", out_t: "STensor", e: str, i: int | None) -> None:
        if tail_acc is None:
            self.sink(s, out_t, e)
            return
        where = self.reg_acc[out_t.guid]
        if where == "smem":
            s(f"{self.ref(out_t, e)} += v")
        else:
            if i is None:
                raise CodegenError("internal: register accumulator in a rolled loop")
            s(f"{where}_{i} += v")

    def elementwise_chain(self, s: Src, ch: FusionChain, tail_acc: "TBOp | None", epilogue: list["TBOp"]) -> None:
        lead = ch.lead
        out_t = tail_acc.outputs[0] if tail_acc is not None else ch.ops[-1].outputs[0]
        numel = lead.outputs[0].numel()
        if lead.op_type == "rms_norm":
            self.rms_prestage(s, lead)
        mma = lead.op_type == "matmul" and self.staged_mma_fits(lead) and (
            tail_acc is None or self.reg_acc.get(out_t.guid, "smem") == "smem")
        if tail_acc is not None and out_t.guid not in self.reg_acc:
            self.setup_acc(tail_acc, numel, smem=mma)
        reads: set[str] = set()
        stage_src = Src(s.indent)
        desc = " -> ".join(op.op_type for op in ch.ops)
        # a plain accumulator of the products alone: its sums stay in the mma registers across the loop
        persist = (mma and self.in_loop and self.FR > 1 and tail_acc is not None and not epilogue
                   and tail_acc.attrs.get("acc") is None and self.mma_rounds(lead) * 4 <= MAX_MMA_ACC)
        if mma:
            self.staged_mma(stage_src, lead, epilogue, tail_acc, out_t, reads, persist)
            desc += " (tensor cores)"
        elif lead.op_type == "matmul":
            a, b = lead.inputs
            M, K, N = a.dims[-2], a.dims[-1], b.dims[-1]
            R = next(r for r in (4, 2, 1) if N % r == 0)
            if tail_acc is not None and self.reg_acc[out_t.guid] != "smem":
                R = 1  # register accumulators are owned per element index
            reads |= {self.bufname(a), self.bufname(b)}
            NR = N // R

            def body(s: Src, u: str, i: int | None) -> None:
                if NR > 1:
                    s(f"m = {u} // {NR}" if M > 1 else "m = 0")
                    s(f"n = ({u} % {NR}) * {R}" if M > 1 else f"n = {u} * {R}")
                else:
                    s(f"m = {u}")
                    s("n = 0")
                s("; ".join(f"c{r} = f32(0.0)" for r in range(R)))
                with s.block(f"for k in range({K}):"):
                    s(f"x = {self.ref(a, add(mul('m', K), 'k'))}")
                    s("; ".join(f"c{r} += x * {self.ref(b, add(mul('k', N), 'n', str(r)))}" for r in range(R)))
                for r in range(R):
                    s(f"v = c{r}")
                    for op in epilogue:
                        self.apply(s, op)
                    e = add(mul("m", N), "n", str(r))
                    self.finish_elem(s, tail_acc, out_t, e, i)

            count = M * N // R
        else:
            def body(s: Src, e: str, i: int | None) -> None:
                self.lead_value(s, lead, e, reads)
                for op in epilogue:
                    self.apply(s, op)
                self.finish_elem(s, tail_acc, out_t, e, i)

            count = numel
        if not mma:
            unroll = None
            if tail_acc is not None and self.reg_acc[out_t.guid] != "smem":
                unroll = True
            self.per_element(stage_src, count, body, unroll=unroll)
        _, writes, owned = self.chain_sets(ch, tail_acc, out_t, reads)
        if persist:
            owned = set()  # written once, after the loop
        s.comment(f"{desc} -> {out_t.name} {list(out_t.dims)}")
        self.stage(s, reads=reads, writes=writes, owned=owned)
        s.extend(stage_src)

    # ------------------------------------------------------------------ tensor-core staged matmul
    def staged_mma_fits(self, op: "TBOp") -> bool:
        return staged_mma_fits(op, self.T, self.options)

    def mma_rounds(self, op: "TBOp") -> int:
        """16x8 output tiles each warp takes."""
        a, b = op.inputs
        return -(-(a.dims[-2] // 16) * (b.dims[-1] // 8) // (self.T // 32))

    def staged_mma(self, s: Src, op: "TBOp", epilogue: list["TBOp"], tail_acc: "TBOp | None",
                   out_t: "STensor", reads: set[str], persist: bool = False) -> None:
        """Each warp takes 16x8 output tiles in turn; A and B fragments are packed from the float32 tiles.

        Fragment layout of ``mma.m16n8k16.row.col`` (lane = 4 g + t): A registers hold rows g and
        g + 8, k pairs 2t and 2t + 8; B registers k pairs 2t and 2t + 8 of column g; the results
        are rows g, g + 8 and columns 2t, 2t + 1 of the tile.
        """
        a, b = op.inputs
        M, K, N = a.dims[-2], a.dims[-1], b.dims[-1]
        reads |= {self.bufname(a), self.bufname(b)}
        W = self.T // 32
        NT, tiles = N // 8, (M // 16) * (N // 8)
        cv = "f2h" if a.dtype.name == "float16" else "f2bf"
        mma = "mma_f16" if a.dtype.name == "float16" else "mma_bf16"
        g = op.guid
        s.comment(f"{op.outputs[0].name} = matmul on tensor cores: {tiles} tiles of 16x8 over {W} warps, "
                  f"{K // 16} k-steps each")
        rounds = self.mma_rounds(op)

        def tile_of(s: Src, j: int) -> None:
            s(f"wl{g} = tid % 32")
            s(f"wg{g} = wl{g} // 4")
            s(f"wt{g} = wl{g} % 4")
            tile = add("tid // 32", str(W * j))
            s(f"tr{g} = ({tile}) // {NT} * 16 + wg{g}" if NT > 1 else f"tr{g} = ({tile}) * 16 + wg{g}")
            s(f"tc{g} = ({tile}) % {NT} * 8" if NT > 1 else f"tc{g} = 0")

        def guarded(s: Src, j: int):  # the same for the whole warp: every lane reaches the mma or none
            return s.block(f"if tid // 32 + {W * j} < {tiles}:") if (j + 1) * W > tiles else nullcontext()

        acc = [[f"pm{g}_{j}_{r}" for r in range(4)] for j in range(rounds)]
        if persist:
            t = tail_acc.outputs[0]
            s.comment(f"{t.name} accumulates in the mma registers; written to shared memory after the loop")
            for j in range(rounds):
                self._red_inits.append("; ".join(f"{c} = f32(0.0)" for c in acc[j]))

            def writeback(s: Src) -> None:
                s.comment(f"{t.name} = the mma accumulators")
                self.stage(s, writes={self.bufname(t)})
                for j in range(rounds):
                    with guarded(s, j):
                        tile_of(s, j)
                        for r, (dr, dc) in enumerate(((0, 0), (0, 1), (8, 0), (8, 1))):
                            e = add(mul(add(f"tr{g}", str(dr)), N), f"tc{g}", mul(f"wt{g}", 2), str(dc))
                            s(f"{self.ref(t, e)} = {acc[j][r]}")

            self.post_actions.insert(0, writeback)
        for j in range(rounds):
            with guarded(s, j):
                tile_of(s, j)
                if persist:
                    c = acc[j]
                else:
                    c = [f"c{r}{g}" for r in range(4)]
                    s("; ".join(f"{x} = f32(0.0)" for x in c))
                with s.block(f"for kk in range({K // 16}):") if K > 16 else nullcontext():
                    k0 = add(mul("kk", 16) if K > 16 else "0", mul(f"wt{g}", 2))
                    ra, rb = mul(f"tr{g}", K), mul(f"(tr{g} + 8)", K)

                    def pair(i0: str, i1: str, t: "STensor" = a) -> str:
                        return f"pk16({cv}({self.ref(t, i0)}), {cv}({self.ref(t, i1)}))"

                    for r, (row, ko) in enumerate(((ra, 0), (rb, 0), (ra, 8), (rb, 8))):
                        s(f"a{r}{g} = {pair(add(row, k0, str(ko)), add(row, k0, str(ko + 1)))}")
                    col = add(f"tc{g}", f"wg{g}")
                    for r, ko in enumerate((0, 8)):
                        s(f"b{r}{g} = {pair(add(mul(add(k0, str(ko)), N), col), add(mul(add(k0, str(ko + 1)), N), col), b)}")
                    s(f"{', '.join(c)} = {mma}(a0{g}, a1{g}, a2{g}, a3{g}, b0{g}, b1{g}, {', '.join(c)})")
                if persist:
                    continue
                for r, (dr, dc) in enumerate(((0, 0), (0, 1), (8, 0), (8, 1))):
                    s(f"v = {c[r]}")
                    for e_op in epilogue:
                        self.apply(s, e_op)
                    e = add(mul(add(f"tr{g}", str(dr)), N), f"tc{g}", mul(f"wt{g}", 2), str(dc))
                    self.finish_elem(s, tail_acc, out_t, e, None)

    def acc_writeback(self, s: Src, t: "STensor", count: int) -> None:
        where = self.reg_acc[t.guid]
        if where == "smem":
            if any(sv.guid not in self.sunk_savers for sv in self.savers(t)):
                pass  # the saver stage copies it
            return
        s.comment(f"{t.name} = accumulated registers")
        writes = self.sink_sets(t, "post")
        self.stage(s, writes=writes)
        self.per_element(s, count, lambda s, e, i: (s(f"v = {where}_{i}"), self.sink(s, t, e)), unroll=True)

    def stream_persistent_post(self, s: Src, st: Stream, acc: "TBOp") -> None:
        t = acc.outputs[0]
        writes = self.sink_sets(t, "post")
        MC = max(1, min(st.M, 4096 // (st.G * st.N)))
        s.comment(f"{t.name} = sum of the {st.G} k-groups' partial sums ({MC} rows at a time)")
        for m0 in range(0, st.M, MC):
            rows = range(m0, min(st.M, m0 + MC))
            self.stream_reduce(s, st, rows, "post", lambda s, e, i: self.sink(s, t, e), set(), writes)

    # ------------------------------------------------------------------ reducing accumulators
    def reduce_geometry(self, op: "TBOp") -> tuple[int, int, Callable[[str, str], str]]:
        x = op.inputs[0]
        w = x.dims[-1]
        rows = x.numel() // w
        if op.attrs["acc"] == "sum_todimx":
            dx = self.bg.reduction_dimx
            return rows * dx, w // dx, lambda o, l: add(mul(f"({o} // {dx})", w) if rows > 1 else "0",
                                                       f"{o} % {dx}" if rows > 1 else o, mul(l, dx))
        return rows, w, lambda o, l: add(mul(o, w), l)

    def reduce_accum_loop(self, s: Src, ch: FusionChain) -> None:
        op = ch.lead
        x = op.inputs[0]
        nout, L, idx = self.reduce_geometry(op)
        sq = op.attrs["acc"] == "rms"
        g = op.guid
        ld = self.p.loader_of.get(x.guid)
        if ld is not None and op in self.fused_acc.get(ld.index, []):
            _, nj = self.staged_vectors(ld)
            for j in range(nj):
                self._red_inits.append(f"qf{g}_{j} = f32(0.0)")
            s.comment(f"{op.outputs[0].name}: {op.attrs['acc']} of {x.name} accumulated from the load registers")
            self.post_actions.append(lambda s, ch=ch, ld=ld: self.fused_accum_post(s, ch, ld))
            return
        s.comment(f"{op.outputs[0].name}: accumulate {op.attrs['acc']} of {x.name} over the loop")
        self.stage(s, reads={self.bufname(x)})
        term = "x * x" if sq else "x"
        if nout <= self.T:
            P = max(1, min(self.T // nout, L))
            P = 1 << (P.bit_length() - 1)  # a power of two: partials are summed by a tree
            self._red_inits.append(f"ro{g} = tid // {P}" if P > 1 else f"ro{g} = tid")
            self._red_inits.append(f"rp{g} = tid % {P}" if P > 1 else f"rp{g} = 0")
            self._red_inits.append(f"q{g} = f32(0.0)")
            n = L // P
            with s.block(f"if ro{g} < {nout}:"):
                if P > 1 and L % P == 0 and n & (n - 1) == 0:
                    # a constant trip count (unrolled, loads issued together); each output's threads
                    # start at another chunk, so the rows a warp reads fall in different banks
                    with s.block(f"for l in range({n}):"):
                        s(f"x = {self.ref(x, idx(f'ro{g}', f'rp{g} + ((l + ro{g}) & {n - 1}) * {P}'))}")
                        s(f"q{g} += {term}")
                else:
                    with s.block(f"for l in range(rp{g}, {L}, {P}):" if P > 1 else f"for l in range({L}):"):
                        s(f"x = {self.ref(x, idx(f'ro{g}', 'l'))}")
                        s(f"q{g} += {term}")
            self.post_actions.append(lambda s, ch=ch, P=P: self.reduce_accum_post(s, ch, P))
        else:
            n = -(-nout // self.T)
            if n > MAX_REG_ELEMS:
                raise CodegenError(f"accumulator {op.outputs[0]!r}: {nout} outputs is too many for one block")
            for i in range(n):
                self._red_inits.append(f"q{g}_{i} = f32(0.0)")

            def body(s: Src, o: str, i: int | None) -> None:
                s("z = f32(0.0)")
                with s.block(f"for l in range({L}):"):
                    s(f"x = {self.ref(x, idx(o, 'l'))}")
                    s(f"z += {term}")
                s(f"q{g}_{i} += z")

            self.per_element(s, nout, body, unroll=True, var="o")
            self.post_actions.append(lambda s, ch=ch: self.reduce_accum_post(s, ch, 0))

    def fused_accum_post(self, s: Src, ch: FusionChain, ld: Loader) -> None:
        """Per-vector register partials -> shared memory -> each row's sum (vectors row*CR .. +CR-1)."""
        op = ch.lead
        g = op.guid
        nout, L, _ = self.reduce_geometry(op)
        out_t = ch.ops[-1].outputs[0]
        nv, nj = self.staged_vectors(ld)
        CR = ld.tile[-1] // ld.vw
        red = self.p.buf(f"rf{g}", nv, "post")
        s.comment(f"{out_t.name} = finished {op.attrs['acc']} accumulator ({CR} partial sums per row)")
        self.stage(s, writes={red.name})
        for j in range(nj):
            v = f"tid + {self.T * j}" if j else "tid"
            with s.block(f"if {v} < {nv}:") if (j + 1) * self.T > nv else nullcontext():
                s(f"{self.ref_buf(red, v)} = qf{g}_{j}")
        self.stage(s, reads={red.name}, writes=self.sink_sets(out_t, "post"))

        def body(s: Src, o: str, i: int | None) -> None:
            s("v = f32(0.0)")
            with s.block(f"for c in range({CR}):"):
                s(f"v += {self.ref_buf(red, add(mul(o, CR), 'c'))}")
            self.acc_finish(s, ch, o)

        self.per_element(s, nout, body, unroll=False, var="o")

    def acc_finish(self, s: Src, ch: FusionChain, e: str) -> None:
        """``v`` holds a finished row sum: scale (mean, rms), epilogue ops, sink."""
        op = ch.lead
        kind = op.attrs["acc"]
        scale = 1.0 / (self.FR * op.inputs[0].dims[-1])
        if kind == "mean":
            s(f"v = v * f32({scale!r})")
        elif kind == "rms":
            s(f"v = fsqrt(v * f32({scale!r}))")
        for e_op in ch.ops[1:]:
            self.apply(s, e_op)
        self.sink(s, ch.ops[-1].outputs[0], e)

    def reduce_accum_post(self, s: Src, ch: FusionChain, P: int) -> None:
        op = ch.lead
        g = op.guid
        nout, L, _ = self.reduce_geometry(op)
        out_t = ch.ops[-1].outputs[0]
        writes = self.sink_sets(out_t, "post")

        def finish(s: Src, e: str) -> None:
            self.acc_finish(s, ch, e)

        s.comment(f"{out_t.name} = finished {op.attrs['acc']} accumulator")
        if P > 1:
            stride = P
            red = self.p.buf(f"rq{g}", nout * stride, "post")
            slot = lambda o, p: self.ref_buf(red, add(mul(o, stride), p))  # noqa: E731
            self.stage(s, writes={red.name})
            with s.block(f"if ro{g} < {nout}:"):
                s(f"{slot(f'ro{g}', f'rp{g}')} = q{g}")
            while P > 8:  # halve the partials per output until 8 remain: log2(P) steps, not P serial adds
                P //= 2
                s("cuda.syncthreads()")
                with s.block(f"if ro{g} < {nout} and rp{g} < {P}:"):
                    s(f"{slot(f'ro{g}', f'rp{g}')} += {slot(f'ro{g}', add(f'rp{g}', str(P)))}")
                self.sync.clear()
                self.sync.note(set(), {red.name}, set())
            self.stage(s, reads={red.name}, writes=writes)

            def body(s: Src, o: str, i: int | None) -> None:
                s("v = f32(0.0)")
                with s.block(f"for p in range({P}):"):
                    s(f"v += {slot(o, 'p')}")
                finish(s, o)

            self.per_element(s, nout, body, unroll=False, var="o")
        elif P == 1:
            self.stage(s, writes=writes)
            with s.block(f"if tid < {nout}:"):
                s(f"v = q{g}")
                finish(s, "tid")
        else:
            self.stage(s, writes=writes)
            self.per_element(s, nout, lambda s, o, i: (s(f"v = q{g}_{i}"), finish(s, o)), unroll=True, var="o")

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
        grid = self.bg.grid_dim
        for j, sv in enumerate(self.bg.output_ops):
            tile = sv.inputs[0].dims
            strides = row_strides(sv.attrs["out_dims"])
            omap = sv.attrs["output_map"]
            terms = [mul(AXIS_VARS[a], tile[omap[a]] * strides[omap[a]]) for a in range(3)
                     if grid[a] > 1 and omap[a] >= 0]
            s(f"ob{j} = {add(*terms)}")

    # ------------------------------------------------------------------ the kernel
    def emit(self) -> tuple[str, KernelInfo]:
        p = self.p
        bg = self.bg
        grid = bg.grid_dim
        self._acc_inits: list[tuple["STensor", int]] = []
        self._red_inits: list[str] = []
        chains = sorted(p.chains, key=lambda c: bg.ops.index(c.lead))
        compute = [c for c in chains if c.lead.op_type not in ("input", "output")]
        in_loop = [c for c in compute if not c.lead.outputs[0].after_accum or c.lead.op_type == "forloop_accum"]
        post = [c for c in compute if c not in in_loop]

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
        piped_staged = [ld for ld in staged if self.staged_piped(ld)]
        piped_streams = [st for st in p.streams if self.stream_pipelined(st)]
        D = self.depth
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
            units = [u for u, _ in self.stream_units(st, self.stream_rows(st))]
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
        if self.sync.dirty:
            tail("cuda.syncthreads()")
            self.sync.clear()
        self.saver_bases(tail)
        for act in self.post_actions:
            act(tail)
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
                    first("; ".join(f"n{i}_{u} = b{i}_{u}" for u, _ in self.stream_units(st, self.stream_rows(st))))
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

        pool, scratch = p.allocate()
        out = Src(0)
        args = [f"in{i}" for i in range(len(p.loaders))] + [f"out{j}" for j in range(len(bg.output_ops))] + ["scr"]
        regs = f", max_registers={self.options.max_registers}" if self.options.max_registers else ""
        out(f"@cuda.jit(cache=True, fastmath=True{regs}, **_bounds({self.T}))")
        with out.block(f"def {self.name}({', '.join(args)}):"):
            out.extend(self._doc())
            if pool:
                out(f"sm = cuda.shared.array({pool}, dtype=f32)")
            if p.int_words:
                out(f"smi = cuda.shared.array({p.int_words}, dtype=i32)")
            out("tid = cuda.threadIdx.x")
            for a in range(3):
                if grid[a] > 1:
                    out(f"{AXIS_VARS[a]} = cuda.blockIdx.{'xyz'[a]}")
            if scratch:
                lin = add(AXIS_VARS[0] if grid[0] > 1 else "0", mul("by", grid[0]) if grid[1] > 1 else "0",
                          mul("bz", grid[0] * grid[1]) if grid[2] > 1 else "0")
                out(f"sbase = {mul(lin, scratch)}")
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
        for b in p.bufs.values():
            if b.space == "smem":
                rep = "sm[" if b.offset == 0 else f"sm[{b.offset} + "
                arr = "sm, " if b.offset == 0 else f"sm, {b.offset} + "
            else:
                rep = f"scr[sbase + {b.offset} + " if b.offset else "scr[sbase + "
                arr = f"scr, sbase + {b.offset} + " if b.offset else "scr, sbase + "
            text = text.replace(f"«{b.name}»[", rep).replace(f"«&{b.name}», ", arr)
        if "«" in text:
            raise CodegenError(f"internal: unresolved buffer in generated kernel {self.name}")
        text = re.sub(r" \+ 0\]", "]", text)
        info = KernelInfo(
            name=self.name, grid=tuple(grid), threads=self.T, pool_floats=pool,
            scratch_floats_per_block=scratch, input_views=[ld.view for ld in p.loaders],
            output_dtypes=[sv.inputs[0].dtype.name for sv in bg.output_ops],
            streamed_inputs=[st.loader.index for st in p.streams], notes=self.notes)
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
    return _Emitter(bg, name, options).emit()
