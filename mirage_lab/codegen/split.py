"""Split-K across blocks (``CodegenOptions.split``): several blocks share one tile of the grid.

Each of the ``split`` blocks of a tile runs ``forloop_range / split`` consecutive iterations of the loop
(its loaders start ``ks * iterations`` tiles further along the loop's dim). After its loop a block
finishes its accumulators as far as their sums, before any scale, epilogue or sink (every accumulator
kind is a plain sum up to there), and writes those sums to its own area of the global scratch. A
fence, then an atomic add on the tile's counter: the block that arrives last adds the ``split`` areas
in a fixed order (results do not depend on which block is last), resets the counter for the next
launch, and runs the rest as an unsplit kernel would (scale, epilogue, the work after the loop, the
savers); the others return. Part of :mod:`.block_kernel`.

Accumulator sums reach the scratch by one of two ways: the finishing code's ``acc_finish`` and
``sink`` hand them over (``split_put``), or, for accumulators that live in a shared-memory buffer
after the loop, the buffer is copied (``split_carry``). Areas are 128-byte aligned, so a cache line
holds one block's sums only.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from ..errors import CodegenError
from .plan import AXIS_VARS
from .source import Src, add, mul

if TYPE_CHECKING:  # pragma: no cover
    from ..ir.block_graph import BlockGraph, STensor


LINE_FLOATS = 32     # 128 bytes: a block's area starts on its own cache line


def _aligned(n: int) -> int:
    return -(-n // LINE_FLOATS) * LINE_FLOATS


@dataclass
class _Carried:
    """One accumulator's sums in a block's scratch area."""

    offset: int                              # floats from the area's start
    numel: int
    # ``v`` holds the summed value of element ``e``: the rest of its path (None: back into ``target``'s buffer)
    finish: Callable[[Src, str], None] | None
    target: "STensor"                        # the tensor that ``finish`` writes (its buffer, or an output)


def split_problem(bg: "BlockGraph", split: int) -> str | None:
    """Why ``bg`` cannot split its loop over ``split`` blocks (None: it can).

    >>> from mirage_lab.examples import rms_norm_linear_fused
    >>> bg = rms_norm_linear_fused(4, 256, 256, grid=8, forloop_range=4).customized_ops[0].block_graph
    >>> split_problem(bg, 2) is None, split_problem(bg, 3)
    (True, 'split 3 does not divide the loop of 4 iterations')
    """
    if split <= 1:
        return None
    if bg.forloop_range % split:
        return f"split {split} does not divide the loop of {bg.forloop_range} iterations"
    if not any(op.op_type == "forloop_accum" for op in bg.ops):
        return "the block graph has no accumulator to split"
    return None


class SplitEmitter:
    """The split kernel's block indices, its partial sums' hand-over and the last block's combine."""

    def split_init(self) -> None:
        bg = self.bg
        # where this kernel's loop cannot split (as with the other options, a module's kernels take it where it
        # applies), it is lowered unsplit
        self.S = self.options.split if split_problem(bg, self.options.split) is None else 1
        self.FR_total = bg.forloop_range
        self.FR = self.FR_total // self.S          # the iterations one block runs
        self.tiles = bg.grid_dim[0] * bg.grid_dim[1] * bg.grid_dim[2]
        self._carried: dict[int, _Carried] = {}
        self._split_phase = False                  # True while the finishing code hands sums over
        self._ws_base = 0                          # floats: where the sums start in a block's scratch area
        self._ws_floats = 0
        self._accs = {op.outputs[0].guid: op.outputs[0] for op in bg.ops if op.op_type == "forloop_accum"}

    @property
    def split(self) -> bool:
        return self.S > 1

    def launch_grid(self) -> tuple[int, int, int]:
        g = self.bg.grid_dim
        return (g[0], g[1], g[2] * self.S)

    def block_indices(self, out: Src) -> None:
        """``bx``/``by``/``bz`` of the tile (and ``ks``, the block's part of the loop, when split)."""
        grid = self.bg.grid_dim
        for a in range(2):
            if grid[a] > 1:
                out(f"{AXIS_VARS[a]} = cuda.blockIdx.{'xy'[a]}")
        if not self.split:
            if grid[2] > 1:
                out("bz = cuda.blockIdx.z")
            return
        out("kz = cuda.blockIdx.z")
        if grid[2] > 1:
            out(f"ks = kz // {grid[2]}")
            out(f"bz = kz % {grid[2]}")
        else:
            out("ks = kz")

    def tile_linear(self) -> str:
        grid = self.bg.grid_dim
        return add(AXIS_VARS[0] if grid[0] > 1 else "0", mul("by", grid[0]) if grid[1] > 1 else "0",
                   mul("bz", grid[0] * grid[1]) if grid[2] > 1 else "0")

    def block_linear(self) -> str:
        """The launched block's index (tile and part): its scratch area."""
        return add(self.tile_linear(), mul("ks", self.tiles)) if self.split else self.tile_linear()

    def split_loop_offset(self, step: int) -> str:
        """The word offset of this block's first iteration along a looped loader (``step`` words an iteration)."""
        return mul("ks", self.FR * step) if self.split and step else "0"

    def area_floats(self, scratch: int) -> int:
        """Floats of a launched block's scratch: its buffers, then its sums (each part line-aligned)."""
        if not self.split:
            return scratch
        return _aligned(scratch) + _aligned(self._ws_floats)

    # ------------------------------------------------------------------ phase A: hand the sums over
    def split_takes(self, t: "STensor") -> bool:
        """Whether a value of accumulator tensor ``t`` is to be handed over instead of finished."""
        return self._split_phase and t.guid in self._accs

    def split_put(self, s: Src, t: "STensor", e: str, numel: int, finish: Callable[[Src, str], None],
                  target: "STensor", v: str = "v") -> None:
        """Write ``v`` (element ``e`` of accumulator ``t``'s sums) to this block's scratch area."""
        c = self._carried.get(t.guid) or self._carry(t, numel, finish, target)
        s(f"scr[{add('sbase', str(self._ws_base + c.offset), e)}] = {v}")

    def _carry(self, t: "STensor", numel: int, finish: Callable[[Src, str], None] | None,
               target: "STensor") -> _Carried:
        """The next line-aligned place in the area for accumulator ``t``'s ``numel`` sums."""
        c = self._carried[t.guid] = _Carried(self._ws_floats, numel, finish, target)
        self._ws_floats += _aligned(numel)
        return c

    def split_begin(self, scratch: int) -> None:
        self._ws_base = _aligned(scratch)
        self._split_phase = True

    def split_carry(self, s: Src) -> None:
        """Accumulators left in shared-memory buffers after the loop (not handed over): copied to the area."""
        bufs = self.p.bufs
        for guid in sorted(set(self._accs) - set(self._carried)):
            t = self._accs[guid]
            if self.bufname(t) not in bufs:
                if self.consumers(t):
                    raise CodegenError(f"internal: kernel {self.name}: accumulator {t.name} is read after the loop "
                                       "but neither handed over nor in a buffer")
                continue
            s.comment(f"{t.name}: this block's sums, from its buffer")
            self.stage(s, reads={self.bufname(t)})
            c = self._carry(t, t.numel(), None, t)
            self.per_element(s, c.numel, lambda s, e, i, t=t, c=c: s(
                f"scr[{add('sbase', str(self._ws_base + c.offset), e)}] = {self.ref(t, e)}"), unroll=False)

    # ------------------------------------------------------------------ the last block
    def split_arrive(self, s: Src) -> None:
        """Publish the sums; every block but the tile's last returns; the last resets the counter."""
        self._split_phase = False
        tile = self.tile_linear()
        s.comment(f"split-K: {self.S} blocks share this tile; the last to arrive adds their sums and finishes")
        s("cuda.threadfence()")
        s("cuda.syncthreads()")
        s("kl = 0")
        with s.block("if tid == 0:"):
            with s.block(f"if cuda.atomic.add(cnt, {tile}, 1) == {self.S - 1}:"):
                s("kl = 1")
        with s.block("if cuda.syncthreads_or(kl) == 0:"):
            s("return")
        s("cuda.threadfence()")
        with s.block("if tid == 0:"):
            s(f"cnt[{tile}] = 0")
        self.sync.clear()

    def split_combine(self, s: Src, scratch: int) -> None:
        """The ``S`` blocks' sums of each accumulator, added in block order, down the rest of its path."""
        area = self.area_floats(scratch)
        s(f"tb = {mul(self.tile_linear(), area)}")
        for c in self._carried.values():
            def total(e: str, base: int = self._ws_base + c.offset) -> str:   # the S blocks' sums of element e
                return " + ".join(f"scr[{add('tb', str(base + k * self.tiles * area), e)}]" for k in range(self.S))

            t = c.target
            if c.finish is None:   # back into its shared-memory buffer
                s.comment(f"{t.name} = the sum of the {self.S} blocks' buffers")
                self.stage(s, writes={self.bufname(t)})
                self.per_element(s, c.numel, lambda s, e, i, t=t, total=total: s(f"{self.ref(t, e)} = {total(e)}"),
                                 unroll=False)
                continue
            s.comment(f"{t.name} <- the sum of the {self.S} blocks' partial sums")
            self.stage(s, writes=self.sink_sets(t, "post"))

            def body(s: Src, e: str, i: int | None, total=total, c=c) -> None:
                s(f"v = {total(e)}")
                c.finish(s, e)

            self.per_element(s, c.numel, body, unroll=False)
