"""The thread-block graph: the body of a customized kernel op (MIRAGE_SPEC §1.2–§1.3).

Every block of the grid runs this graph on its own tiles. Input loaders bring one tile of
a DTensor per for-loop iteration (``input_map`` splits dims across the grid, ``forloop_dim``
across iterations); ops before the accumulators run every iteration; ``forloop_accum``
accumulates over the iterations; ops after it, and the output savers, run once at the end.

    >>> import mirage_lab as mi
    >>> g = mi.new_kernel_graph()
    >>> X = g.new_input((16, 4096)); W = g.new_input((4096, 4096))
    >>> bg = mi.new_threadblock_graph(grid_dim=(64, 1, 1), block_dim=(128, 1, 1), forloop_range=64, reduction_dimx=64)
    >>> x = bg.new_input(X, input_map=(-1, -1, -1), forloop_dim=1)   # tile [16,64]
    >>> w = bg.new_input(W, input_map=(1, -1, -1), forloop_dim=0)    # tile [64,64]
    >>> r = bg.forloop_accum(x, "rms")                               # [16,1] after the loop
    >>> m = bg.forloop_accum(bg.matmul(x, w))                         # [16,64]
    >>> bg.new_output(bg.div(m, r), output_map=(1, -1, -1))
    >>> (O,) = g.customized([X, W], bg)
    >>> O.dims
    (16, 4096)
"""
from __future__ import annotations

from typing import Any, Sequence

from ..errors import GraphBuildError
from ..ops import BLOCK, binary_ops, unary_ops
from . import checks, shapes
from .dtypes import DType
from .kernel_graph import DTensor
from .tiling import tile_dims

AXES = "xyz"
UNARY_OPS = unary_ops(level=BLOCK, attrs=False)      # the ops table's (mirage_lab.ops)
BINARY_OPS = binary_ops(level=BLOCK)
ACCUM_KINDS = (None, "sum", "mean", "rms", "sum_todimx")
BLOCK_OP_TYPES = ("input", "output", "matmul", "reduction", "rms_norm", "concat", "clamp", "mul_scalar",
                  "forloop_accum") + UNARY_OPS + BINARY_OPS


class STensor:
    """A tile in a block's shared memory (or registers). ``after_accum``: computed after the for-loop."""

    __slots__ = ("graph", "guid", "dims", "dtype", "after_accum", "op")

    def __init__(self, graph: "BlockGraph", guid: int, dims: tuple[int, ...], dtype: DType, after_accum: bool):
        self.graph = graph
        self.guid = guid
        self.dims = dims
        self.dtype = dtype
        self.after_accum = after_accum
        self.op: TBOp | None = None

    @property
    def shape(self) -> tuple[int, ...]:
        return self.dims

    @property
    def num_dims(self) -> int:
        return len(self.dims)

    @property
    def name(self) -> str:
        return f"s{self.guid}"

    def numel(self) -> int:
        n = 1
        for d in self.dims:
            n *= d
        return n

    def __repr__(self) -> str:
        phase = "after loop" if self.after_accum else "in loop"
        return f"STensor({self.name}: {self.dtype.name}{shapes.fmt(self.dims)}, {phase})"


class TBOp:
    """One block-level op."""

    __slots__ = ("guid", "op_type", "inputs", "outputs", "attrs")

    def __init__(self, guid: int, op_type: str, inputs: tuple[STensor, ...], outputs: tuple[STensor, ...],
                 attrs: dict[str, Any]):
        self.guid = guid
        self.op_type = op_type
        self.inputs = inputs
        self.outputs = outputs
        self.attrs = attrs

    def __repr__(self) -> str:
        return f"TBOp({self.op_type}, in={[t.name for t in self.inputs]}, out={[t.name for t in self.outputs]})"


def _int3(value: Any, what: str, where: str, hi: tuple[int, int, int]) -> tuple[int, int, int]:
    example = "(64, 1, 1)" if what == "grid_dim" else "(128, 1, 1)"
    if not hasattr(value, "__iter__") or isinstance(value, (str, bytes, dict)):
        value = (checks.as_int(value, where, what, lo=1, hi=hi[0], example=f"up to three positive ints such as {example}"),)
    vals = checks.int_seq(value, where, what, lo=-2**63, hi=2**63, example=example)  # the limits come below
    if not 1 <= len(vals) <= 3:
        raise GraphBuildError(f"{where}: {what} must be up to three ints such as {example}, got {value!r}")
    if any(d <= 0 for d in vals):
        raise GraphBuildError(f"{where}: every entry of {what} must be positive, got {vals}")
    vals = (vals + (1, 1))[:3]
    for a in range(3):
        if vals[a] > hi[a]:
            raise GraphBuildError(f"{where}: {what} {vals} exceeds CUDA's limit {hi[a]} on axis {AXES[a]}; "
                                  f"pass a smaller {what} such as {example}")
    return vals  # type: ignore[return-value]


def _number(where: str, arg: str, value: Any) -> float:
    return checks.finite_number(value, where, arg)


def _map3(value: Any, where: str, arg: str) -> tuple[int, int, int]:
    example = "(1, -1, -1)"
    if value is None:
        return (-1, -1, -1)
    if isinstance(value, dict):  # {"x": 1} or {0: 1}
        out = [-1, -1, -1]
        for k, v in value.items():
            a = AXES.index(k) if isinstance(k, str) and k in AXES else k
            if isinstance(a, bool) or a not in (0, 1, 2):
                raise GraphBuildError(f"{where}: {arg} key {k!r} is not a grid axis (x, y, z)")
            out[a] = checks.as_int(v, where, f"{arg}[{k!r}]", lo=-1, hi=checks.MAX_DIM,
                                   example="a data dim or -1 (replicate)")
        return tuple(out)  # type: ignore[return-value]
    vals = checks.int_seq(value, where, arg, lo=-1, hi=checks.MAX_DIM,
                          example=f"{example} (grid axis x,y,z -> data dim, -1 = replicate)")
    if len(vals) != 3:
        raise GraphBuildError(f"{where}: {arg} must be three ints (grid axis x,y,z -> data dim, -1 = replicate), got {value!r}")
    return vals  # type: ignore[return-value]


class BlockGraph:
    """A μGraph at the thread-block level. Create with :func:`new_threadblock_graph`."""

    def __init__(self, grid_dim: Any, block_dim: Any = (128, 1, 1), forloop_range: int = 1, reduction_dimx: int = 64):
        where = "new_threadblock_graph"
        self.grid_dim = _int3(grid_dim, "grid_dim", where, checks.MAX_GRID)
        self.block_dim = _int3(block_dim if block_dim is not None else (128, 1, 1), "block_dim", where, checks.MAX_BLOCK)
        if self.block_dim[0] * self.block_dim[1] * self.block_dim[2] > checks.MAX_BLOCK_THREADS:
            raise GraphBuildError(f"{where}: block_dim {self.block_dim} has more than {checks.MAX_BLOCK_THREADS} "
                                  "threads, CUDA's limit for a block; pass e.g. (128, 1, 1)")
        self.forloop_range = checks.as_int(forloop_range, where, "forloop_range", lo=1, hi=checks.MAX_FORLOOP)
        self.reduction_dimx = checks.as_int(reduction_dimx, where, "reduction_dimx", lo=1, hi=checks.MAX_DIM,
                                            example="a positive int such as 64")
        self.ops: list[TBOp] = []
        self.tensors: list[STensor] = []
        self.input_ops: list[TBOp] = []
        self.output_ops: list[TBOp] = []
        self.input_dtensors: list[DTensor] = []
        self._frozen = False

    @property
    def num_blocks(self) -> int:
        gx, gy, gz = self.grid_dim
        return gx * gy * gz

    # ----------------------------------------------------------------- helpers
    def _check_mutable(self, op: str) -> None:
        if self._frozen:
            raise GraphBuildError(
                f"{op}: this block graph is already the body of a customized op and can no longer change; "
                "build a new one with mi.new_threadblock_graph"
            )

    def _own(self, t: Any, op: str, arg: str = "input") -> STensor:
        if "(block graph)" not in op:
            op = f"{op} (block graph)"
        if not isinstance(t, STensor):
            hint = "; load a kernel tensor into the block graph with bg.new_input(...) first" if isinstance(t, DTensor) else ""
            raise GraphBuildError(f"{op}: {arg} must be an STensor of this block graph, got {type(t).__name__} {t!r}{hint}")
        if t.graph is not self:
            raise GraphBuildError(
                f"{op}: {arg} {t!r} belongs to another block graph; a block graph's ops take only "
                "tiles made in the same graph: load the DTensor again here with bg.new_input(...)"
            )
        return t

    def _add(self, op_type: str, inputs: Sequence[STensor], out: Sequence[tuple[tuple[int, ...], DType, bool]],
             attrs: dict[str, Any] | None = None) -> TBOp:
        outs = [STensor(self, len(self.tensors) + i, tuple(d), dt, aa) for i, (d, dt, aa) in enumerate(out)]
        op = TBOp(len(self.ops), op_type, tuple(inputs), tuple(outs), dict(attrs or {}))
        for t in outs:
            t.op = op
        self.tensors.extend(outs)
        self.ops.append(op)
        return op

    @staticmethod
    def _phase(op: str, ts: Sequence[STensor]) -> bool:
        phases = {t.after_accum for t in ts}
        if len(phases) > 1:
            names = ", ".join(repr(t) for t in ts)
            raise GraphBuildError(
                f"{op} (block graph): operands mix tensors computed inside the for-loop and after it ({names}); "
                "accumulate the in-loop operand with forloop_accum first"
            )
        return phases.pop()

    def _axis_desc(self, a: int) -> str:
        return f"grid axis {AXES[a]} (size {self.grid_dim[a]})"

    # ----------------------------------------------------------------- loaders / savers
    def input_tile_dims(self, dims: Sequence[int], input_map: Sequence[int], forloop_dim: int) -> tuple[int, ...]:
        """The tile one block sees in one iteration (MIRAGE_SPEC §1.3; :mod:`.tiling`)."""
        return tile_dims(dims, self.grid_dim, input_map, forloop_dim, self.forloop_range)

    def new_input(self, dtensor: DTensor, input_map: Any = None, forloop_dim: int = -1,
                  store_in_dmem: bool = False) -> STensor:
        """Load one tile of ``dtensor`` per block and iteration.

        ``input_map[a] = k`` splits data dim ``k`` across grid axis ``a`` (-1: every block
        sees the whole dim); ``forloop_dim = f`` splits dim ``f`` across the for-loop's
        iterations (-1: the same tile every iteration).
        """
        where = "new_input (block graph)"
        self._check_mutable(where)
        if not isinstance(dtensor, DTensor):
            raise GraphBuildError(f"{where}: dtensor must be a DTensor of a kernel graph, got {dtensor!r}")
        imap = list(_map3(input_map, where, "input_map"))
        dims = dtensor.dims
        for a in range(3):
            k = imap[a]
            if k < -1 or k >= len(dims):
                raise GraphBuildError(
                    f"{where}: input_map {tuple(imap)} maps {self._axis_desc(a)} to dim {k}, but {dtensor!r} "
                    f"has dims 0..{len(dims) - 1}; use a dim in that range or -1 to replicate"
                )
            if self.grid_dim[a] == 1:
                imap[a] = -1  # an axis of size 1 splits nothing (Mirage ignores it too)
        used = [k for k in imap if k >= 0]
        if len(used) != len(set(used)):
            raise GraphBuildError(
                f"{where}: input_map {tuple(imap)} maps two grid axes to the same dim of {dtensor!r}; "
                "map each grid axis to a different dim, or -1 to replicate"
            )
        for a in range(3):
            k = imap[a]
            if k >= 0 and dims[k] % self.grid_dim[a]:
                raise GraphBuildError(
                    f"{where}: {self._axis_desc(a)} does not divide dim {k} of {dtensor!r} "
                    f"({dims[k]} % {self.grid_dim[a]} = {dims[k] % self.grid_dim[a]}); pick a grid size that divides {dims[k]}"
                )
        if not isinstance(store_in_dmem, bool):
            raise GraphBuildError(f"{where}: store_in_dmem must be True or False, got {store_in_dmem!r}")
        if not isinstance(forloop_dim, int) or isinstance(forloop_dim, bool) or not -1 <= forloop_dim < len(dims):
            raise GraphBuildError(
                f"{where}: forloop_dim {forloop_dim!r} is not a dim of {dtensor!r} (0..{len(dims) - 1}, or -1 for none)"
            )
        if forloop_dim >= 0:
            after_grid = self.input_tile_dims(dims, imap, -1)[forloop_dim]
            if after_grid % self.forloop_range:
                raise GraphBuildError(
                    f"{where}: forloop_range {self.forloop_range} does not divide dim {forloop_dim} of {dtensor!r} "
                    f"after the grid split ({after_grid}); pick a forloop_range that divides {after_grid}"
                )
        tile = self.input_tile_dims(dims, imap, forloop_dim)
        op = self._add("input", (), [(tile, dtensor.dtype, False)],
                       {"input_map": tuple(imap), "forloop_dim": forloop_dim, "dtensor_dims": dims,
                        "store_in_dmem": bool(store_in_dmem)})
        self.input_ops.append(op)
        self.input_dtensors.append(dtensor)
        return op.outputs[0]

    def new_output(self, stensor: STensor, output_map: Any = None, forloop_dim: int = -1) -> None:
        """Save ``stensor`` (computed after the loop) as one tile of an output DTensor.

        ``output_map[a] = k``: block ``b`` writes its tile at ``b_a * tile[k]`` of dim ``k``.
        Every grid axis of size > 1 must be mapped, so blocks write disjoint tiles.
        """
        where = "new_output (block graph)"
        self._check_mutable(where)
        s = self._own(stensor, where)
        if forloop_dim != -1:
            raise GraphBuildError(f"{where}: outputs are written once after the for-loop; forloop_dim must be -1, got {forloop_dim!r}")
        if not s.after_accum:
            raise GraphBuildError(
                f"{where}: {s!r} is computed inside the for-loop; pass it through bg.forloop_accum(...) "
                "so it has one value after the loop"
            )
        omap = list(_map3(output_map, where, "output_map"))
        for a in range(3):
            if omap[a] < -1 or omap[a] >= s.num_dims:
                raise GraphBuildError(
                    f"{where}: output_map {tuple(omap)} maps {self._axis_desc(a)} to dim {omap[a]}, "
                    f"but the tile {s!r} has dims 0..{s.num_dims - 1}"
                )
            if self.grid_dim[a] == 1:
                omap[a] = -1
            elif omap[a] < 0:
                raise GraphBuildError(
                    f"{where}: output_map {tuple(omap)} does not cover {self._axis_desc(a)}: all "
                    f"{self.grid_dim[a]} blocks along it would write the same tile; map it to a dim of {shapes.fmt(s.dims)}"
                )
        used = [k for k in omap if k >= 0]
        if len(used) != len(set(used)):
            raise GraphBuildError(
                f"{where}: output_map {tuple(omap)} maps two grid axes to the same dim of the tile {s!r}; "
                "map each grid axis of size > 1 to a different dim"
            )
        out_dims = list(s.dims)
        for a in range(3):
            if omap[a] >= 0:
                out_dims[omap[a]] *= self.grid_dim[a]
        op = self._add("output", (s,), [], {"output_map": tuple(omap), "out_dims": tuple(out_dims)})
        self.output_ops.append(op)

    # ----------------------------------------------------------------- compute ops
    def matmul(self, a: STensor, b: STensor) -> STensor:
        a, b = self._own(a, "matmul", "A"), self._own(b, "matmul", "B")
        self._check_mutable("matmul")
        dims = shapes.matmul("matmul (block graph)", a.dims, b.dims, batch_must_be_one=True)
        return self._add("matmul", (a, b), [(dims, a.dtype, self._phase("matmul", (a, b)))]).outputs[0]

    def _unary(self, op: str, x: STensor, attrs: dict[str, Any] | None = None) -> STensor:
        x = self._own(x, op)
        self._check_mutable(op)
        return self._add(op, (x,), [(x.dims, x.dtype, x.after_accum)], attrs).outputs[0]

    def exp(self, x: STensor) -> STensor:
        return self._unary("exp", x)

    def silu(self, x: STensor) -> STensor:
        return self._unary("silu", x)

    def gelu(self, x: STensor) -> STensor:
        return self._unary("gelu", x)

    def relu(self, x: STensor) -> STensor:
        return self._unary("relu", x)

    def sqrt(self, x: STensor) -> STensor:
        return self._unary("sqrt", x)

    def square(self, x: STensor) -> STensor:
        return self._unary("square", x)

    def sigmoid(self, x: STensor) -> STensor:
        """``1 / (1 + exp(-x))`` element-wise."""
        return self._unary("sigmoid", x)

    def clamp(self, x: STensor, lo: float, hi: float) -> STensor:
        lo_f, hi_f = _number("clamp (block graph)", "lo", lo), _number("clamp (block graph)", "hi", hi)
        if lo_f > hi_f:
            raise GraphBuildError(f"clamp (block graph): lo={lo_f} is greater than hi={hi_f}; swap them")
        return self._unary("clamp", x, {"lo": lo_f, "hi": hi_f})

    def mul_scalar(self, x: STensor, scalar: float) -> STensor:
        """Multiply every element by a constant (the transpiler uses it for ``1/(w*frange)``)."""
        return self._unary("mul_scalar", x, {"scalar": _number("mul_scalar (block graph)", "scalar", scalar)})

    def _binary(self, op: str, a: STensor, b: STensor) -> STensor:
        a, b = self._own(a, op, "A"), self._own(b, op, "B")
        self._check_mutable(op)
        dims = shapes.broadcast(f"{op} (block graph)", a.dims, b.dims)
        return self._add(op, (a, b), [(dims, a.dtype, self._phase(op, (a, b)))]).outputs[0]

    def add(self, a: STensor, b: STensor) -> STensor:
        return self._binary("add", a, b)

    def mul(self, a: STensor, b: STensor) -> STensor:
        return self._binary("mul", a, b)

    def div(self, a: STensor, b: STensor) -> STensor:
        return self._binary("div", a, b)

    def sub(self, a: STensor, b: STensor) -> STensor:
        return self._binary("sub", a, b)

    def pow(self, a: STensor, b: STensor) -> STensor:
        return self._binary("pow", a, b)

    def reduction(self, x: STensor, dim: int) -> STensor:
        """Sum the tile over ``dim``, keeping it with size 1."""
        x = self._own(x, "reduction")
        self._check_mutable("reduction")
        d = shapes.norm_dim("reduction (block graph)", dim, x.num_dims, x.dims)
        dims = tuple(1 if i == d else s for i, s in enumerate(x.dims))
        return self._add("reduction", (x,), [(dims, x.dtype, x.after_accum)], {"dim": d}).outputs[0]

    def rms_norm(self, x: STensor) -> STensor:
        """``x / sqrt(mean(x**2))`` over the tile's last dim."""
        return self._unary("rms_norm", x)

    def concat(self, a: STensor, b: STensor, dim: int) -> STensor:
        a, b = self._own(a, "concat", "A"), self._own(b, "concat", "B")
        self._check_mutable("concat")
        d = shapes.norm_dim("concat (block graph)", dim, a.num_dims, a.dims)
        if a.num_dims != b.num_dims or any(x != y for i, (x, y) in enumerate(zip(a.dims, b.dims)) if i != d):
            raise GraphBuildError(
                f"concat (block graph): {shapes.fmt(a.dims)} and {shapes.fmt(b.dims)} must agree on every dim but {d}"
            )
        dims = tuple(a.dims[i] + b.dims[i] if i == d else a.dims[i] for i in range(a.num_dims))
        return self._add("concat", (a, b), [(dims, a.dtype, self._phase("concat", (a, b)))], {"dim": d}).outputs[0]

    def forloop_accum(self, x: STensor, acc: str | None = None) -> STensor:
        """Accumulate ``x`` over the for-loop's iterations; the result exists after the loop.

        ``None``: ``acc += x``; ``"sum"``: sum over the last dim too (last dim becomes 1);
        ``"mean"``: as ``"sum"``, divided by ``forloop_range * w``; ``"rms"``:
        ``sqrt(sum x**2 / (forloop_range * w))``; ``"sum_todimx"``: the last dim ``w`` folds to
        ``reduction_dimx`` by ``out[.., j] += sum_k x[.., j + dimx*k]``.
        """
        where = "forloop_accum"
        x = self._own(x, where)
        self._check_mutable(where)
        if not (acc is None or isinstance(acc, str)) or acc not in ACCUM_KINDS:
            raise GraphBuildError(f"{where}: unknown accumulator {acc!r}; use one of {ACCUM_KINDS}")
        if x.after_accum:
            raise GraphBuildError(f"{where}: {x!r} is already computed after the for-loop; accumulate an in-loop tensor")
        if acc is None:
            dims = x.dims
        elif acc == "sum_todimx":
            if x.dims[-1] % self.reduction_dimx:
                raise GraphBuildError(
                    f"{where}: 'sum_todimx' folds the last dim into reduction_dimx={self.reduction_dimx}, "
                    f"but {x!r} has last dim {x.dims[-1]}, which it does not divide"
                )
            dims = x.dims[:-1] + (self.reduction_dimx,)
        else:
            dims = x.dims[:-1] + (1,)
        return self._add("forloop_accum", (x,), [(dims, x.dtype, True)], {"acc": acc}).outputs[0]

    # ----------------------------------------------------------------- binding
    def check_bindable(self, inputs: Sequence[DTensor]) -> None:
        """Check that ``inputs`` can feed this block graph's loaders (used by ``customized``)."""
        if not self.output_ops:
            raise GraphBuildError("customized: the block graph has no outputs; add bg.new_output(...) first")
        if len(inputs) != len(self.input_ops):
            want = ", ".join(f"{op.outputs[0].dtype.name}{shapes.fmt(op.attrs['dtensor_dims'])}" for op in self.input_ops)
            got = ", ".join(f"{t.dtype.name}{shapes.fmt(t.dims)}" for t in inputs) or "nothing"
            raise GraphBuildError(
                f"customized: the block graph has {len(self.input_ops)} inputs ({want}) "
                f"but customized() got {len(inputs)} tensors ({got}); pass one DTensor per bg.new_input call, in that order"
            )
        for i, (t, op) in enumerate(zip(inputs, self.input_ops)):
            bound = self.input_dtensors[i]
            if t.dims != op.attrs["dtensor_dims"] or t.dtype != bound.dtype:
                raise GraphBuildError(
                    f"customized: input {i} is {t!r}, but the block graph's loader {i} was built for "
                    f"{bound.dtype.name}{shapes.fmt(op.attrs['dtensor_dims'])}; pass the inputs in the order of "
                    "the bg.new_input calls, or build the block graph for these shapes"
                )

    def thread_graph(self) -> "Any":
        """The thread-level view: fusion chains derived by MIRAGE_SPEC §1.4."""
        from .thread_graph import ThreadGraph

        return ThreadGraph.from_block_graph(self)

    def smem_bytes(self) -> int:
        """Mirage's shared-memory heuristic: outputs of non-in-place ops (unary ops and plain accumulators are free)."""
        total = 0
        for op in self.ops:
            if op.op_type in UNARY_OPS or op.op_type in ("clamp", "mul_scalar", "output"):
                continue
            if op.op_type == "forloop_accum" and op.attrs["acc"] is None:
                continue
            for t in op.outputs:
                total += t.numel() * t.dtype.itemsize
        return total

    def __repr__(self) -> str:
        from .printing import format_block_graph

        return format_block_graph(self)


def new_threadblock_graph(grid_dim: Any, block_dim: Any = (128, 1, 1), forloop_range: int = 1,
                          reduction_dimx: int = 64) -> BlockGraph:
    """Start a block graph for a customized op (``mi.new_threadblock_graph``)."""
    return BlockGraph(grid_dim, block_dim, forloop_range, reduction_dimx)
