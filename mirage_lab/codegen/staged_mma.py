"""Matmuls of two staged tiles on tensor cores (``mma.m16n8k16``).

Used for matmuls wider than a tensor-core stream takes (attention: ``QK^T`` and
``exp(S) V`` with 16 or more query rows per block); part of :mod:`.block_kernel`.
"""
from __future__ import annotations

from contextlib import nullcontext
from typing import TYPE_CHECKING

from .plan import MAX_HOISTED_FRAGS, mma_rows, staged_mma_fits
from .source import Src, add, mul

if TYPE_CHECKING:  # pragma: no cover
    from ..ir.block_graph import STensor, TBOp


class StagedMmaEmitter:
    """16x8 output tiles dealt to warps, fragments packed from the float32 tiles."""

    # ------------------------------------------------------------------ tensor-core staged matmul
    def staged_mma_fits(self, op: "TBOp") -> bool:
        return staged_mma_fits(op, self.T, self.options)

    def is_staged_mma(self, op: "TBOp") -> bool:
        """``op`` is a matmul of two staged tiles on tensor cores (not a stream)."""
        return op.op_type == "matmul" and op.guid not in self.p.stream_of and self.staged_mma_fits(op)

    def mma_rounds(self, op: "TBOp") -> int:
        """16x8 output tiles each warp takes."""
        a, b = op.inputs
        return -(-(mma_rows(a.dims[-2]) // 16) * (b.dims[-1] // 8) // (self.T // 32))

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
        # M not a multiple of 16: the last row of tiles is padded; its rows past M read A's last row
        # (min, no branch: the same values, results dropped) and are never written
        pad = mma_rows(M) != M
        NT, tiles = N // 8, (mma_rows(M) // 16) * (N // 8)
        cv = "f2h" if a.dtype.name == "float16" else "f2bf"
        mma = "mma_f16" if a.dtype.name == "float16" else "mma_bf16"
        g = op.guid
        s.comment(f"{op.outputs[0].name} = matmul on tensor cores: {tiles} tiles of 16x8 over {W} warps"
                  f"{f' ({M} rows padded to {mma_rows(M)})' if pad else ''}, "
                  f"{K // 16} k-steps each")
        rounds = self.mma_rounds(op)

        def tile_of(s: Src, j: int) -> None:
            s(f"wl{g} = tid % 32")
            s(f"wg{g} = wl{g} // 4")
            s(f"wt{g} = wl{g} % 4")
            tile = add(mul("(tid // 32)", rounds), str(j)) if blocked else add("tid // 32", str(W * j))
            s(f"tr{g} = ({tile}) // {NT} * 16 + wg{g}" if NT > 1 else f"tr{g} = ({tile}) * 16 + wg{g}")
            s(f"tc{g} = ({tile}) % {NT} * 8" if NT > 1 else f"tc{g} = 0")

        def row_guard(s: Src, dr: int):  # a padded tile's rows past M: computed, never stored
            return s.block(f"if tr{g} + {dr} < {M}:") if pad else nullcontext()

        def guarded(s: Src, j: int):  # the same for the whole warp: every lane reaches the mma or none
            return s.block(f"if tid // 32 + {W * j} < {tiles}:") if (j + 1) * W > tiles else nullcontext()

        pb = self.pair_pitch.get(self.bufname(b), 0)   # B kept as k-pairs (LoaderEmitter.pair_tiles)
        b_buf = self.planned(self.bufname(b)) if pb else None
        acc = [[f"pm{g}_{j}_{r}" for r in range(4)] for j in range(rounds)]
        A_ROWS = ((f"tr{g}", 0), (f"(tr{g} + 8)", 0), (f"tr{g}", 8), (f"(tr{g} + 8)", 8))

        def pair(x0: str, x1: str) -> str:
            return f"pk16({cv}({x0}), {cv}({x1}))"

        pa = self.raw_a_pitch.get(self.bufname(a), 0)   # A kept as its loaded words (LoaderEmitter.raw_a_tiles)
        a_buf = self.planned(self.bufname(a)) if pa else None

        def a_frag(r: int, k0: str, kw: str) -> str:
            """A register ``r`` at k-step base ``k0`` (element) / ``kw`` (its k-pair word, ``k0 / 2``)."""
            row, ko = A_ROWS[r]
            row = f"min({row}, {M - 1})" if pad else row
            if pa:
                return f"f2u({a_buf.ref(add(mul(row, pa), kw, str(ko // 2)))})"
            return pair(self.ref2(a, row, add(k0, str(ko))), self.ref2(a, row, add(k0, str(ko + 1))))

        # A the same every iteration (a loop-invariant tile: Q of attention): its fragments are packed
        # once before the loop and kept in registers, a third of the loop's shared-memory reads
        ld_a = self.p.loader_of.get(a.guid)
        hoist = (self.in_loop and self.FR > 1 and ld_a is not None and ld_a.invariant
                 and rounds * (K // 16) * 4 <= MAX_HOISTED_FRAGS)
        # One k-step and every warp's tiles in one row of tiles (exp(S) V of attention: 4 rows x 8
        # columns of tiles over 8 warps): a warp takes consecutive tiles of a row and packs the
        # A fragments once for all of them, where tiles dealt round-robin repacked A every round
        blocked = K == 16 and rounds > 1 and tiles == W * rounds and NT % rounds == 0 and not hoist
        qa = [[[f"qa{g}_{j}_{kk}_{r}" for r in range(4)] for kk in range(K // 16)] for j in range(rounds)]
        if hoist:
            def pack_a(s: Src) -> None:
                s.comment(f"A fragments of {op.outputs[0].name} = matmul({a.name}, ...): {a.name} is loop-invariant")
                for j in range(rounds):
                    with guarded(s, j):
                        tile_of(s, j)
                        for kk in range(K // 16):
                            k0 = add(str(kk * 16), mul(f"wt{g}", 2))
                            kw = add(str(kk * 8), f"wt{g}")
                            for r in range(4):
                                s(f"{qa[j][kk][r]} = {a_frag(r, k0, kw)}")
                    if (j + 1) * W > tiles:  # warps without this tile: defined, never used
                        with s.block("else:"):
                            s("; ".join(f"{x} = i32(0)" for kk in range(K // 16) for x in qa[j][kk]))

            self.pre_loop.append(pack_a)
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
                            col = add(f"tc{g}", mul(f"wt{g}", 2), str(dc))
                            with row_guard(s, dr):
                                s(f"{self.ref2(t, add(f'tr{g}', str(dr)), col)} = {acc[j][r]}")

            self.post_actions.insert(0, writeback)
        for j in range(rounds):
            with guarded(s, j):
                tile_of(s, j)
                if persist:
                    c = acc[j]
                else:
                    c = [f"c{r}{g}" for r in range(4)]
                    s("; ".join(f"{x} = f32(0.0)" for x in c))
                col = add(f"tc{g}", f"wg{g}")
                for kk in range(K // 16) if hoist else [None]:  # hoisted fragments: kk unrolled (register names)
                    with s.block(f"for kk in range({K // 16}):") if kk is None and K > 16 else nullcontext():
                        k0 = add(str(kk * 16) if kk is not None else mul("kk", 16) if K > 16 else "0",
                                 mul(f"wt{g}", 2))
                        kw = add(str(kk * 8) if kk is not None else mul("kk", 8) if K > 16 else "0", f"wt{g}")
                        if hoist:
                            av = qa[j][kk]
                        else:
                            av = [f"a{r}{g}" for r in range(4)]
                            if not blocked or j == 0:  # blocked: the same tile row in every round
                                for r in range(4):
                                    s(f"{av[r]} = {a_frag(r, k0, kw)}")
                        for r, ko in enumerate((0, 8)):
                            if pb:  # k-pair words: the register as it is (pair row k0 / 2 + ko / 2)
                                kr = add(str(kk * 8) if kk is not None else mul("kk", 8) if K > 16 else "0",
                                         f"wt{g}", str(ko // 2))
                                s(f"b{r}{g} = f2u({b_buf.ref(add(mul(kr, pb), col))})")
                            else:
                                s(f"b{r}{g} = {pair(self.ref2(b, add(k0, str(ko)), col), self.ref2(b, add(k0, str(ko + 1)), col))}")
                        s(f"{', '.join(c)} = {mma}({', '.join(av)}, b0{g}, b1{g}, {', '.join(c)})")
                if persist:
                    continue
                for r, (dr, dc) in enumerate(((0, 0), (0, 1), (8, 0), (8, 1))):
                    with row_guard(s, dr):
                        s(f"v = {c[r]}")
                        for e_op in epilogue:
                            self.apply(s, e_op)
                        e = add(mul(add(f"tr{g}", str(dr)), N), f"tc{g}", mul(f"wt{g}", 2), str(dc))
                        self.finish_elem(s, tail_acc, out_t, e, None)
