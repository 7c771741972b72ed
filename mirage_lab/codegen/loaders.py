"""Input loaders of a generated kernel: tile addresses, vector loads, staging into shared memory.

A staged tile is loaded into registers (an iteration, or ``pipeline_depth`` iterations, ahead
when it fits) and stored to shared memory as float32; part of :mod:`.block_kernel`.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..ir.tiling import axis_of
from .plan import AXIS_VARS, PREFETCH_WORDS, Loader, raw_word_pitch, word_tile
from .source import Src, add, dot, mul, prod, row_strides, unravel

if TYPE_CHECKING:  # pragma: no cover
    from ..ir.block_graph import STensor


class LoaderEmitter:
    """Tile bases, vector loads and their decoding, staged tiles (prefetched or looped)."""

    async_b_tiles = True   # B tiles join a cp.async ring too (off: A tiles only; probes/async_copy_probe.py's A/B)

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
            axis = axis_of(ld.imap, grid, k)
            scale = ld.tile[k] * strides[k] // unit
            if axis is not None:
                per_block = scale * (self.FR_total if ld.fmap == k else 1)
                terms.append(mul(AXIS_VARS[axis], per_block))
            if ld.fmap == k:
                step = scale
        self._it_step[ld.index] = step
        if ld.fmap >= 0 and not ld.invariant:   # split-K: this block's part of the loop starts further along
            terms.append(self.split_loop_offset(step))
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

    def pair_tiles(self) -> dict[str, int]:
        """Staged 16-bit tiles kept as k-pairs: buffer name -> row pitch in 32-bit words.

        A tile read only as the B operand of tensor-core staged matmuls (K and V of attention)
        is stored as words ``(p, n)`` holding elements ``(2p, n)`` (low half) and ``(2p + 1, n)``:
        a B-fragment register of ``mma.m16n8k16`` as it is, so it costs one 32-bit shared load
        where the float32 tile cost two loads and a conversion, and the staging stores raw words
        (a thread loads two rows and interleaves them with ``pkl``/``pkh``). The pitch is 8 or
        24 mod 32 words: a warp's fragment reads (pair rows ``t``, columns ``g``) hit 32 banks.
        """
        out: dict[str, int] = {}
        for ld in self.p.loaders:
            t, tile = ld.out, ld.tile
            if not word_tile(ld) or tile[-2] % 2:
                continue
            readers = self.consumers(t)
            if not readers or not all(self.is_staged_mma(c) and c.inputs[1] is t and c.inputs[0] is not t
                                      for c in readers):
                continue
            nv = prod(tile) // ld.vw // 2
            if -(-nv // self.T) * ld.vw > PREFETCH_WORDS:  # two rows' words per pair of vectors
                continue
            pitch = tile[-1]
            while pitch % 32 not in (8, 24):
                pitch += 8 - pitch % 8
            out[self.bufname(t)] = pitch
        return out

    def raw_a_tiles(self) -> dict[str, int]:
        """Staged 16-bit tiles kept as the words they were loaded as (:meth:`KernelPlan.raw_a_tiles`):
        buffer name -> row pitch in words. A fragment then costs one 32-bit shared load where the
        float32 tile cost two loads, two conversions and a pack; the staging stores the loaded vectors
        as they are, and the tile takes half the shared memory."""
        by_guid = self.p.raw_a_tiles()
        return {self.bufname(ld.out): by_guid[ld.out.guid] for ld in self.p.loaders if ld.out.guid in by_guid}

    def async_tiles(self) -> dict[str, int]:
        """Staged 16-bit tiles copied by ``cp.async`` into a ring of ``options.async_stages`` stages: buffer
        name -> row pitch in 32-bit words.

        Those read only by tensor-core staged matmuls, as the A operand (raw A words) or only as the B
        operand, loaded in 16-byte vectors. A stage keeps the tile as loaded: word ``(r, w)`` holds
        elements ``(r, 2w)`` and ``(r, 2w + 1)``; an A fragment is one word of it, a B fragment one word
        transposed by ``movt`` (k rows are the tile's rows). The pitch is 4 mod 8 words (each row starts on
        16 bytes, and a warp's fragment reads of 8 rows x 4 words hit 32 banks). The copies hold no
        registers and need no store phase: ``async_stages - 1`` iterations are in flight, where the register
        staging keeps one (a weight stream limited by latency, ncu: Phi-3's SwiGLU at 63 % of DRAM). Measured
        slower all the same (twice the instructions; RESULTS.md "2026-11-29 (e)"): the tuner does not race it.
        """
        S = self.options.async_stages
        if not S or not self.options.mma or self.FR < 2 or self.depth > 1:
            return {}
        out: dict[str, int] = {}
        for ld in self.p.loaders:
            t, tile = ld.out, ld.tile
            if not word_tile(ld) or ld.vw // 2 != 4:
                continue
            name = self.bufname(t)
            if name in self.raw_a_pitch:
                out[name] = self.raw_a_pitch[name]
            elif self.async_b_tiles and self.b_operand_only(t):
                out[name] = raw_word_pitch(tile[-1])
        return out

    def b_operand_only(self, t: "STensor") -> bool:
        """Tile ``t`` is read, and only as the B operand of tensor-core staged matmuls."""
        readers = self.consumers(t)
        return bool(readers) and all(self.is_staged_mma(c) and c.inputs[1] is t and c.inputs[0] is not t
                                     for c in readers)

    def is_async(self, ld: Loader) -> bool:
        return self.bufname(ld.out) in self.async_pitch

    def async_words(self, name: str) -> int:
        """32-bit words of one stage of async tile ``name`` (its rows x its pitch)."""
        t = next(ld.out for ld in self.p.loaders if self.bufname(ld.out) == name)
        return t.numel() // t.dims[-1] * self.async_pitch[name]

    def async_off(self, name: str) -> str:
        """The offset of this iteration's stage in buffer ``name`` (``"0"`` for a tile that is not async)."""
        if name not in self.async_pitch:
            return "0"
        return f"cs{next(ld.index for ld in self.p.loaders if self.bufname(ld.out) == name)}"

    def issue_async(self, s: Src, ld: Loader, it: str, stage: str) -> None:
        """``cp.async`` copies of iteration ``it``'s tile of ``ld`` into ring stage ``stage`` (16 bytes each)."""
        name = self.bufname(ld.out)
        buf, pitch = self.planned(name), self.async_pitch[name]
        nv, nj = self.staged_vectors(ld)
        base = mul(f"({stage})" if not stage.isdigit() else stage, self.async_words(name))
        s.comment(f"cp.async {ld.out.name} {list(ld.tile)} of in{ld.index}, iteration {it} -> stage {stage}")
        for j in range(nj):
            v = f"(tid + {self.T * j})" if j else "tid"

            def one(s: Src, v: str = v) -> None:
                r, c = self.pair_vector(ld, v)
                s(f"cp16(sm, {buf.at(add(base, mul(r, pitch), mul(c, 4)))}, in{ld.index}, "
                  f"{self.staged_word(ld, v, it)})")

            if (j + 1) * self.T > nv:
                with s.block(f"if {v} < {nv}:"):
                    one(s)
            else:
                one(s)

    def paired(self, ld: Loader) -> bool:
        return self.bufname(ld.out) in self.pair_pitch

    def raw_b_tiles(self) -> dict[str, int]:
        """Staged 16-bit tiles read only as the B operand of tensor-core staged matmuls, kept as loaded for
        ``ldmatrix.trans`` fragments (``CodegenOptions.ldmatrix``): buffer name -> row pitch in words, 4 mod 8
        (16-byte rows, and a matrix's 8 rows hit 32 banks). Tiles of a cp.async ring are kept so already."""
        out: dict[str, int] = {}
        for ld in self.p.loaders:
            t, tile = ld.out, ld.tile
            name = self.bufname(t)
            if not word_tile(ld) or name in self.async_pitch or tile[-1] % 8:
                continue
            if self.b_operand_only(t):
                out[name] = raw_word_pitch(tile[-1])
        return out

    def raw_pitch(self, name: str) -> int:
        """Row pitch in words of a tile kept as its loaded words (A, or B for ldmatrix)."""
        return self.raw_a_pitch.get(name) or self.raw_b_pitch[name]

    def raw_a(self, ld: Loader) -> bool:
        """The tile is kept as its loaded words (an A tile, or a B tile for ldmatrix)."""
        return self.bufname(ld.out) in self.raw_a_pitch or self.bufname(ld.out) in self.raw_b_pitch

    def store_raw(self, s: Src, ld: Loader, v: str, reg: str) -> None:
        """Store vector ``v``'s loaded words as they are (row ``v // nvr``, its ``vw / 2`` words)."""
        buf = self.planned(self.bufname(ld.out))
        nw = ld.vw // 2
        words = [f"u2f({reg}[{q}])" for q in range(nw)] if nw > 1 else [f"u2f({reg})"]
        p, c = self.pair_vector(ld, v)
        base = add(mul(p, self.raw_pitch(buf.name)), mul(c, nw))
        if nw == 1:
            s(f"{buf.ref(base)} = {words[0]}")
            return
        s(f"sts{nw}({buf.arg(base)}, {', '.join(words)})")

    def staged_vectors(self, ld: Loader) -> tuple[int, int]:
        """Vectors of the staged tile (pairs of vectors of rows 2p, 2p + 1 for a k-pair tile), per thread."""
        nv = prod(ld.tile) // ld.vw // (2 if self.paired(ld) else 1)
        return nv, -(-nv // self.T)

    def staged_words(self, ld: Loader) -> int:
        """Registers a thread holds per staged vector (both rows of a k-pair tile)."""
        return max(1, ld.vw // self.loader_unit(ld)) * (2 if self.paired(ld) else 1)

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
        return nj * self.staged_words(ld) <= PREFETCH_WORDS

    def staged_piped(self, ld: Loader) -> bool:
        """A staged tile loaded into registers an iteration (or ``depth`` iterations) ahead."""
        if self.FR <= 1 or ld.invariant or ld.mode != "staged" or not self.staged_prefetchable(ld) or self.is_async(ld):
            return False
        _, nj = self.staged_vectors(ld)
        return self.depth == 1 or nj * self.staged_words(ld) * self.depth <= PREFETCH_WORDS

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
            if self.paired(ld):  # rows 2p and 2p + 1 of the same columns
                lo, hi = self.pair_words(ld, f"vi{j}", it)
                s(f"{prefix}{ld.index}_{j} = {self.load_expr(ld, lo)}")
                s(f"{prefix}{ld.index}_{j}h = {self.load_expr(ld, hi)}")
            else:
                s(f"{prefix}{ld.index}_{j} = {self.load_expr(ld, self.staged_word(ld, f'vi{j}', it))}")
        return True

    @staticmethod
    def pair_vector(ld: Loader, v: str) -> tuple[str, str]:
        """Pair row and vector column of pair-vector ``v`` (``nvr`` vectors per row)."""
        nvr = ld.tile[-1] // ld.vw
        return (f"{v} // {nvr}", f"{v} % {nvr}") if nvr > 1 else (v, "0")

    def pair_words(self, ld: Loader, v: str, it: str) -> tuple[str, str]:
        """First words of the two row vectors (rows 2p, 2p + 1) of pair-vector ``v``."""
        unit = self.loader_unit(ld)
        rs = row_strides(ld.dims)[-2] // unit
        p, c = self.pair_vector(ld, v)
        lo = add(self.loader_word(ld, it), mul(p, 2 * rs), mul(c, ld.vw // unit))
        return lo, add(lo, str(rs))

    def store_pairs(self, s: Src, ld: Loader, v: str, reg: str) -> None:
        """Interleave the two rows' words of pair-vector ``v`` into k-pair words and store them."""
        buf = self.planned(self.bufname(ld.out))
        nw = ld.vw // 2
        lo = [f"{reg}[{q}]" for q in range(nw)] if nw > 1 else [reg]
        hi = [f"{reg}h[{q}]" for q in range(nw)] if nw > 1 else [f"{reg}h"]
        words = [f"u2f({f}({a}, {b}))" for a, b in zip(lo, hi) for f in ("pkl", "pkh")]
        p, c = self.pair_vector(ld, v)
        base = add(mul(p, self.pair_pitch[buf.name]), mul(c, ld.vw))
        n = 4 if len(words) % 4 == 0 else 2
        for h in range(0, len(words), n):
            s(f"sts{n}({buf.arg(add(base, str(h)))}, {', '.join(words[h:h + n])})")

    def staged_copy(self, ld: Loader, prefetched: bool) -> bool:
        """Whether the staged tile gets a float32 copy in a buffer.

        A tile read only by tensor-core matmuls (its words are the A fragments) and by
        register-fused accumulators (``prefetched`` tiles only) needs none.
        """
        fused = self.fused_acc.get(ld.index, []) if prefetched else []
        return not all(self.frag_direct_reader(c, ld) or c in fused for c in self.consumers(ld.out))

    def store_staged(self, s: Src, ld: Loader, prefetched: bool) -> None:
        nv, nj = self.staged_vectors(ld)
        direct = [st for st in self.p.streams if st.mma and st.frag_owner and st.frag_direct is ld]
        fused = self.fused_acc.get(ld.index, []) if prefetched else []
        buf = self.tbuf(ld.out, "persistent" if ld.invariant else "loop") if self.staged_copy(ld, prefetched) else None
        self.stage(s, writes=({buf.name} if buf else set()) | {f"frag{st.frag_offset}" for st in direct})

        def store(s: Src, v: str, reg: str, j: int | None = None) -> None:
            if self.paired(ld):
                self.store_pairs(s, ld, v, reg)
                return
            raw = self.raw_a(ld) and buf is not None
            if raw:
                self.store_raw(s, ld, v, reg)
                if not (fused and j is not None):
                    return
            xs = self.decode(ld, reg)
            if fused and j is not None:  # sum / mean / rms of each row, straight from the registers
                names = [f"xh{ld.index}_{j}_{q}" for q in range(len(xs))]
                s("; ".join(f"{nm} = {x}" for nm, x in zip(names, xs)))
                xs = names
                for op in fused:
                    terms = [f"{x} * {x}" if op.attrs["acc"] == "rms" else x for x in xs]
                    s(f"qf{op.guid}_{j} += {' + '.join(terms)}")
            if buf is not None and not raw:
                n = 4 if len(xs) % 4 == 0 else 2 if len(xs) % 2 == 0 else 1
                base = mul(v, ld.vw)
                for h in range(0, len(xs), n):
                    if n == 1:
                        s(f"{self.ref_buf(buf, add(base, str(h)))} = {xs[h]}")
                    else:  # one 16- or 8-byte shared store (buffers start on 16 bytes; vw is a multiple of n)
                        s(f"sts{n}({self.buf_arg(buf, add(base, str(h)))}, {', '.join(xs[h:h + n])})")
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
