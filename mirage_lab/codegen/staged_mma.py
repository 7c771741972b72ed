"""Matmuls of two staged tiles on tensor cores (``mma.m16n8k16``).

Used for matmuls wider than a tensor-core stream takes (attention: ``QK^T`` and
``exp(S) V`` with 16 or more query rows per block); part of :mod:`.block_kernel`.
"""
from __future__ import annotations

from contextlib import nullcontext
from typing import TYPE_CHECKING

from .plan import MAX_HOISTED_FRAGS, MAX_UNROLLED_MMA, ROLLED_MMA_BLOCK, mma_rows, staged_mma_fits
from .source import Src, add, mul

if TYPE_CHECKING:  # pragma: no cover
    from ..ir.block_graph import STensor, TBOp


def warp_block(tile_rows: int, tile_cols: int, warps: int, rounds: int) -> tuple[int, int] | None:
    """(R, C): each warp's ``rounds`` tiles as an R x C block sharing its fragments, or None.

    Only when the tiles split evenly into one block per warp; of those shapes the one with the fewest
    shared loads per k-step (4 R + 2 C).

    >>> warp_block(4, 4, 8, 2), warp_block(2, 8, 4, 4), warp_block(4, 4, 4, 4), warp_block(3, 4, 8, 2)
    ((1, 2), (1, 4), (1, 4), None)
    """
    if rounds < 2 or tile_rows * tile_cols != warps * rounds:
        return None
    shapes = [(4 * r + 2 * (rounds // r), r, rounds // r) for r in range(1, rounds + 1)
              if rounds % r == 0 and tile_rows % r == 0 and tile_cols % (rounds // r) == 0]
    return min(shapes)[1:] if shapes else None


def block_tile(tile_cols: int, blk: tuple[int, int], axis: int, i: int) -> str:
    """Tile row (``axis`` 0) or column (1) number ``i`` of the calling warp's block of ``blk`` tiles.

    Warps take the blocks in row-major order over ``tile_cols // C`` blocks per row of tiles.

    >>> block_tile(4, (1, 2), 0, 0), block_tile(4, (1, 2), 1, 1), block_tile(8, (1, 8), 0, 0)
    ('(tid // 32 // 2)', '((tid // 32 % 2) * 2 + 1)', '(tid // 32)')
    """
    nb = tile_cols // blk[1]
    if axis == 0:
        base = mul("tid // 32" if nb == 1 else f"tid // 32 // {nb}", blk[0])
    else:
        base = mul(f"tid // 32 % {nb}", blk[1]) if nb > 1 else "0"
    e = add(base, str(i))
    simple = e.isdigit() or (e.startswith("(") and e.endswith(")") and e.count("(") == 1)
    return e if simple else f"({e})"


class StagedMmaEmitter:
    """16x8 output tiles dealt to warps, fragments packed from the float32 tiles."""

    register_blocking = True   # a warp's tiles share fragments in one k loop (off: probes/mma_blocking_probe.py's A/B)

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

    def a_hoisted(self, op: "TBOp") -> bool:
        """A loop-invariant A tile (Q of attention) whose fragments are packed once before the loop."""
        a, _ = op.inputs
        ld_a = self.p.loader_of.get(a.guid)
        return (self.in_loop and self.FR > 1 and ld_a is not None and ld_a.invariant
                and self.mma_rounds(op) * (a.dims[-1] // 16) * 4 <= MAX_HOISTED_FRAGS)

    def mma_block(self, op: "TBOp") -> tuple[int, int] | None:
        """The R x C block of tiles each warp takes with register blocking, or None (tiles dealt round-robin)."""
        if not self.register_blocking or self.a_hoisted(op):
            return None
        a, b = op.inputs
        return warp_block(mma_rows(a.dims[-2]) // 16, b.dims[-1] // 8, self.T // 32, self.mma_rounds(op))

    def b_reader(self, op: "TBOp"):
        """``b_frag(r, k0, kw, col, kb, wc)``: the expression of B register ``r`` (k rows k0 + 8r, + 1; k-pair
        word ``kw``) of column ``col`` of ``op``'s B tile; ``kb`` is the k-step's first row and ``wc`` the lane's
        word column (tile column / 2 + t), which a B tile kept as loaded (cp.async) reads."""
        b = op.inputs[1]
        g = op.guid
        cv = "f2h" if b.dtype.name == "float16" else "f2bf"
        pb = self.pair_pitch.get(self.bufname(b), 0)   # B kept as k-pairs (LoaderEmitter.pair_tiles)
        # B kept as loaded: in a cp.async ring, or for ldmatrix
        pw = self.async_pitch.get(self.bufname(b)) or self.raw_b_pitch.get(self.bufname(b), 0)
        so = self.async_off(self.bufname(b))
        b_buf = self.planned(self.bufname(b)) if pb or pw else None

        def b_frag(r: int, k0: str, kw: str, col: str, kb: str = "", wc: str = "") -> str:
            ko = 8 * r
            if pw:  # rows kb + 8r .. + 7 of 8 columns, one word a lane, transposed into the register
                return f"movt(f2u({b_buf.ref(add(so, mul(add(kb, str(ko), f'wg{g}'), pw), wc))}))"
            if pb:  # k-pair words: the register as it is (pair row kw + ko / 2)
                return f"f2u({b_buf.ref(add(mul(add(kw, str(ko // 2)), pb), col))})"
            return (f"pk16({cv}({self.ref2(b, add(k0, str(ko)), col)}), "
                    f"{cv}({self.ref2(b, add(k0, str(ko + 1)), col)}))")

        return b_frag

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

        def lanes(s: Src) -> None:
            s(f"wl{g} = tid % 32")
            s(f"wg{g} = wl{g} // 4")
            s(f"wt{g} = wl{g} % 4")

        def tile_of(s: Src, j: int) -> None:
            lanes(s)
            if blk:   # the warp's R x C block of tiles; round j is its tile (j // C, j % C)
                s(f"tr{g} = {block_tile(NT, blk, 0, j // blk[1])} * 16 + wg{g}")
                s(f"tc{g} = {block_tile(NT, blk, 1, j % blk[1])} * 8")
                return
            tile = add("tid // 32", str(W * j))
            s(f"tr{g} = ({tile}) // {NT} * 16 + wg{g}" if NT > 1 else f"tr{g} = ({tile}) * 16 + wg{g}")
            s(f"tc{g} = ({tile}) % {NT} * 8" if NT > 1 else f"tc{g} = 0")

        def row_guard(s: Src, dr: int):  # a padded tile's rows past M: computed, never stored
            return s.block(f"if tr{g} + {dr} < {M}:") if pad else nullcontext()

        def guarded(s: Src, j: int):  # the same for the whole warp: every lane reaches the mma or none
            return s.block(f"if tid // 32 + {W * j} < {tiles}:") if (j + 1) * W > tiles else nullcontext()

        acc = [[f"pm{g}_{j}_{r}" for r in range(4)] for j in range(rounds)]

        def a_rows(tr: str) -> tuple[tuple[str, int], ...]:   # (row, k offset) of the four A registers
            return (tr, 0), (f"({tr} + 8)", 0), (tr, 8), (f"({tr} + 8)", 8)

        def pair(x0: str, x1: str) -> str:
            return f"pk16({cv}({x0}), {cv}({x1}))"

        pa = self.raw_a_pitch.get(self.bufname(a), 0)   # A kept as its loaded words (LoaderEmitter.raw_a_tiles)
        a_buf = self.planned(self.bufname(a)) if pa else None
        a_so = self.async_off(self.bufname(a))   # this iteration's stage of a cp.async ring

        def a_frag(r: int, k0: str, kw: str, tr: str = f"tr{g}") -> str:
            """A register ``r`` at k-step base ``k0`` (element) / ``kw`` (its k-pair word, ``k0 / 2``), tile rows from ``tr``."""
            row, ko = a_rows(tr)[r]
            row = f"min({row}, {M - 1})" if pad else row
            if pa:
                return f"f2u({a_buf.ref(add(a_so, mul(row, pa), kw, str(ko // 2)))})"
            return pair(self.ref2(a, row, add(k0, str(ko))), self.ref2(a, row, add(k0, str(ko + 1))))

        b_frag = self.b_reader(op)

        # A the same every iteration (a loop-invariant tile: Q of attention): its fragments are packed
        # once before the loop and kept in registers, a third of the loop's shared-memory reads
        hoist = self.a_hoisted(op)
        # Register blocking: a warp takes an R x C block of tiles and runs one k loop for all of them,
        # loading each k-step's R A fragments and C B fragments once for R x C mma: 4R + 2C shared
        # loads where tiles dealt round-robin, each with its own k loop, took 6 per mma. Shared-memory
        # bandwidth, not the tensor cores, bounds these loops (a 16x8x16 mma reads 768 bytes).
        blk = self.mma_block(op)
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
        if blk:
            self._staged_mma_blocked(s, op, blk, epilogue, tail_acc, out_t, persist, acc,
                                     lanes, tile_of, row_guard, a_frag, b_frag, mma)
            return
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
                            for r in range(4):
                                s(f"{av[r]} = {a_frag(r, k0, kw)}")
                        kb = add(str(kk * 16) if kk is not None else mul("kk", 16) if K > 16 else "0")
                        for r in range(2):
                            s(f"b{r}{g} = {b_frag(r, k0, kw, col, kb, add(f'tc{g} // 2', f'wt{g}'))}")
                        s(f"{', '.join(c)} = {mma}({', '.join(av)}, b0{g}, b1{g}, {', '.join(c)})")
                if not persist:
                    self._mma_epilogue(s, op, c, epilogue, tail_acc, out_t, row_guard)

    def _mma_epilogue(self, s: Src, op: "TBOp", c: list[str], epilogue: list["TBOp"], tail_acc: "TBOp | None",
                      out_t: "STensor", row_guard) -> None:
        """One tile's four accumulators through the epilogue into their elements (rows tr, tr + 8; columns tc + 2t, + 1)."""
        g, N = op.guid, op.inputs[1].dims[-1]
        for r, (dr, dc) in enumerate(((0, 0), (0, 1), (8, 0), (8, 1))):
            with row_guard(s, dr):
                s(f"v = {c[r]}")
                for e_op in epilogue:
                    self.apply(s, e_op)
                e = add(mul(add(f"tr{g}", str(dr)), N), f"tc{g}", mul(f"wt{g}", 2), str(dc))
                self.finish_elem(s, tail_acc, out_t, e, None)

    def _staged_mma_blocked(self, s: Src, op: "TBOp", blk: tuple[int, int], epilogue: list["TBOp"],
                            tail_acc: "TBOp | None", out_t: "STensor", persist: bool, acc: list[list[str]],
                            lanes, tile_of, row_guard, a_frag, b_frag, mma: str) -> None:
        """The warp's R x C tiles in one k loop: R A and C B fragments per k-step, each read once."""
        a, b = op.inputs
        K, NT, g = a.dims[-1], b.dims[-1] // 8, op.guid
        R, C = blk
        s.comment(f"register-blocked: each warp a {R}x{C} block of tiles, "
                  f"{4 * R + 2 * C} shared loads per k-step for {R * C} mma")
        lanes(s)
        for ri in range(R):
            s(f"ar{g}_{ri} = {block_tile(NT, blk, 0, ri)} * 16 + wg{g}")
        bname = self.bufname(b)
        pa = self.raw_a_pitch.get(self.bufname(a), 0)
        pw = self.async_pitch.get(bname) or self.raw_b_pitch.get(bname, 0)
        ldsm_b = self.options.ldmatrix and pw and C % 2 == 0   # B by ldmatrix.trans, two column tiles at a time
        for ci in range(C):
            s(f"bc{g}_{ci} = {block_tile(NT, blk, 1, ci)} * 8 + wg{g}")
            if pw and not ldsm_b:   # its lane's word column in a B tile kept as loaded, for movt
                s(f"bw{g}_{ci} = {block_tile(NT, blk, 1, ci)} * 4 + wt{g}")
        a_ld = b_ld = None
        if self.options.ldmatrix and (pa or ldsm_b):
            # ldmatrix (CodegenOptions.ldmatrix): a warp's 4 A registers in one ldmatrix.x4, two B column tiles' 2 + 2
            # in one ldmatrix.x4.trans, where 32-bit shared loads took 4 and 4 (k-pair words).
            # Lane L names row L % 8 of matrix L // 8: rows + 8 for matrices 1 and 3, the next k half
            # (A) or the next column tile (B) for matrices 2 and 3
            s(f"lr{g} = (wl{g} & 7) + (wl{g} >> 3 & 1) * 8")
            s(f"lc{g} = wl{g} >> 4")
            if pa:
                a_buf, a_so, M = self.planned(self.bufname(a)), self.async_off(self.bufname(a)), a.dims[-2]
                for ri in range(R):
                    row = f"{block_tile(NT, blk, 0, ri)} * 16 + lr{g}"
                    s(f"al{g}_{ri} = {f'min({row}, {M - 1})' if mma_rows(M) != M else row}")

                def a_ld(ri: int, kwb: str) -> str:
                    return f"ldsm4(sm, {a_buf.at(add(a_so, mul(f'al{g}_{ri}', pa), kwb, mul(f'lc{g}', 4)))})"
            if ldsm_b:
                b_buf, b_so = self.planned(bname), self.async_off(bname)
                for q in range(C // 2):
                    s(f"bl{g}_{q} = ({block_tile(NT, blk, 1, 2 * q)} + lc{g}) * 4")

                def b_ld(q: int, kb: str) -> str:
                    return f"ldsm4t(sm, {b_buf.at(add(b_so, mul(add(kb, f'lr{g}'), pw), f'bl{g}_{q}'))})"
        cs = acc if persist else [[f"c{j}_{r}{g}" for r in range(4)] for j in range(R * C)]
        if not persist:
            for c in cs:
                s("; ".join(f"{x} = f32(0.0)" for x in c))
        # k-steps written out, up to MAX_UNROLLED_MMA mma a loop body: NVVM unrolled the small per-tile loops but
        # not one of a few mma, which then waited on each step's shared loads (Phi-3-mini's SwiGLU lowering
        # 35.7 -> 44.0 µs rolled, H200). A block of ROLLED_MMA_BLOCK mma or more keeps the loop rolled: its
        # steps have mma enough to cover the loads (Gemma 7B's prefill lowering, 16 a step: 592 µs rolled,
        # 674 with 8 steps written out)
        steps = K // 16
        U = 1 if R * C >= ROLLED_MMA_BLOCK else max(
            u for u in range(1, steps + 1) if steps % u == 0 and u * R * C <= MAX_UNROLLED_MMA)
        rolled = steps > U
        with s.block(f"for kq in range({steps // U}):") if rolled else nullcontext():
            for u in range(U):
                # the k-step's first row / word, and the lane's (+ 2t / + t; written as one sum each, the order the
                # generated text has always had)
                kb = add(mul("kq", 16 * U) if rolled else "0", str(16 * u))
                k0 = add(mul("kq", 16 * U) if rolled else "0", str(16 * u), mul(f"wt{g}", 2))
                kwb = add(mul("kq", 8 * U) if rolled else "0", str(8 * u))
                kw = add(mul("kq", 8 * U) if rolled else "0", str(8 * u), f"wt{g}")
                self._mma_kstep(s, g, mma, blk, cs, k0, kw, a_frag, b_frag, kb,
                                a_ld and (lambda ri, kwb=kwb: a_ld(ri, kwb)), b_ld and (lambda q, kb=kb: b_ld(q, kb)))
        if persist:
            return
        for j in range(R * C):
            tile_of(s, j)
            self._mma_epilogue(s, op, cs[j], epilogue, tail_acc, out_t, row_guard)

    @staticmethod
    def _mma_kstep(s: Src, g: int, mma: str, blk: tuple[int, int], cs: list[list[str]], k0: str, kw: str,
                   a_frag, b_frag, kb: str = "", a_ld=None, b_ld=None) -> None:
        """One k-step of a register-blocked loop (op ``g``, intrinsic ``mma``): R A fragments, C B fragments,
        their R x C mma; ``a_ld(ri)`` / ``b_ld(q)``: ldmatrix expressions of A block row ``ri``'s 4 registers and
        of B column tiles ``2q``, ``2q + 1``'s 2 + 2, where ldmatrix reads them."""
        R, C = blk
        for ri in range(R):
            if a_ld is not None:
                s(f"{', '.join(f'a{ri}_{r}{g}' for r in range(4))} = {a_ld(ri)}")
                continue
            for r in range(4):
                s(f"a{ri}_{r}{g} = {a_frag(r, k0, kw, f'ar{g}_{ri}')}")
        for ci in range(C):
            if b_ld is not None:
                if ci % 2 == 0:
                    s(f"b{ci}_0{g}, b{ci}_1{g}, b{ci + 1}_0{g}, b{ci + 1}_1{g} = {b_ld(ci // 2)}")
                continue
            for r in range(2):
                s(f"b{ci}_{r}{g} = {b_frag(r, k0, kw, f'bc{g}_{ci}', kb, f'bw{g}_{ci}')}")
        for j in range(R * C):
            ri, ci = divmod(j, C)
            av = ", ".join(f"a{ri}_{r}{g}" for r in range(4))
            s(f"{', '.join(cs[j])} = {mma}({av}, b{ci}_0{g}, b{ci}_1{g}, {', '.join(cs[j])})")
