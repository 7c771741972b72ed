"""Search settings: limits, candidate spaces and presets (MIRAGE_SPEC §2.1–§2.2).

    >>> cfg = SearchConfig.from_args(config="attention")
    >>> cfg.max_customized_ops
    2
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Iterable, Sequence

from ..errors import MirageLabError
from ..ops import BLOCK, KERNEL, elementwise_ops, names
from ..verify.backends import BACKENDS

# The default candidate sets, as Mirage's dim_strategy.cc has them.
DEFAULT_IMAPS = ((0, -1, 1), (0, 1, -1), (0, 2, -1), (-1, 1, -1))
NON_ATTENTION_IMAPS = ((-1, -1, -1), (1, -1, -1), (0, -1, -1))
# Mirage's attention preset drops (0,-1,-1) too; we keep it. With one query per row (decode,
# q_len = 1) Q cannot be split along its rows, so a grid that splits the KV length must
# replicate Q across that axis (what (0,-1,1) means on a (batch,y,1) grid, but Mirage's
# size-1-axis rule skips it there), and the (batch,1,1) kernel that combines the KV splits
# needs it for every input: without it no split-KV μGraph of decode attention exists.
ATTENTION_IMAPS = DEFAULT_IMAPS + ((0, -1, -1),)
DEFAULT_OMAPS = ((0, 1, -1), (0, 2, 1), (0, 2, -1), (0, -1, -1), (-1, 2, 1), (-1, 1, -1), (-1, 2, -1),
                 (-1, -1, -1), (1, -1, -1))
DEFAULT_FMAPS = (-1, 0, 1, 2)
DEFAULT_FRANGES = (4, 16, 64)
MIRAGE_MAX_KERNEL_OPS = 5   # counting input ops
MIN_OPS_BEYOND_INPUTS = 2   # what Mirage's 5 leaves a three-input program
MIRAGE_MAX_BLOCK_OPS = 9    # counting input loaders
GRID_DIVISORS = (8, 16, 32, 64, 128, 256)
# Split-K: the most parts a grid's first axis cuts a summed dim into (on top of each generated
# one-axis grid). A skinny matmul has few output tiles; split over K, a few blocks share each.
MAX_SPLIT = 16
ATTENTION_GRID_DIVISORS = (8, 64, 128, 256)
# Row x column grids for matmul programs with many rows (prefill): blocks of this many rows. With
# one-axis grids every block reads all the rows of X, and past ~128 rows its tile no longer fits
# shared memory at any loop range that keeps the search's partial products in bounds (Gemma 7B's
# GeGLU prefill of 256 tokens found no candidate; RESULTS.md, "Suite programs with no candidate").
ROW_TILES = (64, 128)
ROW_GRID_MIN_ROWS = 128

# the ops table's searched ops, in its order (mirage_lab.ops): matmul, the unary, the binary ones
KERNEL_OPS = tuple(n for n in names(level=KERNEL, searched=True) if n != "rms_norm")
BLOCK_OPS = names(level=BLOCK, searched=True)
BLOCK_ACCUMS = (None, "sum", "rms")

PRESETS = ("attention", "mlp", "lora", None)
# the search fingerprints through the verifier's backends: the names are the verifier's, not a copy
FINGERPRINT_BACKENDS = BACKENDS


class SearchConfigError(MirageLabError, ValueError):
    """A search setting is out of range or of the wrong kind."""


def _maps(value: Any, name: str) -> tuple[tuple[int, int, int], ...] | None:
    if value is None:
        return None
    try:
        out = tuple(tuple(int(v) for v in m) for m in value)
    except TypeError as e:
        raise SearchConfigError(f"{name} must be a list of 3-tuples, got {value!r}") from e
    if any(len(m) != 3 for m in out):
        raise SearchConfigError(f"{name} must be a list of 3-tuples (x, y, z), got {value!r}")
    return out  # type: ignore[return-value]


@dataclass(frozen=True)
class SearchConfig:
    """Everything that shapes the search space. Frozen and hashable: checkpoints record its hash."""

    # Counts input ops, as Mirage. None: Mirage's 5, but never fewer than two ops beyond the
    # program's inputs (resolved per program by :meth:`resolved`): with 5, a program of four
    # inputs (residual add + norm + linear, LoRA, QK-norm attention) could add one op only,
    # and one customized op of at most max_block_inputs inputs cannot read four.
    max_kernel_ops: int | None = None
    # Counts input loaders, as Mirage. None: Mirage's 9, or 10 for a program of more than three
    # inputs (resolved by :meth:`resolved`): Mirage's 9 leaves 7 ops beside two loaders (its
    # customized ops read the last two tensors); a four-input program's customized op may read
    # three and combine them before a norm (nTrans's outer norm: 3 loaders + 7 ops).
    max_block_ops: int | None = None
    max_block_outputs: int = 2
    max_block_inputs: int = 3
    # None: one, or as many as the program chains sum reductions (resolved by :meth:`resolved`):
    # a block graph cannot accumulate an accumulated value again and the search has no
    # kernel-level reduction, so nGPT's norm of a sum holding another norm needs two.
    max_customized_ops: int | None = None
    # The last kernel op must read the unused tensors and the unread inputs; this many more
    # inputs may join it. Mirage's own rule for customized-op inputs is "the last two
    # tensors"; this keeps the general choice everywhere else and bounds it only here,
    # where every extra input multiplies the roots of a subtree that is searched once per
    # earlier kernel.
    max_extra_final_inputs: int = 0
    smem_limit: int = 96 * 1024
    min_blocks: int = 32
    max_blocks: int = 4096
    block_dim: tuple[int, int, int] = (128, 1, 1)
    # The width sum_todimx folds to. None (the attention preset): the program's output last dim
    # (the head dim), resolved by :meth:`resolved`. Mirage fixes 64, its benchmarks' head dim;
    # the fold combines per-split partials laid out [split, head dim], so only the head dim works.
    reduction_dimx: int | None = 64
    config: str | None = None
    griddims: tuple[tuple[int, int, int], ...] | None = None
    imaps: tuple[tuple[int, int, int], ...] | None = None
    omaps: tuple[tuple[int, int, int], ...] | None = None
    fmaps: tuple[int, ...] | None = None
    franges: tuple[int, ...] | None = None
    kernel_ops: tuple[str, ...] = KERNEL_OPS
    block_ops: tuple[str, ...] = BLOCK_OPS
    block_accums: tuple[str | None, ...] = BLOCK_ACCUMS
    two_d_grids: bool = False
    # Row x column grids (rows // r, g, 1), r in ROW_TILES, beside each one-axis grid (g, 1, 1). None: on
    # for a program whose outputs are matrices of ROW_GRID_MIN_ROWS rows or more, outside the attention
    # preset (which has its own two-axis grids); resolved by :meth:`resolved`.
    row_grids: bool | None = None
    # Split-K, opt-in (None or False: off; True: on where the program sums over an axis whose partial
    # sums a second kernel can add up and finish, :func:`.axes.split_axes`, outside the attention
    # preset, which splits the KV length its own way; resolved by :meth:`resolved`). Off by default:
    # on the H100 (2026-11-27) it made the README's RMSNorm+Linear search find nothing in 30 s, and
    # on nGPT's norm+linear the split candidates it found measured 113-254 µs against torch.compile's
    # 20.6 while displacing the one-kernel grids. On: grids (s, g, 1), s in split_factors(),
    # beside each one-axis grid (g, 1, 1), and one customized op beyond ``max_customized_ops``
    # after a customized op whose grid splits such an axis (the combine kernel).
    split_reduction: bool | None = None
    generate_grids: bool = True        # False: only the user's griddims (Mirage always adds its own)
    search_tests: int = 1              # random tests per fingerprint inside the search
    verify_tests: int = 2              # random tests to confirm a candidate
    seed: int = 0
    dedup: bool = True
    # Where the search computes fingerprints: "numpy", "cuda" or "auto" (cuda when a GPU is
    # usable). The results do not depend on it, so checkpoints do not record it.
    fingerprint_backend: str = "auto"
    extra: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @classmethod
    def from_args(cls, config: str | None = None, *, griddims: Any = None, imaps: Any = None, omaps: Any = None,
                  fmaps: Any = None, franges: Any = None, blockdims: Any = None, **limits: Any) -> "SearchConfig":
        """Build from Mirage-style ``superoptimize`` arguments plus limit overrides."""
        if config not in PRESETS:
            raise SearchConfigError(f"config={config!r} is not a preset; use one of 'attention', 'mlp', 'lora' or None")
        if blockdims is not None and tuple(blockdims) not in ((128, 1, 1), ((128, 1, 1),)):
            raise SearchConfigError("blockdims: the search always uses 128-thread blocks (as Mirage); leave it None")
        kw: dict[str, Any] = {"config": config}
        if config == "attention":
            kw.update(max_customized_ops=2, two_d_grids=True, block_accums=BLOCK_ACCUMS + ("sum_todimx",),
                      reduction_dimx=None)
        if config == "lora":
            # The last customized op may re-read one input an earlier kernel op read: LoRA's X beside
            # X·A, for the two-kernel plan whose loop sums X·W and (X·A)·B together (W read once, the
            # rank-r product computed once, not once per block).
            kw.update(max_block_inputs=4, max_extra_final_inputs=1)
        kw.update(griddims=_maps(griddims, "griddims"), imaps=_maps(imaps, "imaps"), omaps=_maps(omaps, "omaps"))
        if fmaps is not None:
            kw["fmaps"] = tuple(int(f) for f in fmaps)
        if franges is not None:
            kw["franges"] = tuple(int(f) for f in franges)
            if any(f <= 0 for f in kw["franges"]):
                raise SearchConfigError(f"franges must be positive ints, got {franges!r}")
        fb = limits.get("fingerprint_backend", "auto")
        if fb not in FINGERPRINT_BACKENDS:
            raise SearchConfigError(f"fingerprint_backend must be one of {FINGERPRINT_BACKENDS}, got {fb!r}")
        known = {f for f in cls.__dataclass_fields__}
        for k, v in limits.items():
            if k not in known or k in ("extra", "config"):
                raise SearchConfigError(f"unknown search setting {k!r}; known: {sorted(known - {'extra', 'config'})}")
            if k.startswith("max_") and (not isinstance(v, int) or v < 0):
                raise SearchConfigError(f"{k} must be a non-negative int, got {v!r}")
            kw[k] = tuple(v) if isinstance(v, list) else v
        return cls(**kw)

    def with_program_ops(self, graph: Any) -> "SearchConfig":
        """These settings, plus the element-wise ops ``graph`` uses that the op lists lack.

        The search tries an op outside its default lists (``mirage_lab.ops``: ``searched=False``,
        such as ``sigmoid``) only where the program has it: the space of other programs is unchanged.
        The attention preset adds the program's ``rms_norm`` as a kernel op (QK-norm's norm as a plain op).
        """
        used = {op.op_type for op in graph.ops}
        extra_k = tuple(n for n in elementwise_ops(level=KERNEL) if n in used and n not in self.kernel_ops)
        if self.config == "attention" and "rms_norm" in used and "rms_norm" not in self.kernel_ops + extra_k:
            # A norm before attention (QK-norm) as a plain op: then the customized op reads three tensors
            # and is plain FlashAttention. Fused, it needs four inputs and a block graph deeper than
            # the search reaches (RESULTS.md, 2026-12-07 (b)). Elsewhere the norm is what gets fused.
            extra_k += ("rms_norm",)
        extra_b = tuple(n for n in elementwise_ops(level=BLOCK) if n in used and n not in self.block_ops)
        if not extra_k and not extra_b:
            return self
        from dataclasses import replace

        return replace(self, kernel_ops=self.kernel_ops + extra_k, block_ops=self.block_ops + extra_b)

    def fingerprint(self) -> str:
        d = asdict(self)
        d.pop("extra", None)
        d.pop("fingerprint_backend", None)
        return hashlib.sha256(json.dumps(d, sort_keys=True, default=str).encode()).hexdigest()[:16]

    def resolved(self, graph: Any) -> "SearchConfig":
        """The settings that depend on the program filled in (those left None).

        ``reduction_dimx``: the program's output last dim. ``max_kernel_ops``: Mirage's 5, or
        the number of inputs + 2 when the program has more than three inputs (+ 3 where ``rms_norm`` is
        searched as a kernel op, see :meth:`with_program_ops`). ``max_block_ops``:
        Mirage's 9, or 10 when the program has more than three inputs.
        ``max_customized_ops``: 1, or the most sum reductions on one path of the program.
        """
        out = self
        if out.reduction_dimx is None:
            out = replace(out, reduction_dimx=int(graph.outputs[0].dims[-1]))
        if out.max_customized_ops is None:
            out = replace(out, max_customized_ops=max(1, chained_reductions(graph)))
        if out.max_kernel_ops is None:
            # a norm searched as a plain op takes a slot of its own beside its weight's mul
            beyond = MIN_OPS_BEYOND_INPUTS + ("rms_norm" in out.kernel_ops)
            out = replace(out, max_kernel_ops=max(MIRAGE_MAX_KERNEL_OPS, len(graph.inputs) + beyond))
        if out.max_block_ops is None:
            out = replace(out, max_block_ops=MIRAGE_MAX_BLOCK_OPS + (len(graph.inputs) > 3))
        if out.row_grids is None:
            outs = [tuple(t.dims) for t in graph.outputs]
            out = replace(out, row_grids=out.config != "attention" and bool(outs) and all(
                len(d) == 2 and d[0] >= ROW_GRID_MIN_ROWS for d in outs))
        if out.split_reduction:
            from .axes import split_axes   # axes imports the IR; config stays import-light

            out = replace(out, split_reduction=out.config != "attention" and bool(split_axes(graph)))
        else:
            out = replace(out, split_reduction=False)
        return out

    # ----------------------------------------------------------------- candidate spaces
    def grid_candidates(self, input_dims: Sequence[Sequence[int]]) -> list[tuple[int, int, int]]:
        """Grid dims to try for a customized op over inputs of these shapes (dim_strategy.cc)."""
        grids: list[tuple[int, int, int]] = list(self.griddims or ())
        if not self.generate_grids:
            return grids
        distinct = sorted({d for dims in input_dims for d in dims})
        for d in distinct:
            for x in GRID_DIVISORS:
                if d % x == 0:
                    grids.append((d // x, 1, 1))
        if self.two_d_grids:
            batch = input_dims[0][0]
            for d in distinct:
                for y in ATTENTION_GRID_DIVISORS:
                    if d % y == 0:
                        grids.append((batch, d // y, 1))
            if len(input_dims) > 2:
                grids.append((batch, 16, 4))
        if self.row_grids and len(input_dims[0]) == 2:
            rows = input_dims[0][0]
            cols = [g[0] for g in grids if g[1] == g[2] == 1 and g[0] > 1]
            grids += [(rows // r, g, 1) for r in ROW_TILES if rows % r == 0 and rows > r for g in cols]
        out = []
        for g in grids:
            n = g[0] * g[1] * g[2]
            if (self.griddims and g in self.griddims) or self.min_blocks <= n <= self.max_blocks:
                out.append(g)
        ranks = {len(d) for d in input_dims}
        if ranks in ({2}, {3}):
            out.append((input_dims[0][0], 1, 1))
        seen: set = set()
        out = [g for g in out if not (g in seen or seen.add(g))]
        # Grids that use more axes first, then more blocks: they are where fused kernels
        # (one block per output tile, a split reduction on another axis) live, so
        # candidates come out earlier. The order never changes what the search finds.
        return sorted(out, key=lambda g: (-sum(1 for d in g if d > 1), -(g[0] * g[1] * g[2])))

    def split_grid_candidates(self, input_dims: Sequence[Sequence[int]]) -> list[tuple[int, int, int]]:
        """Split-K grids (empty unless ``split_reduction``): ``(s, g, 1)`` for each generated
        one-axis grid ``(g, 1, 1)`` and s in :meth:`split_factors`, within the block limits; the first
        axis is for a summed dim (:func:`.tilings.tilings` keeps only such input maps), most blocks first."""
        if not self.split_reduction or not self.generate_grids:
            return []
        ones = [g[0] for g in self.grid_candidates(input_dims) if g[0] > 1 and g[1] == g[2] == 1]
        out = {(s, g, 1) for g in ones for s in self.split_factors() if self.min_blocks <= s * g <= self.max_blocks}
        return sorted(out, key=lambda g: (-g[0] * g[1], g))

    def split_factors(self) -> tuple[int, ...]:
        """How many partial sums split-K may leave: the combine kernel adds them up with its loop
        (one partial an iteration), so a loop range, at most MAX_SPLIT."""
        return tuple(f for f in self.frange_candidates() if 1 < f <= MAX_SPLIT)

    def imap_candidates(self) -> tuple[tuple[int, int, int], ...]:
        if self.imaps is not None:
            return self.imaps
        return ATTENTION_IMAPS if self.config == "attention" else DEFAULT_IMAPS + NON_ATTENTION_IMAPS

    def omap_candidates(self) -> tuple[tuple[int, int, int], ...]:
        extra = tuple(m for m in (self.omaps or ()) if m not in DEFAULT_OMAPS)
        return extra + DEFAULT_OMAPS

    def fmap_candidates(self) -> tuple[int, ...]:
        return self.fmaps if self.fmaps is not None else DEFAULT_FMAPS

    def frange_candidates(self) -> tuple[int, ...]:
        return self.franges if self.franges is not None else DEFAULT_FRANGES


def chained_reductions(graph: Any) -> int:
    """The most kernel-level sum reductions on one path from an input to an output.

        >>> import mirage_lab as mi
        >>> g = mi.new_kernel_graph(); x = g.new_input((4, 8))
        >>> n = g.div(x, g.sqrt(g.reduction(g.square(x), 1)))
        >>> g.mark_output(g.div(n, g.sqrt(g.reduction(g.square(n), 1))))
        >>> chained_reductions(g)
        2
    """
    depth: dict[int, int] = {t.guid: 0 for t in graph.inputs}
    for op in graph.ops:
        d = max((depth.get(t.guid, 0) for t in op.inputs), default=0) + (op.op_type == "reduction")
        for t in op.outputs:
            depth[t.guid] = d
    return max((depth.get(t.guid, 0) for t in graph.outputs), default=0)


def normalize_map(m: Iterable[int], grid: Sequence[int]) -> tuple[int, int, int]:
    """Axes of size 1 split nothing: their entry becomes -1 (so equal maps compare equal)."""
    return tuple(-1 if grid[a] == 1 else int(v) for a, v in enumerate(m))  # type: ignore[return-value]
