"""Fusion chains of a generated kernel: in-loop and after-loop element-wise stages, accumulators.

Part of :mod:`.block_kernel`.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import CodegenError
from ..ir.thread_graph import FusionChain
from .plan import MAX_MMA_ACC, MAX_REG_ELEMS
from .source import Src, add, mul

if TYPE_CHECKING:  # pragma: no cover
    from ..ir.block_graph import STensor, TBOp


class ChainEmitter:
    """One fusion chain per stage: streamed, tensor-core or element-wise lead; accumulator placement."""

    # ------------------------------------------------------------------ chains
    def emit_chain_loop(self, s: Src, ch: FusionChain) -> None:
        """An in-loop chain: its per-iteration work."""
        lead = ch.lead
        if lead.op_type == "forloop_accum" and lead.attrs["acc"] is not None:
            self.reduce_accum_loop(s, ch)
            return
        tail_acc, epilogue = self.chain_parts(ch)
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

    @staticmethod
    def chain_parts(ch: FusionChain) -> tuple["TBOp | None", list["TBOp"]]:
        """An in-loop chain's accumulator at its end (or as its lead), and the ops applied before it."""
        tail_acc = ch.ops[-1] if (ch.ops[-1].op_type == "forloop_accum" and len(ch.ops) > 1) or \
            (ch.lead.op_type == "forloop_accum") else None
        return tail_acc, [op for op in ch.ops[1:] if op is not tail_acc]

    def chain_on_tensor_cores(self, lead: "TBOp", tail_acc: "TBOp | None") -> bool:
        """A staged matmul lead runs on tensor cores (where its accumulator, if any, is in shared memory)."""
        return lead.op_type == "matmul" and self.staged_mma_fits(lead) and (
            tail_acc is None or self.reg_acc.get(tail_acc.outputs[0].guid, "smem") == "smem")

    def acc_in_registers(self, count: int, smem: bool) -> bool:
        """A plain accumulator of ``count`` elements is kept in registers (else in shared memory)."""
        return -(-count // self.T) <= MAX_REG_ELEMS and not smem

    def mma_persists(self, lead: "TBOp", tail_acc: "TBOp | None", epilogue: list["TBOp"]) -> bool:
        """A tensor-core chain of a plain accumulator of the products alone: its sums stay in the mma
        registers across the loop."""
        return (self.in_loop and self.FR > 1 and tail_acc is not None and not epilogue
                and tail_acc.attrs.get("acc") is None and self.mma_rounds(lead) * 4 <= MAX_MMA_ACC)

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
        if self.acc_in_registers(count, smem):
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
        mma = self.chain_on_tensor_cores(lead, tail_acc)
        if tail_acc is not None and out_t.guid not in self.reg_acc:
            self.setup_acc(tail_acc, numel, smem=mma)
        reads: set[str] = set()
        stage_src = Src(s.indent)
        desc = " -> ".join(op.op_type for op in ch.ops)
        persist = mma and self.mma_persists(lead, tail_acc, epilogue)
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
