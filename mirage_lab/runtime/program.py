"""The program itself as a callable lowering: its torch function, eagerly or under ``torch.compile``.

The tuner times the program's own lowerings beside the μGraph variants, and
``superoptimize`` returns one of them when no μGraph beats it. A μGraph compiled by the
runtime already runs plain kernel-level ops as torch calls (:mod:`mirage_lab.codegen.host`),
so the plain lowering is ``runtime.compile(program)``; this module adds the other one,
``torch.compile`` of the program's torch function, with the same calling convention as a
compiled kernel: ``fn(inputs, graph=False, poison=False)``, ``check_inputs``, ``capture``.

    >>> import torch, mirage_lab as mi
    >>> from mirage_lab.examples import rms_norm_linear_program
    >>> f = ProgramFunction(rms_norm_linear_program(2, 64, 32, dtype=mi.float32), compiled=False)
    >>> (o,) = f([torch.randn(2, 64), torch.randn(64, 32)])
    >>> f.lowering, tuple(o.shape)
    ('torch', (2, 32))
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import torch

from ..errors import KernelInputError, MirageLabError
from ..ir.kernel_graph import KernelGraph
from ..bounded import LRUDict
from ..ir.shapes import fmt
from .torch_fn import Substitute, to_torch_fn

# CUDA graphs kept per compiled kernel or program function, by input data pointers (each pins its input and
# output tensors). At least the number of input sets a caller rotates over to read weights from HBM
# (profile.rotation_copies: up to 16): with 4, a rotation over 5 sets recaptured on every call
# (389 µs a call instead of 41 on the H100, 2026-11-27)
GRAPHS_PER_KERNEL = 16


def compile_program_fn(program: KernelGraph, *, mode: str | None = None) -> Callable[..., list[torch.Tensor]]:
    """``torch.compile`` of the program's torch function (compiles lazily, at the first call)."""
    return torch.compile(to_torch_fn(program), mode=mode)


def tensor_list(inputs: Any, graph: KernelGraph, *, who: str = "the program") -> list[torch.Tensor]:
    """``inputs`` as a list of torch tensors, as many as ``graph`` takes, or a ``KernelInputError`` saying what to pass.

        >>> from mirage_lab.examples import rms_norm_linear_program
        >>> tensor_list(None, rms_norm_linear_program(2, 64, 32))
        Traceback (most recent call last):
        ...
        mirage_lab.errors.KernelInputError: the program takes 2 inputs (float16[2,64], float16[64,32]) as a list of torch tensors, e.g. best([X, W]); got None
    """
    n = len(graph.inputs)
    decl = ", ".join(f"{t.dtype.name}{fmt(t.dims)}" for t in graph.inputs)
    if inputs is None or isinstance(inputs, (torch.Tensor, str, bytes, dict)) or not isinstance(inputs, (list, tuple)):
        got = "None" if inputs is None else _kind(inputs)
        example = ", ".join("X" if i == 0 else "W" if i == 1 else f"T{i}" for i in range(n))
        raise KernelInputError(f"{who} takes {n} inputs ({decl}) as a list of torch tensors, e.g. best([{example}]); "
                               f"got {got}")
    if len(inputs) != n:
        raise KernelInputError(f"{who} takes {n} inputs ({decl}) but got {len(inputs)}")
    for i, x in enumerate(inputs):
        if not isinstance(x, torch.Tensor):
            hint = "; convert it with torch.from_numpy(a)" if type(x).__module__ == "numpy" else ""
            raise KernelInputError(f"input {i} must be a torch.Tensor, got {_kind(x)}{hint}")
    return list(inputs)


def _kind(x: Any) -> str:
    return f"{type(x).__module__}.{type(x).__name__}".replace("builtins.", "")


def check_program_inputs(program: KernelGraph, inputs: Any) -> list[torch.Tensor]:
    """:func:`tensor_list`, then the program's shapes and dtypes, one device; returns the tensors contiguous."""
    xs = tensor_list(inputs, program)
    dev = None
    out = []
    for i, (x, t) in enumerate(zip(xs, program.inputs)):
        if tuple(x.shape) != t.dims:
            raise KernelInputError(f"input {i} has shape {fmt(tuple(x.shape))} but the program declares {fmt(t.dims)}")
        if x.dtype != t.dtype.torch:
            raise KernelInputError(f"input {i} has dtype {x.dtype} but the program declares {t.dtype.torch} "
                                   f"(convert it with .to({t.dtype.torch}))")
        if dev is None:
            dev = x.device
        elif x.device != dev:
            raise KernelInputError(f"inputs are on different devices ({dev} and {x.device})")
        out.append(x.contiguous())
    return out


class CapturedCall:
    """A CUDA graph of one call and its output buffers (overwritten by each replay)."""

    def __init__(self, graph: Any, outputs: list[torch.Tensor]) -> None:
        self.graph = graph
        self.outputs = outputs

    def replay(self) -> list[torch.Tensor]:
        self.graph.replay()
        return list(self.outputs)


class ProgramFunction:
    """The program run with torch ops: ``compiled=True`` under ``torch.compile``, else eagerly.

    ``substitutes``: library calls that replace parts of the program (``runtime.torch_fn.Substitute``,
    found by ``pipeline.library``); ``lowering`` then names the library (e.g. ``"sdpa"``).
    Called like a compiled kernel: ``f(inputs)`` returns new outputs; ``graph=True`` (CUDA
    tensors) replays a CUDA graph captured for these input tensors (by address), whose
    outputs are overwritten by the next replay. CPU tensors run without a graph.
    """

    def __init__(self, program: KernelGraph, *, compiled: bool = True, mode: str | None = None,
                 substitutes: Sequence[Substitute] = (), lowering: str | None = None) -> None:
        if not isinstance(program, KernelGraph):
            raise MirageLabError(f"ProgramFunction: expected a KernelGraph, got {type(program).__name__}")
        if compiled and substitutes:
            raise MirageLabError("ProgramFunction: library calls run eagerly (compiled=False)")
        self.program = program
        self.substitutes = tuple(substitutes)
        self.lowering = lowering or ("torch.compile" if compiled else "torch")
        self.compiled, self.mode = compiled, mode
        # torch.compile's wrapper is made at the first call: creating it imports torch._dynamo and inductor
        # (5-15 s in a new process), which a cache hit that is never called, or a report, need not pay
        self._fn: Callable[..., Any] | None = None if compiled else to_torch_fn(program, self.substitutes)
        self._graphs: LRUDict = LRUDict(GRAPHS_PER_KERNEL)   # by input data pointers, bounded as a kernel's

    @property
    def fn(self) -> Callable[..., Any]:
        """The torch function (torch.compile's wrapper made on first use; it compiles at its first call)."""
        if self._fn is None:
            self._fn = compile_program_fn(self.program, mode=self.mode)
        return self._fn

    def check_inputs(self, inputs: Any) -> list[torch.Tensor]:
        return check_program_inputs(self.program, inputs)

    def __call__(self, inputs: Sequence[torch.Tensor] | None = None, *, graph: bool = False,
                 poison: bool = False) -> list[torch.Tensor]:
        """Run on ``inputs``; ``poison`` is accepted for the kernels' signature (torch writes every output)."""
        xs = self.check_inputs(inputs)
        if graph and xs[0].is_cuda:
            key = tuple(x.data_ptr() for x in xs)
            c = self._graphs.get(key)
            if c is None:
                c = self._graphs[key] = self._capture(xs)
            return c.replay()
        return list(self.fn(*xs))

    def _capture(self, xs: list[torch.Tensor]) -> "CapturedCall":
        from .profile import _capture

        outs: list[torch.Tensor] = []

        def call() -> None:
            outs[:] = self.fn(*xs)

        g = _capture(call)  # the last call inside the capture leaves the graph's output buffers in outs
        return CapturedCall(g, outs)

    def capture(self, inputs: Sequence[torch.Tensor]) -> "CapturedCall":
        """One call on these exact tensors captured in a CUDA graph (the tuner's timing); ``.replay()`` runs it."""
        return self._capture(self.check_inputs(inputs))

    def __repr__(self) -> str:
        return f"ProgramFunction({self.lowering}, {len(self.program.inputs)} inputs)"


__all__ = ["ProgramFunction", "CapturedCall", "compile_program_fn", "check_program_inputs", "tensor_list"]
