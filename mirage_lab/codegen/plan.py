"""Analysis of one block graph before its kernel is emitted.

Decides, from the μGraph alone:

* how each input loader reads global memory: the widest vector load (16, 8, 4 or 2 bytes)
  the tile's last dim allows, and whether its tile is *staged* in shared memory or
  *streamed*: read straight into registers by the one matmul that consumes it (the
  skinny-matmul fast path: ``A[M<=16, K] @ B[K, N]`` with B a loader tile; threads split K,
  each keeps ``M x vw`` partial sums in registers, one cross-thread reduction at the end);
* which tensors are materialized (chain outputs, accumulator results) and where: a shared
  memory pool (float32) or, past the 48 KB a numba kernel can declare statically, a
  per-block global scratch area;
* the thread mapping of every accumulator (registers when each thread owns a few elements).

    >>> plan = KernelPlan(bg)                      # doctest: +SKIP
    >>> [l.mode for l in plan.loaders]             # doctest: +SKIP
    ['staged', 'streamed']
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import CodegenError
from ..ir.thread_graph import FusionChain
from .source import prod, row_strides

if TYPE_CHECKING:  # pragma: no cover
    from ..ir.block_graph import BlockGraph, STensor, TBOp

STATIC_SMEM_KB = 48                 # numba declares shared arrays statically: 48 KB; more only as dynamic shared memory
MAX_SMEM_KB = 227                   # the most one block may opt in to on sm_90 (228 KB an SM, 1 KB reserved)
MAX_REG_ELEMS = 16                  # per-thread accumulator elements kept in scalar registers
MAX_STREAM_ACC = 64                 # M * vw partial sums per thread for a streamed matmul
MAX_STREAM_RED_FLOATS = 4096        # per-iteration cross-thread reduction buffer (16 KB)
AXIS_VARS = ("bx", "by", "bz")      # the generated kernels' names of blockIdx.x / .y / .z
PREFETCH_WORDS = 64                 # staged-loader words a thread may hold in registers at the loop top
MAX_MMA_ACC = 64                    # float32 sums a thread may keep across the loop for a staged tensor-core matmul
# registers per thread for the A fragments of a loop-invariant tile packed once before the loop
MAX_HOISTED_FRAGS = 32
# register-blocked tensor-core loops (staged_mma): mma a loop body may have written out, and the block of a warp
# from which its k loop stays rolled (measured on the H200, benchmarks/RESULTS.md "2026-11-29 (d)")
MAX_UNROLLED_MMA = 32
ROLLED_MMA_BLOCK = 8
MAX_SPLIT = 16                      # blocks that may share one tile's loop (CodegenOptions.split)


@dataclass(frozen=True)
class CodegenOptions:
    """Lowering knobs that change speed, never results; part of a compiled module's cache key.

    ``pipeline_words``: 32-bit words per thread that streamed operands may hold in registers
    for later iterations (0 disables the cross-iteration prefetch). ``pipeline_depth``: how
    many iterations ahead those loads (and the register-prefetched staged tiles) are issued:
    1 double-buffers; more keeps several tiles in flight per SM, which a latency-bound
    weight stream needs to reach the HBM bandwidth. ``max_registers``: a cap
    passed to ptxas (``None``: its own choice). ``max_stream_acc``: partial sums per thread a
    streamed matmul may keep (``M * vw``). ``phase_words``: words of a streamed tile each
    thread issues at once (all of them when the tile fits). ``mma``: streamed matmuls whose
    shape allows it run on the tensor cores (``mma.sync.m16n8k16`` through inline PTX, sm_80+;
    the CUDA simulator runs an emulation of the instruction). Its A operand is rounded to the
    16-bit type of B (exact when A is a loaded 16-bit tile) and its sums are added in another
    order, so results can differ from the FMA path by rounding. ``mma_b16``: a tensor-core
    stream whose warps cover 32 columns of B (where the 64-column layout does not fit) reads
    B with 16-byte loads of 8 columns from 2 rows per k-step and transposes them into B
    fragments with ``movmatrix.sync.aligned.m8n8.trans.b16`` (sm_75+): the ``mv`` layout of
    :meth:`KernelPlan._mma_stream`; without it such a stream reads 8-byte loads from 4 rows.
    It only matters with ``mma``. ``smem_kb``: the shared-memory pool a block may use; past the 48 KB
    numba declares statically, the pool becomes dynamic shared memory, opted in at launch
    (``_Launch._opt_in``, up to ``MAX_SMEM_KB`` on sm_90), instead of the buffers that do not fit
    moving to a global scratch area. The tuner adds such a twin to every lowering that spills
    (``pipeline.variants._smem_variant``). ``async_stages``: 16-bit tiles that only tensor-core staged
    matmuls read are copied global -> shared by ``cp.async`` (sm_80+) into a ring of that many
    shared-memory stages, ``async_stages - 1`` iterations ahead, with no registers held and no store
    phase (0: the register-prefetched staging). It only matters with ``mma``. ``ldmatrix``: register-blocked
    tensor-core loops read their fragments with ``ldmatrix``: a warp's 4 A registers of a tile kept as loaded in
    one ``ldmatrix.x4``, and B tiles kept as loaded (k-major, not k-pair words) with two column tiles' registers in
    one ``ldmatrix.x4.trans`` (sm_75+); the tuner's tensor-core option sets use it where such a loop reads by it.
    ``split``: blocks that share one tile of the grid, each running ``forloop_range / split`` of its loop's
    iterations (split-K across blocks, the μGraph unchanged): each block writes its accumulators' sums, before
    they are finished, to global scratch, and the last of them to arrive (an atomic counter per tile, reset by
    that block) adds the ``split`` partial sums in a fixed order and runs the work after the loop. A grid with
    fewer blocks than SMs keeps more loads in flight (H200, a 168 MB weight read in 256-byte strips: 63.7 µs
    one block a strip, 45.9 with two and the combine; RESULTS.md "2026-11-29 (h)").

    >>> CodegenOptions(pipeline_words=32).tag()
    'pw32-regNone-acc128'
    >>> CodegenOptions(mma=True).tag()
    'pw0-regNone-acc128-mma'
    >>> CodegenOptions(mma=True, pipeline_words=64, pipeline_depth=3).tag()
    'pw64x3-regNone-acc128-mma'
    >>> CodegenOptions(mma=True, mma_b16=True).tag(), CodegenOptions(mma_b16=True).tag()
    ('pw0-regNone-acc128-mma-mv', 'pw0-regNone-acc128')
    >>> CodegenOptions(mma=True, smem_kb=200).tag()
    'pw0-regNone-acc128-smem200-mma'
    >>> CodegenOptions(mma=True, smem_kb=200, async_stages=3).tag()
    'pw0-regNone-acc128-smem200-cp3-mma'
    >>> CodegenOptions(mma=True, ldmatrix=True).tag()
    'pw0-regNone-acc128-ldsm-mma'
    >>> CodegenOptions(mma=True, split=2).tag()
    'pw0-regNone-acc128-sk2-mma'
    """

    pipeline_words: int = 0      # measured on an H100: no gain, more registers (benchmarks/RESULTS.md)
    max_registers: int | None = None
    max_stream_acc: int = 128
    phase_words: int = 32        # words of a streamed tile issued together (the rest follow mid-stage)
    mma: bool = False            # tensor-core streamed matmuls
    pipeline_depth: int = 1      # iterations ahead the prefetched loads run
    mma_b16: bool = False        # tensor-core streams of 32-column warps: 16-byte B loads + movmatrix
    smem_kb: int = STATIC_SMEM_KB   # the shared-memory pool; above 48, dynamic shared memory
    async_stages: int = 0        # cp.async ring of staged tensor-core tiles (0: register prefetch)
    ldmatrix: bool = False       # fragments of register-blocked tensor-core loops by ldmatrix
    split: int = 1               # blocks sharing a tile, each a part of the loop (split-K; 1: off)

    def __post_init__(self) -> None:
        if not isinstance(self.split, int) or not 1 <= self.split <= MAX_SPLIT:
            raise ValueError(f"split must be an int from 1 to {MAX_SPLIT}, got {self.split!r}")
        if not isinstance(self.async_stages, int) or self.async_stages not in (0, 2, 3, 4):
            raise ValueError(f"async_stages must be 0 (off) or 2, 3 or 4, got {self.async_stages!r}")
        if not isinstance(self.pipeline_depth, int) or self.pipeline_depth < 1:
            raise ValueError(f"pipeline_depth must be an int >= 1, got {self.pipeline_depth!r}")
        if not isinstance(self.smem_kb, int) or not STATIC_SMEM_KB <= self.smem_kb <= MAX_SMEM_KB:
            raise ValueError(f"smem_kb must be an int from {STATIC_SMEM_KB} to {MAX_SMEM_KB}, got {self.smem_kb!r}")

    @property
    def pool_floats(self) -> int:
        """The shared-memory pool's size in 32-bit words."""
        return self.smem_kb * 1024 // 4

    def tag(self) -> str:
        depth = f"x{self.pipeline_depth}" if self.pipeline_depth > 1 else ""
        t = f"pw{self.pipeline_words}{depth}-reg{self.max_registers}-acc{self.max_stream_acc}"
        t = t if self.phase_words == 32 else f"{t}-ph{self.phase_words}"
        t = t if self.smem_kb == STATIC_SMEM_KB else f"{t}-smem{self.smem_kb}"
        t = f"{t}-cp{self.async_stages}" if self.async_stages and self.mma else t
        t = f"{t}-ldsm" if self.ldmatrix and self.mma else t
        t = f"{t}-sk{self.split}" if self.split > 1 else t
        if not self.mma:
            return t
        return f"{t}-mma-mv" if self.mma_b16 else f"{t}-mma"

    def astuple(self) -> tuple:
        """Positional arguments that rebuild these options (worker processes get them)."""
        return (self.pipeline_words, self.max_registers, self.max_stream_acc, self.phase_words, self.mma,
                self.pipeline_depth, self.mma_b16, self.smem_kb, self.async_stages, self.ldmatrix, self.split)


DEFAULT_OPTIONS = CodegenOptions()


@dataclass
class Loader:
    """How one input loader reads its tile."""

    op: "TBOp"
    index: int
    dims: tuple[int, ...]          # the whole DTensor
    tile: tuple[int, ...]
    imap: tuple[int, int, int]
    fmap: int
    dtype: str                     # float16 | bfloat16 | float32
    epw: int                       # elements per 32-bit word (2 for 16-bit types; 1 for f32)
    view: str                      # "int32" (word view) or "int16" (odd last dim, 16-bit types)
    vw: int                        # elements per vector load
    mode: str = "staged"           # staged | streamed
    invariant: bool = False        # same tile every iteration: loaded once before the loop

    @property
    def words_per_vec(self) -> int:
        return max(1, self.vw // self.epw)

    @property
    def out(self) -> "STensor":
        return self.op.outputs[0]


@dataclass
class Stream:
    """A matmul whose B operand is streamed from global memory into registers."""

    chain: FusionChain
    op: "TBOp"
    loader: Loader
    M: int
    K: int
    N: int
    vw: int                        # elements of B per thread per row (one vector load)
    NC: int                        # column chunks: N / vw
    G: int                         # k-groups: threads split K into G interleaved sets of rows
    KR: int                        # rows per thread: K / G
    persistent: bool               # chain is exactly [matmul, accum(None)]: reduce once after the loop
    phase_rows: int = 1
    # tensor-core layout (``mma``): each warp owns 8*vw columns and every GW-th k-step of 16 rows;
    # lane (g, t) loads rows 4t..4t+3 of a k-step, columns g*vw..g*vw+vw-1 (one vector load each)
    mma: bool = False
    # the movmatrix layout (``mv``, vw = 4: 32 columns per warp): lane (g, t) loads rows g and
    # 8 + g of a k-step, columns 8t..8t+7 (two 16-byte loads); A fragments in the standard k order
    mv: bool = False
    NCW: int = 0                   # warps across the columns: N / (8 * vw)
    KS: int = 0                    # k-steps (16 rows) per warp per iteration: K / 16 / G (G = warps along K)
    AR: int = 4                    # A-fragment registers per lane: 4, or 2 when M <= 8 (rows 8..15 are zero)
    frag_offset: int = 0           # first word of this stream's A fragments in the int32 shared array
    frag_owner: bool = True        # this stream converts them (False: an earlier stream with the same A did)
    frag_direct: "Loader | None" = None  # A is this staged 16-bit loader tile: its loaded words are the pairs
    CW: int = 1                    # column chunks of 8*vw per warp (> 1 where the warps cannot split N evenly)

    @property
    def phases(self) -> list[range]:
        n = self.KS if self.mma else self.KR
        return [range(p, min(n, p + self.phase_rows)) for p in range(0, n, self.phase_rows)]

    @property
    def words(self) -> int:
        """32-bit words of B each thread loads per iteration."""
        if self.mv:
            return 2 * 4 * self.KS  # two 16-byte loads per k-step
        return (4 * self.KS * self.CW if self.mma else self.KR) * max(1, self.vw // 2)

    @property
    def frag_words(self) -> int:
        """Words of packed A fragments per iteration: (K/16 k-steps) x AR registers x 32 lanes."""
        return (self.K // 16) * self.AR * 32 if self.mma else 0


@dataclass
class Buf:
    """A materialized tile: ``numel`` float32 values in the smem pool or the global scratch."""

    name: str
    numel: int
    region: str                    # persistent | loop | post
    space: str = "smem"            # smem | gmem
    offset: int = 0

    def at(self, idx: str) -> str:
        """The index of element ``idx`` in the kernel's array (``sm`` or ``scr``).

        >>> Buf("t3", 64, "loop", offset=16).at("e0"), Buf("t3", 64, "loop").at("e0")
        ('16 + e0', 'e0')
        >>> Buf("t3", 64, "loop", "gmem", 16).at("0"), Buf("t3", 64, "loop", "gmem").at("0")
        ('sbase + 16', 'sbase')
        """
        terms = (["sbase"] if self.space == "gmem" else []) + ([str(self.offset)] if self.offset else [])
        terms += [idx] if idx != "0" or not terms else []
        return " + ".join(terms)

    def ref(self, idx: str) -> str:
        """Element ``idx`` of this buffer: ``sm[...]`` or ``scr[...]``.

        >>> Buf("t3", 64, "loop", offset=16).ref("e0")
        'sm[16 + e0]'
        """
        return f"{'sm' if self.space == 'smem' else 'scr'}[{self.at(idx)}]"

    def arg(self, idx: str) -> str:
        """The (array, index) arguments naming element ``idx``, for the prelude's vector stores.

        >>> Buf("t3", 64, "loop", "gmem").arg("v * 4")
        'scr, sbase + v * 4'
        """
        return f"{'sm' if self.space == 'smem' else 'scr'}, {self.at(idx)}"


def _dtype_epw(name: str) -> int:
    return 1 if name == "float32" else 2


class KernelPlan:
    """Everything the emitter needs to know about a block graph, decided once."""

    def __init__(self, bg: "BlockGraph", name: str = "k0", options: CodegenOptions = DEFAULT_OPTIONS) -> None:
        self.bg = bg
        self.options = options
        self.name = name
        self.T = prod(bg.block_dim)
        self.FR = bg.forloop_range
        self.tg = bg.thread_graph()
        self.chains: list[FusionChain] = list(self.tg.chains)
        self.consumers: dict[int, list["TBOp"]] = {}
        for op in bg.ops:
            for t in op.inputs:
                self.consumers.setdefault(t.guid, []).append(op)
        for op in bg.ops:
            if op.op_type not in ("input", "output") and not op.outputs:
                raise CodegenError(f"block op {op!r} has no output")
        for t in bg.tensors:
            if t.dtype.name not in ("float16", "bfloat16", "float32"):
                raise CodegenError(f"unsupported dtype {t.dtype.name} in block graph")
        self.loaders = [self._loader(i, op) for i, op in enumerate(bg.input_ops)]
        self.loader_of = {ld.out.guid: ld for ld in self.loaders}
        self.streams: list[Stream] = []
        for ch in self.chains:
            s = self._stream(ch)
            if s is not None:
                s.loader.mode = "streamed"
                s.loader.vw = 8 if s.mv else s.vw  # one vector load per thread and row of B
                self.streams.append(s)
        self.stream_of = {s.op.guid: s for s in self.streams}
        self.int_words = 0             # int32 shared memory (packed A fragments of mma streams)
        frags: dict[tuple, int] = {}
        for s in self.streams:
            if not s.mma:
                continue
            key = (s.op.inputs[0].guid, s.K, s.AR, s.loader.dtype, s.mv)  # mv: another k order
            if key in frags:  # the same A operand: its fragments are converted once
                s.frag_offset, s.frag_owner = frags[key], False
                continue
            s.frag_offset = frags[key] = self.int_words
            self.int_words += s.frag_words
            a = s.op.inputs[0]
            la = self.loader_of.get(a.guid)
            if (la is not None and la.mode == "staged" and la.dtype == s.loader.dtype and la.view == "int32"
                    and tuple(la.tile) == (s.M, s.K) and la.vw % 2 == 0):
                s.frag_direct = la      # written from the loader's registers when the tile is staged
        for s in self.streams:
            if s.mma and not s.frag_owner:
                s.frag_direct = next(o.frag_direct for o in self.streams if o.mma and o.frag_owner
                                     and o.frag_offset == s.frag_offset)
        self.bufs: dict[str, Buf] = {}   # declared in the order the kernel's stages first use them
        self.placed = False                # allocate() has given every buffer its place

    # ------------------------------------------------------------------ loaders
    def _loader(self, i: int, op: "TBOp") -> Loader:
        dims = tuple(op.attrs["dtensor_dims"])
        tile = op.outputs[0].dims
        dt = op.outputs[0].dtype.name
        epw = _dtype_epw(dt)
        if epw == 2 and (dims[-1] % 2 or tile[-1] % 2):  # an odd tile width (a 1-wide column) is not word-aligned
            view, vw = "int16", 1
        else:
            view = "int32"
            vw = epw
            for cand in (4 * epw, 2 * epw):
                if tile[-1] % cand == 0:
                    vw = cand
                    break
        fmap = op.attrs["forloop_dim"]
        return Loader(op, i, dims, tile, tuple(op.attrs["input_map"]), fmap, dt, epw, view, vw,
                      invariant=fmap < 0 and self.FR > 1)

    def _stream(self, ch: FusionChain) -> Stream | None:
        op = ch.lead
        if op.op_type != "matmul":
            return None
        a, b = op.inputs
        ld = self.loader_of.get(b.guid)
        if ld is None or ld.invariant or ld.view != "int32" or ld.epw != 2:
            return None
        if len(self.consumers.get(b.guid, [])) != 1 or a.guid == b.guid:
            return None
        M, K, N = a.dims[-2], a.dims[-1], b.dims[-1]
        persistent = len(ch.ops) == 2 and ch.ops[1].op_type == "forloop_accum" and ch.ops[1].attrs["acc"] is None
        if self.options.mma:
            st = self._mma_stream(ch, op, ld, M, K, N, persistent)
            if st is not None:
                return st
            if staged_mma_fits(op, self.T, self.options, padded=M > 16):
                # wider than 16 rows: both tiles staged, on tensor cores (the emitter's staged mma), the
                # last row of tiles padded where M is not a multiple of 16; up to 16 rows the stream stays
                return None
        for vw in (8, 4, 2):
            # registers: M*vw partial sums; per-iteration reductions also need T*M*vw floats of smem
            if N % vw or M * vw > self.options.max_stream_acc or N // vw > self.T:
                continue
            if not persistent and self.T * M * vw > MAX_STREAM_RED_FLOATS:
                continue
            break
        else:
            return None
        NC = N // vw
        G = max(d for d in range(1, self.T // NC + 1) if K % d == 0)
        words = vw // 2
        return Stream(ch, op, ld, M, K, N, vw, NC, G, K // G, persistent,
                      phase_rows=max(1, self.options.phase_words // words))

    def _mma_stream(self, ch: FusionChain, op: "TBOp", ld: Loader, M: int, K: int, N: int,
                    persistent: bool) -> Stream | None:
        """The tensor-core layout of ``A[M<=16, K] @ B[K, N]``, or None where it does not fit.

        One ``mma.m16n8k16`` takes A as 16 rows x 16 k (rows past M are zero) and 8 columns of
        B; a lane's vector load of one B row holds ``vw`` consecutive columns, so it feeds
        ``vw`` instructions, and a warp covers ``8 * vw`` columns. Warps split the columns
        (NCW) and then the k-steps (G); the G partial sums are added after the loop.

        Where no such split fits (80 columns over 4 warps: five 16-column chunks), each warp takes
        ``CW`` chunks of ``8 * vw`` columns (``CW`` vector loads per row), so any N that is a multiple of
        16 streams on tensor cores: the balanced column tiles of decode matmuls (LLaMA-3 70B's QKV, N =
        10240 over 128 blocks: 80 columns) are often such widths.

        Where 64-column warps do not fit and ``options.mma_b16`` is set, the ``mv`` layout
        (32 columns per warp, 16-byte loads) comes before the 8-byte one: lane (g, t) loads
        rows 8h + g (h = 0, 1) of a k-step, columns 8t..8t+7. Word w of load h, across the
        warp, is an 8x8 b16 matrix (row g, column c = physical column 8(c//2) + 2w + c%2);
        ``movmatrix.trans`` of it hands lane (g, t) the pair of rows 8h + 2t, 8h + 2t + 1 of
        column 8(g//2) + 2w + g%2: b0 (h = 0) and b1 (h = 1) of tile w, in the standard k
        order. Tile w's output columns 2t, 2t + 1 are physical columns 8t + 2w, 8t + 2w + 1.
        """
        W = self.T // 32
        if M > 16 or K % 16 or self.T % 32 or W == 0 or ld.dtype not in ("float16", "bfloat16"):
            return None
        steps = K // 16
        layouts = [(8, False)] + ([(4, True)] if self.options.mma_b16 else []) + [(4, False), (2, False)]
        # first the layouts with one chunk per warp; then several chunks per warp, the widest vectors first
        for several in (False, True):
            for vw, mv in layouts:
                if N % (8 * vw) or (8 if mv else vw) > ld.vw or (several and mv):
                    continue
                chunks = N // (8 * vw)
                NCW = math.gcd(W, chunks) if several else chunks
                if W % NCW or (several and NCW == chunks):
                    continue
                CW, G = chunks // NCW, W // NCW
                if steps % G:
                    continue
                if not persistent and G * M * N > MAX_STREAM_RED_FLOATS:
                    continue
                KS = steps // G
                return Stream(ch, op, ld, M, K, N, vw, NCW, G, KS * 16, persistent,
                              phase_rows=max(1, self.options.phase_words // (2 * vw * CW)),
                              mma=True, mv=mv, NCW=NCW, KS=KS, AR=4 if M > 8 else 2, CW=CW)
        return None

    # ------------------------------------------------------------------ buffers
    def raw_a_tiles(self) -> dict[int, int]:
        """Staged 16-bit loader tiles read only as the A operand of tensor-core staged matmuls: tile guid ->
        row pitch in 32-bit words. They keep the words they were loaded as (:meth:`LoaderEmitter.raw_a_tiles`):
        word ``(m, p)`` holds elements ``(m, 2p)`` and ``(m, 2p + 1)``, an A-fragment register as it is. The
        pitch is 4 mod 8 words, so a warp's fragment reads (rows ``g``, pairs ``t``) hit 32 banks.
        """
        out: dict[int, int] = {}
        for ld in self.loaders:
            t, tile = ld.out, ld.tile
            if not word_tile(ld):
                continue
            readers = self.consumers.get(t.guid, [])
            if readers and all(c.op_type == "matmul" and c.guid not in self.stream_of and c.inputs[0] is t
                               and c.inputs[1] is not t and staged_mma_fits(c, self.T, self.options)
                               for c in readers):
                out[t.guid] = raw_word_pitch(tile[-1])
        return out

    def buf(self, name: str, numel: int, region: str) -> Buf:
        """The buffer ``name``: declared (before :meth:`allocate`) or looked up (after it).

        Buffers are planned before the kernel text is emitted; the emitter's stages look their
        buffers up here, and one that was not planned, or is used past its planned size, is an
        internal error.
        """
        b = self.bufs.get(name)
        if b is None and not self.placed:
            b = self.bufs[name] = Buf(name, numel, region)
        if b is None or numel > b.numel:
            raise CodegenError(f"internal: buffer {name} ({numel} floats) was not planned for kernel {self.name}")
        return b

    def allocate(self) -> tuple[int, int]:
        """Place buffers: persistent first, then loop and post regions aliased. Returns (pool, scratch) floats.

        Buffers that do not fit the pool (48 KB, or ``options.smem_kb``) move to global scratch,
        largest first. No buffer can be declared afterwards.
        """
        self.placed = True
        bufs = list(self.bufs.values())

        def al(n: int) -> int:  # every buffer starts on 16 bytes: staged tiles are stored 4 floats at a time
            return -(-n // 4) * 4

        def layout() -> int:
            pers = [b for b in bufs if b.region == "persistent" and b.space == "smem"]
            off = 0
            for b in pers:
                b.offset = off
                off += al(b.numel)
            peak = off
            for region in ("loop", "post"):
                o = off
                for b in bufs:
                    if b.region == region and b.space == "smem":
                        b.offset = o
                        o += al(b.numel)
                peak = max(peak, o)
            return peak

        pool = layout()
        while pool > self.options.pool_floats - self.int_words:
            cands = [b for b in bufs if b.space == "smem"]
            if not cands:
                break
            max(cands, key=lambda b: b.numel).space = "gmem"
            pool = layout()
        scratch = 0
        for b in bufs:
            if b.space == "gmem":
                b.offset = scratch
                scratch += al(b.numel)
        return pool, scratch


def word_tile(ld: Loader) -> bool:
    """A staged, looped 16-bit loader tile of one matrix whose vectors are 1, 2 or 4 words: one the
    staging can keep as 32-bit words of element pairs (k-pair B tiles, raw A tiles) instead of float32."""
    tile = ld.tile
    return (ld.mode == "staged" and not ld.invariant and ld.view == "int32" and ld.epw == 2 and len(tile) >= 2
            and prod(tile[:-2]) == 1 and tile[-1] % ld.vw == 0 and ld.vw // 2 in (1, 2, 4))


def mma_rows(m: int) -> int:
    """Rows of ``mma.m16n8k16`` tiles covering ``m`` rows: ``m`` rounded up to 16."""
    return -(-m // 16) * 16


def raw_word_pitch(cols: int) -> int:
    """Row pitch in 32-bit words of a 16-bit tile of ``cols`` columns kept as its loaded words: 4 mod 8, so each
    row starts on 16 bytes and a warp's fragment reads of 8 rows x 4 words (or an ldmatrix's 8 rows) hit 32 banks.

        >>> raw_word_pitch(64), raw_word_pitch(128)
        (36, 68)
    """
    return cols // 2 + (4 - cols // 2) % 8


def staged_mma_fits(op: "TBOp", threads: int, options: CodegenOptions, padded: bool = True) -> bool:
    """``A[M, K] @ B[K, N]`` of two 16-bit tiles in shared memory fits ``mma.m16n8k16`` tiles.

    With ``padded`` M need not be a multiple of 16: the last row of tiles reads A's last row again in
    place of the missing ones and drops their results (Falcon's 71 query heads over one KV head: 80
    rows of tensor-core work instead of the FMA path). Without it, the exact fit only.

    >>> from mirage_lab.examples import gqa_flashdecoding
    >>> bg = gqa_flashdecoding(1, 32, 16, 64, kv_splits=2, q_blocks=1, forloop_range=2).customized_ops[0].block_graph
    >>> [staged_mma_fits(op, 128, CodegenOptions(mma=True)) for op in bg.ops if op.op_type == "matmul"]
    [True, True]
    """
    a, b = op.inputs
    dts = {a.dtype.name, b.dtype.name}
    M, K, N = a.dims[-2], a.dims[-1], b.dims[-1]
    return (options.mma and len(dts) == 1 and dts <= {"float16", "bfloat16"} and threads % 32 == 0
            and prod(a.dims[:-2]) == 1 and prod(b.dims[:-2]) == 1 and (padded or M % 16 == 0)
            and N % 8 == 0 and K % 16 == 0)


def loader_strides(ld: Loader) -> list[int]:
    return row_strides(ld.dims)
