"""Element-wise code of a generated kernel: per-op text, values of a chain's lead op, sinks.

Part of the block-kernel emitter (:mod:`.block_kernel`), which mixes these methods in. The
per-op text is one table per kind: a unary op rewrites the value ``v`` in place.

    >>> UNARY["silu"]
    'v = v / (f32(1.0) + fexp(-v))'
    >>> BINARY["div"].format(a="x", b="y")
    'x / y'
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import CodegenError
from .source import Src, add, dot, mul, row_strides, unravel

if TYPE_CHECKING:  # pragma: no cover
    from ..ir.block_graph import STensor, TBOp
    from .plan import Buf

UNARY = {
    "exp": "v = fexp(v)",
    "silu": "v = v / (f32(1.0) + fexp(-v))",
    "gelu": "v = f32(0.5) * v * (f32(1.0) + ferf(v * f32(0.7071067811865476)))",
    "relu": "v = max(v, f32(0.0))",
    "sqrt": "v = fsqrt(v)",
    "square": "v = v * v",
    "sigmoid": "v = f32(1.0) / (f32(1.0) + fexp(-v))",
}
BINARY = {"add": "{a} + {b}", "sub": "{a} - {b}", "mul": "{a} * {b}", "div": "{a} / {b}",
          "pow": "f32(fpow({a}, {b}))"}


class ElementwiseEmitter:
    """Per-op text (``UNARY`` / ``BINARY``), the value of a lead op at one element, stores."""

    # ------------------------------------------------------------------ values
    def read_bcast(self, x: "STensor", od: tuple[int, ...], e: str) -> str:
        if tuple(x.dims) == tuple(od):
            return self.ref(x, e)
        t = unravel(e, od)
        idx = [t[k] if x.dims[k] == od[k] else "0" for k in range(len(od))]
        return self.ref(x, dot(idx, row_strides(x.dims)))

    def apply(self, s: Src, op: "TBOp") -> None:
        t = op.op_type
        if t in UNARY:
            s(UNARY[t])
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
        if t in UNARY or t in ("clamp", "mul_scalar"):
            s(f"v = {self.ref(ins[0], e)}")
            self.apply(s, op)
        elif t in BINARY:
            a = self.read_bcast(ins[0], od, e)
            b = self.read_bcast(ins[1], od, e)
            s(f"v = {BINARY[t].format(a=a, b=b)}")
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
            rs = self.rms_buf(op, "loop" if self.in_loop else "post")
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

    def rms_buf(self, op: "TBOp", region: str) -> "Buf":
        """rms_norm's 1/rms of each row of its input."""
        x = op.inputs[0]
        return self.p.buf(f"rs{op.guid}", x.numel() // x.dims[-1], region)

    def rms_prestage(self, s: Src, op: "TBOp") -> None:
        """rms_norm needs each row's 1/rms before its element-wise stage: one thread per row."""
        x = op.inputs[0]
        w = x.dims[-1]
        rows = x.numel() // w
        rs = self.rms_buf(op, "loop" if self.in_loop else "post")
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
        if self.split_takes(t):   # split-K: an accumulator's sum goes to the tile's last block first
            self.split_put(s, t, e, t.numel(), lambda s, e, t=t: self.sink(s, t, e), t, v)
            return
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
