"""The kernel-level graph: DTensors in device memory and the ops between them.

The builder methods follow Mirage's Python API (MIRAGE_SPEC §6)::

    >>> import mirage_lab as mi
    >>> g = mi.new_kernel_graph()
    >>> X = g.new_input(dims=(16, 4096), dtype=mi.float16)
    >>> W = g.new_input(dims=(4096, 4096), dtype=mi.float16)
    >>> O = g.matmul(g.rms_norm(X, normalized_shape=(4096,)), W)
    >>> g.mark_output(O)
    >>> O.dims
    (16, 4096)

Every builder validates all of its arguments before it changes the graph, so an error
leaves the graph exactly as it was.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Sequence

from ..errors import GraphBuildError
from ..ops import KERNEL, binary_ops, unary_ops
from . import checks, shapes
from .dtypes import DType, as_dtype

if TYPE_CHECKING:  # pragma: no cover
    from .block_graph import BlockGraph

UNARY_OPS = unary_ops(level=KERNEL, attrs=False)     # the ops table's (mirage_lab.ops)
BINARY_OPS = binary_ops(level=KERNEL)
KERNEL_OP_TYPES = ("input", "matmul", "reduction", "rms_norm", "clamp", "customized") + UNARY_OPS + BINARY_OPS


class DTensor:
    """A tensor in device memory, produced by one kernel-level op."""

    __slots__ = ("graph", "guid", "dims", "dtype", "op")

    def __init__(self, graph: "KernelGraph", guid: int, dims: tuple[int, ...], dtype: DType):
        self.graph = graph
        self.guid = guid
        self.dims = dims
        self.dtype = dtype
        self.op: KNOp | None = None

    @property
    def shape(self) -> tuple[int, ...]:
        return self.dims

    @property
    def num_dims(self) -> int:
        return len(self.dims)

    @property
    def name(self) -> str:
        return f"t{self.guid}"

    def numel(self) -> int:
        n = 1
        for d in self.dims:
            n *= d
        return n

    def nbytes(self) -> int:
        return self.numel() * self.dtype.itemsize

    def __repr__(self) -> str:
        return f"DTensor({self.name}: {self.dtype.name}{shapes.fmt(self.dims)})"


class KNOp:
    """One kernel-level op: its type, input and output tensors, attributes, body."""

    __slots__ = ("guid", "op_type", "inputs", "outputs", "attrs", "block_graph")

    def __init__(self, guid: int, op_type: str, inputs: tuple[DTensor, ...], outputs: tuple[DTensor, ...],
                 attrs: dict[str, Any], block_graph: "BlockGraph | None" = None):
        self.guid = guid
        self.op_type = op_type
        self.inputs = inputs
        self.outputs = outputs
        self.attrs = attrs
        self.block_graph = block_graph

    def __repr__(self) -> str:
        return f"KNOp({self.op_type}, in={[t.name for t in self.inputs]}, out={[t.name for t in self.outputs]})"


class KernelGraph:
    """A μGraph at the kernel level. Build it with the methods below, then ``mark_output``."""

    def __init__(self) -> None:
        self.ops: list[KNOp] = []
        self.tensors: list[DTensor] = []
        self.inputs: list[DTensor] = []
        self.outputs: list[DTensor] = []

    # ----------------------------------------------------------------- helpers
    def _own(self, t: Any, op: str, arg: str = "input") -> DTensor:
        if not isinstance(t, DTensor):
            raise GraphBuildError(f"{op}: {arg} must be a DTensor of this graph, got {type(t).__name__} {t!r}")
        if t.graph is not self:
            raise GraphBuildError(
                f"{op}: {arg} {t!r} belongs to another kernel graph; build every op of a program "
                "on the graph its inputs came from"
            )
        return t

    def _add(self, op_type: str, inputs: Sequence[DTensor], out: Iterable[tuple[tuple[int, ...], DType]],
             attrs: dict[str, Any] | None = None, block_graph: "BlockGraph | None" = None) -> KNOp:
        # Only called once every check has passed: the graph changes here and nowhere else.
        outs = []
        for dims, dtype in out:
            t = DTensor(self, len(self.tensors) + len(outs), tuple(dims), dtype)
            outs.append(t)
        op = KNOp(len(self.ops), op_type, tuple(inputs), tuple(outs), dict(attrs or {}), block_graph)
        for t in outs:
            t.op = op
        self.tensors.extend(outs)
        self.ops.append(op)
        return op

    @staticmethod
    def _same_dtype(op: str, a: DTensor, b: DTensor) -> DType:
        if a.dtype != b.dtype:
            raise GraphBuildError(
                f"{op}: operands have different dtypes ({a!r}, {b!r}); mirage_lab does not convert implicitly"
            )
        return a.dtype

    # ----------------------------------------------------------------- inputs/outputs
    def new_input(self, dims: Sequence[int], dtype: Any = None, strides: Sequence[int] | None = None) -> DTensor:
        """Declare a program input of shape ``dims`` (row-major unless ``strides`` are given)."""
        from . import dtypes as _dt

        dims_t = shapes.check_dims(dims, "new_input")
        dt = as_dtype(_dt.float16 if dtype is None else dtype, where=f"new_input(dims={shapes.fmt(dims_t)})")
        attrs: dict[str, Any] = {}
        if strides is not None:
            st = checks.int_seq(strides, "new_input", "strides", lo=0, hi=checks.MAX_NUMEL, example="(4096, 1)")
            if len(st) != len(dims_t):
                raise GraphBuildError(
                    f"new_input: strides {strides!r} must be {len(dims_t)} non-negative ints for dims {shapes.fmt(dims_t)}"
                )
            attrs["strides"] = st
        op = self._add("input", (), [(dims_t, dt)], attrs)
        self.inputs.append(op.outputs[0])
        return op.outputs[0]

    def mark_output(self, t: DTensor, strides: Sequence[int] | None = None) -> None:
        """Mark ``t`` as a program output (outputs keep the order of these calls)."""
        t = self._own(t, "mark_output")
        if any(o is t for o in self.outputs):
            raise GraphBuildError(f"mark_output: {t!r} is already an output")
        self.outputs.append(t)

    # ----------------------------------------------------------------- ops
    def matmul(self, a: DTensor, b: DTensor) -> DTensor:
        """``[..,m,k] x [..,k,n] -> [..,m,n]``; leading (batch) dims must be equal."""
        a, b = self._own(a, "matmul", "A"), self._own(b, "matmul", "B")
        dims = shapes.matmul("matmul", a.dims, b.dims)
        return self._add("matmul", (a, b), [(dims, self._same_dtype("matmul", a, b))]).outputs[0]

    def reduction(self, x: DTensor, dim: int) -> DTensor:
        """Sum over ``dim``, keeping it with size 1 (``reduction(E, 2)`` of [2,256,4096] is [2,256,1])."""
        x = self._own(x, "reduction")
        d = shapes.norm_dim("reduction", dim, x.num_dims, x.dims)
        dims = tuple(1 if i == d else s for i, s in enumerate(x.dims))
        return self._add("reduction", (x,), [(dims, x.dtype)], {"dim": d}).outputs[0]

    def _unary(self, op: str, x: DTensor, attrs: dict[str, Any] | None = None) -> DTensor:
        x = self._own(x, op)
        return self._add(op, (x,), [(x.dims, x.dtype)], attrs).outputs[0]

    def exp(self, x: DTensor) -> DTensor:
        return self._unary("exp", x)

    def silu(self, x: DTensor) -> DTensor:
        return self._unary("silu", x)

    def gelu(self, x: DTensor) -> DTensor:
        return self._unary("gelu", x)

    def relu(self, x: DTensor) -> DTensor:
        return self._unary("relu", x)

    def sqrt(self, x: DTensor) -> DTensor:
        return self._unary("sqrt", x)

    def square(self, x: DTensor) -> DTensor:
        return self._unary("square", x)

    def sigmoid(self, x: DTensor) -> DTensor:
        """``1 / (1 + exp(-x))`` element-wise."""
        return self._unary("sigmoid", x)

    def clamp(self, x: DTensor, lo: float, hi: float) -> DTensor:
        """Clamp every element into ``[lo, hi]``."""
        lo_f, hi_f = checks.finite_number(lo, "clamp", "lo"), checks.finite_number(hi, "clamp", "hi")
        if lo_f > hi_f:
            raise GraphBuildError(f"clamp: lo={lo_f} is greater than hi={hi_f}; swap them")
        return self._unary("clamp", x, {"lo": lo_f, "hi": hi_f})

    def _binary(self, op: str, a: DTensor, b: DTensor) -> DTensor:
        a, b = self._own(a, op, "A"), self._own(b, op, "B")
        dims = shapes.broadcast(op, a.dims, b.dims)
        return self._add(op, (a, b), [(dims, self._same_dtype(op, a, b))]).outputs[0]

    def add(self, a: DTensor, b: DTensor) -> DTensor:
        return self._binary("add", a, b)

    def mul(self, a: DTensor, b: DTensor) -> DTensor:
        return self._binary("mul", a, b)

    def div(self, a: DTensor, b: DTensor) -> DTensor:
        return self._binary("div", a, b)

    def pow(self, a: DTensor, b: DTensor) -> DTensor:
        return self._binary("pow", a, b)

    def rms_norm(self, x: DTensor, normalized_shape: Any = None) -> DTensor:
        """``x / sqrt(mean(x**2))`` over the last dim (no eps, as Mirage).

        ``normalized_shape`` must name the last dim, e.g. ``(4096,)``. Passing a tensor
        instead (Mirage's tutorial writes ``rms_norm(X, G)``) multiplies the result by that
        weight: it builds ``mul(rms_norm(X), G)``.
        """
        x = self._own(x, "rms_norm")
        if isinstance(normalized_shape, DTensor):
            g = self._own(normalized_shape, "rms_norm", "weight")
            shapes.broadcast("rms_norm (weight)", x.dims, g.dims)
            self._same_dtype("rms_norm (weight)", x, g)
            return self.mul(self.rms_norm(x), g)
        if normalized_shape is not None:
            example = f"({x.dims[-1]},)"
            if hasattr(normalized_shape, "__iter__") and not isinstance(normalized_shape, (str, bytes)):
                ns = checks.int_seq(normalized_shape, "rms_norm", "normalized_shape", lo=1, hi=checks.MAX_DIM,
                                    example=example)
            else:
                ns = (checks.as_int(normalized_shape, "rms_norm", "normalized_shape", lo=1, hi=checks.MAX_DIM,
                                    example=f"the last dim {example}, or a weight DTensor"),)
            if ns != (x.dims[-1],):
                raise GraphBuildError(
                    f"rms_norm: normalized_shape {ns} must be the last dim of {x!r}, i.e. ({x.dims[-1]},); "
                    "mirage_lab normalizes over the last dim only"
                )
        return self._add("rms_norm", (x,), [(x.dims, x.dtype)]).outputs[0]

    def customized(self, inputs: Sequence[DTensor], block_graph: "BlockGraph") -> list[DTensor]:
        """Run ``block_graph`` on ``inputs`` (in the order of its ``new_input`` calls).

        Returns the op's output tensors, in the order of the block graph's ``new_output`` calls.
        """
        from .block_graph import BlockGraph

        if not isinstance(block_graph, BlockGraph):
            raise GraphBuildError(f"customized: expected a block graph from mi.new_threadblock_graph, got {block_graph!r}")
        if not isinstance(inputs, (list, tuple)):
            # customized(X, bg) is an easy slip: a single tensor must still be passed as [X].
            raise GraphBuildError(
                f"customized: inputs must be a list of DTensors in the order of the block graph's new_input "
                f"calls, e.g. g.customized([X, W], bg); got {type(inputs).__name__} {inputs!r}"
            )
        ins = [self._own(t, "customized", f"input {i}") for i, t in enumerate(inputs)]
        block_graph.check_bindable(ins)
        outs = [(o.attrs["out_dims"], o.inputs[0].dtype) for o in block_graph.output_ops]
        op = self._add("customized", ins, outs, {}, block_graph)
        block_graph._frozen = True
        return list(op.outputs)

    # ----------------------------------------------------------------- queries
    @property
    def customized_ops(self) -> list[KNOp]:
        return [op for op in self.ops if op.op_type == "customized"]

    def __call__(self, inputs: Sequence[Any] | None = None, **kw: Any) -> list[Any]:
        """Run this μGraph on CUDA torch tensors (compiled by ``mirage_lab.runtime`` on first use).

        >>> (O,) = g(inputs=[X, W])    # doctest: +SKIP
        """
        from .hooks import get

        return get("call")(self, inputs, **kw)

    def to_json(self, **kw: Any) -> str:
        """The versioned JSON text of this μGraph (see ``docs/json_format.md``)."""
        from .serialize import to_json

        return to_json(self, **kw)

    def content_hash(self) -> str:
        """A stable hex digest of the graph's structure: the same graph gives the same hash in any process."""
        from .serialize import content_hash

        return content_hash(self)

    def search(self, config: str | None = None, **kw: Any) -> Any:
        """Search for equivalent μGraphs; an iterator of events (see :func:`mirage_lab.search.search`)."""
        from .hooks import get

        return get("search")(self, config, **kw)

    def superoptimize(self, config: str | None = None, **kw: Any) -> Any:
        """Search, tune and return the fastest equivalent μGraph, compiled (see :func:`mirage_lab.pipeline.superoptimize`).

        >>> best = g.superoptimize()          # doctest: +SKIP
        >>> (O,) = best(inputs=[X, W])        # doctest: +SKIP
        """
        from .hooks import get

        return get("superoptimize")(self, config, **kw)

    def __repr__(self) -> str:
        from .printing import format_kernel_graph

        return format_kernel_graph(self)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        from .hooks import get

        return get("mimebundle")(self)   # installed by mirage_lab.viz

    def _repr_svg_(self) -> str | None:
        from .hooks import get

        return get("svg")(self)


def new_kernel_graph() -> KernelGraph:
    """Start a new, empty kernel graph (``mi.new_kernel_graph()``)."""
    return KernelGraph()
