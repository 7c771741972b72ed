"""Reducing accumulators of a generated kernel: ``sum`` / ``mean`` / ``rms`` / ``sum_todimx``.

Accumulated over the loop per output row (registers, or fused into a staged tile's loads),
finished after it with a tree of partial sums; part of :mod:`.block_kernel`.
"""
from __future__ import annotations

from contextlib import nullcontext
from typing import TYPE_CHECKING, Callable

from ..errors import CodegenError
from ..ir.thread_graph import FusionChain
from .plan import MAX_REG_ELEMS, Buf, Loader
from .source import Src, add, mul

if TYPE_CHECKING:  # pragma: no cover
    from ..ir.block_graph import TBOp


class AccumulatorEmitter:
    """Row accumulators over the loop and their finishing after it."""

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

    def fused_loader(self, op: "TBOp") -> Loader | None:
        """The staged loader whose load registers accumulate ``op`` (None: summed from its tile)."""
        ld = self.p.loader_of.get(op.inputs[0].guid)
        return ld if ld is not None and op in self.fused_acc.get(ld.index, []) else None

    def reduce_partials(self, op: "TBOp") -> int:
        """Threads per output row summing partials (a power of two: a tree adds them); 0 when
        there are more rows than threads (each thread then owns whole rows)."""
        nout, L, _ = self.reduce_geometry(op)
        if nout > self.T:
            return 0
        P = max(1, min(self.T // nout, L))
        return 1 << (P.bit_length() - 1)

    def fused_buf(self, op: "TBOp", ld: Loader) -> Buf:
        """The per-vector partial sums of an accumulator fused into ``ld``'s loads."""
        return self.p.buf(f"rf{op.guid}", self.staged_vectors(ld)[0], "post")

    def partials_buf(self, op: "TBOp", P: int) -> Buf:
        """The ``P`` partial sums of each of the accumulator's rows."""
        return self.p.buf(f"rq{op.guid}", self.reduce_geometry(op)[0] * P, "post")

    def reduce_accum_loop(self, s: Src, ch: FusionChain) -> None:
        op = ch.lead
        x = op.inputs[0]
        nout, L, idx = self.reduce_geometry(op)
        sq = op.attrs["acc"] == "rms"
        g = op.guid
        ld = self.fused_loader(op)
        if ld is not None:
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
            P = self.reduce_partials(op)
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
        red = self.fused_buf(op, ld)
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
        """``v`` holds a finished row sum: scale (mean, rms), epilogue ops, sink (split-K: the sum is handed
        over to the tile's last block, which runs the rest)."""
        op = ch.lead
        t = op.outputs[0]
        if self.split_takes(t):
            self.split_put(s, t, e, t.numel(), lambda s, e, ch=ch: self.acc_finish_rest(s, ch, e), ch.ops[-1].outputs[0])
            return
        self.acc_finish_rest(s, ch, e)

    def acc_finish_rest(self, s: Src, ch: FusionChain, e: str) -> None:
        """``v`` holds a row's whole sum: scale (mean, rms), epilogue ops, sink."""
        op = ch.lead
        kind = op.attrs["acc"]
        scale = 1.0 / (self.FR_total * op.inputs[0].dims[-1])
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
            red = self.partials_buf(op, P)
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
