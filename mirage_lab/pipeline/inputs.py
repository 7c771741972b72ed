"""The one policy for the inputs a candidate is checked and timed on, and their reference outputs.

Unit-variance ``randn`` is the natural draw, but some programs overflow on it in half
precision (attention: ``exp`` of a 64-long dot product of unit values exceeds fp16). A
candidate is only as good as the program it replaces, so inputs are accepted when the
*program itself*, run as plain torch ops in its own dtype, computes finite outputs on them;
otherwise every input is scaled by ``1/sqrt(its last dim)`` (the scaling attention uses),
and failing that by a further 1/8. The chosen policy is reported with the measurements.

    >>> import torch
    >>> from mirage_lab.examples import rms_norm_linear_program
    >>> m = measuring_inputs(rms_norm_linear_program(2, 64, 32), device="cpu")
    >>> m.policy, [tuple(x.shape) for x in m.inputs], m.reference[0].dtype
    ('randn', [(2, 64), (64, 32)], torch.float64)
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

from ..errors import MirageLabError
from ..ir.kernel_graph import KernelGraph

POLICIES = ("randn", "randn/sqrt(last dim)", "randn/(8 sqrt(last dim))")


@dataclass
class MeasuringInputs:
    """Inputs (in the program's dtypes), float64 reference outputs, and how the inputs were drawn."""

    inputs: list[Any]
    reference: list[Any]
    policy: str
    seed: int


def _scale(policy: str, last_dim: int) -> float:
    if policy == "randn":
        return 1.0
    s = 1.0 / math.sqrt(max(1, last_dim))
    return s if policy == "randn/sqrt(last dim)" else s / 8


def _finite(outs: Sequence[Any]) -> bool:
    import torch

    return all(bool(torch.isfinite(o).all()) for o in outs)


def measuring_inputs(program: KernelGraph, *, device: str = "cuda", seed: int = 0,
                     inputs: Sequence[Any] | None = None) -> MeasuringInputs:
    """Draw inputs the program computes finitely in its own dtype; reference = program in float64.

    ``inputs`` given by the caller are used as they are (policy ``"given"``), provided the
    program computes them finitely.
    """
    import torch

    from ..interp.reference import run_reference
    from ..runtime.torch_fn import to_torch_fn

    fn = to_torch_fn(program)
    if inputs is not None:
        xs = list(inputs)
        if not _finite(fn(*xs)):
            raise MirageLabError("the program itself computes non-finite outputs on the given inputs "
                                 "(in its own dtype): candidates cannot be checked against it")
        return MeasuringInputs(xs, run_reference(program, [x.double() for x in xs]), "given", seed)
    for policy in POLICIES:
        gen = torch.Generator(device="cpu").manual_seed(seed)
        xs = [(torch.randn(t.dims, generator=gen, dtype=torch.float32) * _scale(policy, t.dims[-1]))
              .to(device=device, dtype=t.dtype.torch) for t in program.inputs]
        if _finite(fn(*xs)):
            return MeasuringInputs(xs, run_reference(program, [x.double() for x in xs]), policy, seed)
    raise MirageLabError(f"the program computes non-finite outputs on every input draw tried ({', '.join(POLICIES)}); "
                         "pass inputs=[...] that it computes finitely")
