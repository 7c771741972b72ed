"""Buffers of a generated kernel, planned before any of its text is emitted.

A materialized tile lives in the shared-memory pool or, past the 48 KB a kernel may declare,
in a per-block global scratch area (:meth:`.plan.KernelPlan.allocate`). Before the first line
of the kernel is written, :meth:`BufferPlanner.plan_buffers` declares every buffer its stages
will use, in the order they first use them: the loop's staged tiles, the loop's chains, the
work after the loop, the loop-invariant tiles (within a region, that order is the layout's),
and places them. The emitters then write final text (``sm[16 + e0]``, ``scr[sbase + e0]``);
a stage that looks up a buffer the plan lacks is an internal error. Part of
:mod:`.block_kernel`.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from ..errors import CodegenError
from ..ir.thread_graph import FusionChain
from .plan import Buf, Loader
from .source import add, mul

if TYPE_CHECKING:  # pragma: no cover
    from ..ir.block_graph import STensor, TBOp


class BufferPlanner:
    """Which tiles get a buffer, where it is placed, and the text that reads and writes it."""

    # ------------------------------------------------------------------ names and text
    @staticmethod
    def bufname(t: "STensor") -> str:
        return f"t{t.guid}"

    def needs_buf(self, t: "STensor") -> bool:
        return any(c.op_type != "output" for c in self.consumers(t))

    def tbuf(self, t: "STensor", region: str) -> Buf:
        """The buffer of tile ``t`` (rows padded to the tensor-core pitch where one is set)."""
        name = self.bufname(t)
        if name in self.async_pitch:  # the cp.async ring: its stages one after another
            return self.p.buf(name, self.options.async_stages * self.async_words(name), region)
        if name in self.pair_pitch:  # k-pairs: a row of words per two rows of the tile
            return self.p.buf(name, t.numel() // (2 * t.dims[-1]) * self.pair_pitch[name], region)
        if name in self.raw_a_pitch or name in self.raw_b_pitch:  # the loaded words: a row of words per row of the tile
            return self.p.buf(name, t.numel() // t.dims[-1] * self.raw_pitch(name), region)
        cols, pitch = self.pitch.get(name, (1, 1))
        return self.p.buf(name, t.numel() // cols * pitch, region)

    def planned(self, name: str) -> Buf:
        """The planned buffer ``name`` (an internal error before planning or when it has none)."""
        b = self.p.bufs.get(name)
        if b is None or not self.p.placed:
            raise CodegenError(f"internal: {name} has no planned buffer in kernel {self.name}")
        return b

    def slot(self, name: str, idx: str) -> str:
        """The offset in buffer ``name`` of logical (row-major) element ``idx``: padded rows remapped."""
        if name not in self.pitch:
            return idx
        cols, pitch = self.pitch[name]
        return f"({idx}) // {cols} * {pitch} + ({idx}) % {cols}"

    def slot2(self, t: "STensor", row: str, col: str) -> str:
        """The offset of element (``row``, ``col``) of tile ``t`` (its last dim is the column)."""
        cols, pitch = self.pitch.get(self.bufname(t), (t.dims[-1], t.dims[-1]))
        return add(mul(row, pitch), col)

    def ref(self, t: "STensor", idx: str) -> str:
        """Element ``idx`` (row-major) of tile ``t``'s buffer."""
        name = self.bufname(t)
        return self.planned(name).ref(self.slot(name, idx))

    def ref2(self, t: "STensor", row: str, col: str) -> str:
        """Element (``row``, ``col``) of tile ``t``'s buffer."""
        return self.planned(self.bufname(t)).ref(self.slot2(t, row, col))

    def ref_buf(self, b: Buf, idx: str) -> str:
        return b.ref(self.slot(b.name, idx))

    def buf_arg(self, b: Buf, idx: str) -> str:
        """``array, index`` of element ``idx`` of ``b``: the first arguments of the prelude's vector stores."""
        return b.arg(self.slot(b.name, idx))

    # ------------------------------------------------------------------ the plan
    def stage_chains(self) -> tuple[list[FusionChain], list[FusionChain]]:
        """The compute chains in block-graph order: those run in the loop, and those after it."""
        bg = self.bg
        chains = sorted(self.p.chains, key=lambda c: bg.ops.index(c.lead))
        compute = [c for c in chains if c.lead.op_type not in ("input", "output")]
        in_loop = [c for c in compute if not c.lead.outputs[0].after_accum or c.lead.op_type == "forloop_accum"]
        return in_loop, [c for c in compute if c not in in_loop]

    def plan_buffers(self) -> tuple[int, int]:
        """Declare every buffer the kernel uses, in the order its stages first use them, and place them.

        The order is the emitter's: the loop's staged tiles, its chains (a reducing accumulator
        or a per-iteration reduction declares its after-loop buffers with the work after the
        loop), the after-loop chains, the loop-invariant tiles. Returns ``(pool, scratch)`` floats.
        """
        p = self.p
        in_loop, post = self.stage_chains()
        after: list[Callable[[], object]] = []    # the after-loop work's declarations, in its order
        acc_smem: dict[int, bool] = {}             # accumulator tile guid -> kept in shared memory
        for ld in p.loaders:
            if ld.mode == "staged" and not ld.invariant:
                self._plan_staged(ld, "loop")
        for ch in in_loop:
            self._plan_loop_chain(ch, after, acc_smem)
        for declare in after:
            declare()
        for ch in post:
            self._plan_elementwise(ch, None, "post", after, acc_smem)
        for ld in p.loaders:
            if ld.invariant:
                self._plan_staged(ld, "persistent")
        return p.allocate()

    def _plan_staged(self, ld: Loader, region: str) -> None:
        if self.staged_copy(ld, self.staged_prefetchable(ld)):
            self.tbuf(ld.out, region)

    def _plan_loop_chain(self, ch: FusionChain, after: list, acc_smem: dict[int, bool]) -> None:
        lead = ch.lead
        out_t = ch.ops[-1].outputs[0]
        if lead.op_type == "forloop_accum" and lead.attrs["acc"] is not None:
            ld = self.fused_loader(lead)
            if ld is not None:
                after.append(lambda: (self.fused_buf(lead, ld), self.sink_sets(out_t, "post")))
            else:
                P = self.reduce_partials(lead)
                after.append(lambda: (self.sink_sets(out_t, "post"), P > 1 and self.partials_buf(lead, P)))
            return
        st = self.p.stream_of.get(lead.guid)
        if st is None:
            self._plan_elementwise(ch, self.chain_parts(ch)[0], "loop", after, acc_smem)
        elif st.persistent:
            t = ch.ops[1].outputs[0]
            after.append(lambda: (self.sink_sets(t, "post"), self.reduce_buf(st, self.persistent_rows(st), "post")))
        else:
            tail_acc = self.chain_parts(ch)[0]
            if tail_acc is None:
                self.sink_sets(out_t, "loop")
            elif tail_acc.outputs[0].guid not in acc_smem:
                self._plan_acc(tail_acc, st.M * st.N, False, after, acc_smem)
            self.reduce_buf(st, st.M, "loop")

    def _plan_elementwise(self, ch: FusionChain, tail_acc: "TBOp | None", region: str, after: list,
                          acc_smem: dict[int, bool]) -> None:
        lead = ch.lead
        if lead.op_type == "rms_norm":
            self.rms_buf(lead, region)
        if tail_acc is None:
            self.sink_sets(ch.ops[-1].outputs[0], region)
        elif tail_acc.outputs[0].guid not in acc_smem:
            smem = self.chain_on_tensor_cores(lead, tail_acc)
            self._plan_acc(tail_acc, lead.outputs[0].numel(), smem, after, acc_smem)

    def _plan_acc(self, acc: "TBOp", count: int, smem: bool, after: list, acc_smem: dict[int, bool]) -> None:
        t = acc.outputs[0]
        acc_smem[t.guid] = not self.acc_in_registers(count, smem)
        if acc_smem[t.guid]:
            self.tbuf(t, "persistent")
        else:  # written back to a buffer after the loop, where a block op reads it
            after.append(lambda: self.sink_sets(t, "post"))
