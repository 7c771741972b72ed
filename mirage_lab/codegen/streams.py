"""Streamed matmuls of a generated kernel: B straight from global memory into registers.

The FMA layout (k-groups x column chunks, ``M x vw`` partial sums per thread) and the
tensor-core layout (``mma.m16n8k16``: A fragments in shared memory, B pairs from two k rows'
vector loads), then the cross-thread reduction of the partial sums; part of :mod:`.block_kernel`.
"""
from __future__ import annotations

from contextlib import nullcontext
from typing import TYPE_CHECKING, Callable

from .plan import Buf, Loader, Stream
from .source import Src, add, mul, row_strides

if TYPE_CHECKING:  # pragma: no cover
    from ..ir.block_graph import TBOp


class StreamEmitter:
    """Streamed matmuls (FMA or tensor cores) and the reduction of their partial sums."""

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
        """fp32 partial sums per thread: M x vw (FMA), or 4 accumulators of each of the CW x vw mma tiles."""
        return 4 * st.vw * st.CW if st.mma else st.M * st.vw

    @staticmethod
    def zero_array(s: Src, name: str, n: int) -> None:
        for z in range(0, n, 8):
            s("; ".join(f"{name}[{q}] = f32(0.0)" for q in range(z, min(n, z + 8))))

    @staticmethod
    def stream_units(st: Stream, rows: range) -> list[tuple[str, int, int]]:
        """(register suffix, row offset from the thread's first row, column chunk) of each load of ``rows``.

        FMA layout: one row per unit, G rows apart. mma layout: ``rows`` are k-steps; four
        rows (4t..4t+3 of the step) per step, steps 16*G rows apart, one load per column chunk of
        the warp (``CW``); the movmatrix layout: two rows (g and 8 + g of the step).
        """
        if st.mv:
            return [(f"{j}_{h}", j * 16 * st.G + 8 * h, 0) for j in rows for h in range(2)]
        if st.mma and st.CW > 1:
            return [(f"{j}_{q}c{c}", j * 16 * st.G + q, c) for j in rows for q in range(4) for c in range(st.CW)]
        if st.mma:
            return [(f"{j}_{q}", j * 16 * st.G + q, 0) for j in rows for q in range(4)]
        return [(str(r), r * st.G, 0) for r in rows]

    def issue_stream(self, s: Src, st: Stream, rows: range, prefix: str = "b", it: str = "it") -> None:
        i = st.loader.index
        base = add(self.loader_word(st.loader, it), f"sw{i}")
        chunk = 8 * st.vw // self.loader_unit(st.loader)   # words between a warp's column chunks
        for u, off, c in self.stream_units(st, rows):
            s(f"{prefix}{i}_{u} = {self.load_expr(st.loader, add(base, str(off * self._rsw[i] + c * chunk)))}")

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
            # one row at a time: only its M values of A and vw of B are live. The names carry the stream
            # (w{i}_...): a name two streams assign is a re-defined variable, and numba's SSA pass then
            # rewrites the whole kernel once per such name (a third of a two-stream FMA kernel's compile)
            for r in rows:
                ws = self.decode(st.loader, f"b{i}_{r}")
                s("; ".join(f"w{i}_{r}_{n} = {x}" for n, x in enumerate(ws)))
                s("; ".join(f"a{i}_{r}_{m} = {self.ref(a, add(f'sk{i}', str(m * st.K + r * st.G)))}"
                            for m in range(st.M)))
                for m in range(st.M):
                    s("; ".join(f"pa{i}[{m * st.vw + n}] += a{i}_{r}_{m} * w{i}_{r}_{n}" for n in range(st.vw)))

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
                  f"B={st.loader.out.name} streamed into registers; {st.NCW} warp(s) x "
                  + (f"{st.CW} chunks of {cols} columns, " if st.CW > 1 else f"{cols} columns, ") +
                  f"{st.G} warp(s) along K, {st.KS} k-steps of 16 rows per warp and iteration"
                  + ("; B in 16-byte loads of rows g, g + 8, transposed into fragments by movmatrix" if st.mv else ""))
        s(f"ml{i} = tid % 32")
        s(f"mg{i} = ml{i} // 4")
        s(f"mt{i} = ml{i} % 4")
        if st.NCW > 1:
            s(f"mcw{i} = (tid // 32) % {st.NCW}")
            s(f"mkw{i} = tid // {32 * st.NCW}")
        else:
            s(f"mcw{i} = 0")
            s(f"mkw{i} = tid // 32")
        if st.mv:  # first word of the lane's rows 16*mkw + mg (+8h) and columns mcw*32 + mt*8
            s(f"sw{i} = {add(mul(f'mkw{i}', 16 * rsw), mul(f'mg{i}', rsw), mul(f'mcw{i}', cols // unit), mul(f'mt{i}', 8 // unit))}")
        else:  # first word of the lane's rows 16*mkw + 4*mt (+q) and columns mcw*8*vw + mg*vw
            s(f"sw{i} = {add(mul(f'mkw{i}', 16 * rsw), mul(f'mt{i}', 4 * rsw), mul(f'mcw{i}', st.CW * cols // unit), mul(f'mg{i}', st.vw // unit))}")
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

        That order matches B pairs of rows (4t, 4t+1), (4t+2, 4t+3). The movmatrix layout's B
        fragments are in the standard order (rows 2t, 2t+1 and 2t+8, 2t+9): there pair p of a
        step goes to lane (m % 8) * 4 + p % 4, register half p // 4, with the same rotation.
        """
        AR = st.AR
        ks = f"({p}) // 8"
        sel = f"({p}) // 4 % 2" if st.mv else f"({p}) % 2"
        reg = add(f"({m}) // 8" if AR == 4 else "0", mul(sel, AR // 2))
        rot = f"({ks}) % 8 * 4 + ({ks}) // 8 % 2 + {sel} * 16"
        lane = f"({m}) % 8 * 4 + ({p}) % 4" if st.mv else f"({m}) % 8 * 4 + ({p}) % 8 // 2"
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
        s.comment(f"{st.op.outputs[0].name} partial sums on tensor cores: {st.KS} k-steps x {st.vw * st.CW} mma.m16n8k16")
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
                if st.mv:  # word c of the two loads, transposed across the warp: tile c's b0, b1
                    for c in range(st.vw):
                        acc = [f"pa{i}[{4 * c + r}]" for r in range(4)]
                        s(f"{', '.join(acc)} = {mma}({', '.join(regs)}, movt(b{i}_{j}_0[{c}]), "
                          f"movt(b{i}_{j}_1[{c}]), {', '.join(acc)})")
                    continue
                for cc in range(st.vw * st.CW):   # tile cc: column cc % vw of chunk cc // vw
                    c, ch = cc % st.vw, (f"c{cc // st.vw}" if st.CW > 1 else "")
                    w = (lambda q: f"b{i}_{j}_{q}{ch}[{c // 2}]") if nw > 1 else (lambda q: f"b{i}_{j}_{q}{ch}")
                    pk = "pkl" if c % 2 == 0 else "pkh"
                    acc = [f"pa{i}[{4 * cc + r}]" for r in range(4)]
                    s(f"{', '.join(acc)} = {mma}({', '.join(regs)}, {pk}({w(0)}, {w(1)}), {pk}({w(2)}, {w(3)}), "
                      f"{', '.join(acc)})")

    def mma_write_partials(self, s: Src, st: Stream, rows: range, red: Buf) -> None:
        """Each warp's accumulators -> ``red[kgroup, m - rows.start, n]`` for the rows in ``rows``.

        Lane (g, t), tile c of chunk h: accumulators 0, 1 are row g, columns (2t, 2t+1)*vw + c of the
        chunk's 8*vw (movmatrix layout: 8t + 2c, 8t + 2c + 1); 2, 3 are row g + 8.
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
                for cc in range(vw * st.CW):
                    c, chunk = cc % vw, cc // vw
                    for u in range(2):
                        if st.mv:
                            n = add(mul(f"mcw{i}", 32), mul(f"mt{i}", 8), str(2 * c + u))
                        else:
                            n = add(mul(f"mcw{i}", 8 * vw * st.CW), mul(f"mt{i}", 2 * vw), str(chunk * 8 * vw + u * vw + c))
                        idx = add(mul(f"mkw{i}", MC * N), mul(f"({row})" if row != f"mg{i}" else row, N), n)
                        s(f"{self.ref_buf(red, idx)} = pa{i}[{4 * cc + 2 * h + u}]")

    def reduce_buf(self, st: Stream, rows: int, region: str) -> Buf:
        """The k-groups' partial sums of ``rows`` rows of the product, for the cross-thread reduction."""
        return self.p.buf(f"red{st.loader.index}_{region}", st.G * rows * st.N, region)

    @staticmethod
    def persistent_rows(st: Stream) -> int:
        """Rows a split-K stream's partial sums are reduced in at a time after the loop (16 KB of them)."""
        return max(1, min(st.M, 4096 // (st.G * st.N)))

    def stream_reduce(self, s: Src, st: Stream, rows: range, region: str,
                      then: Callable[[Src, str, int | None], None], out_reads: set[str], out_writes: set[str]) -> None:
        """Partial sums of rows ``rows`` -> a reduction buffer -> ``then(src, e)`` with the sum in ``v``."""
        i = st.loader.index
        MC = len(rows)
        N = st.N
        red = self.reduce_buf(st, MC, region)
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

    def stream_persistent_post(self, s: Src, st: Stream, acc: "TBOp") -> None:
        t = acc.outputs[0]
        writes = self.sink_sets(t, "post")
        MC = self.persistent_rows(st)
        s.comment(f"{t.name} = sum of the {st.G} k-groups' partial sums ({MC} rows at a time)")
        for m0 in range(0, st.M, MC):
            rows = range(m0, min(st.M, m0 + MC))
            self.stream_reduce(s, st, rows, "post", lambda s, e, i: self.sink(s, t, e), set(), writes)
