"""Library kernels as contenders: where a well-kept library computes part of the program, its call races too.

A library lowering is a structural matcher over the user's :class:`KernelGraph` and a torch
function that computes what the matched sub-graph computes. Where the matcher finds the
pattern, the tuner races one more contender: the program's torch ops with the library call in
place of each match (:class:`~mirage_lab.runtime.torch_fn.Substitute`), checked against the
float64 reference with the bar every contender meets and timed by the same timer
(:mod:`.contenders`). Where it wins, ``superoptimize`` returns it ("returning FlashAttention
(sdpa): no μGraph beat it"); ``export`` writes the library function's own source beside the
program's torch ops (torch only).

Registered: ``"sdpa"`` — attention as the builder writes it (``examples.gqa_program``,
Mirage's form, the scale folded into Q, or a one-element scale tensor ``s`` applied to the scores)::

    A = matmul(Q, K)        Q [..., L, d], K [..., d, S] (keys stored transposed)
                            (or A = mul(matmul(Q, K), s), s [1, ..., 1]: QK-norm's learned gain)
    E = exp(A)
    R = reduction(E, last)  [..., L, 1]
    D = div(E, R)
    O = matmul(D, V)        V [..., S, dv]

with ``A``, ``E``, ``R``, ``D`` read by nothing else and no program output, computed by
``torch.nn.functional.scaled_dot_product_attention(scale=1.0)`` (FlashAttention on a GPU
where it applies; softmax subtracts the row max, which exp/rowsum does not: equal in exact
arithmetic). GQA needs nothing more: the query heads sharing a KV head are rows of Q.

    >>> from mirage_lab.examples import gqa_program
    >>> g = gqa_program(2, 8, 16, 32)
    >>> [m.output for m in match_attention(g)], library_lowerings(g)
    ([7], ['sdpa'])
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from ..errors import MirageLabError
from ..ir.kernel_graph import DTensor, KernelGraph, KNOp

if TYPE_CHECKING:  # torch loads when a lowering runs, not with import mirage_lab
    import torch

    from ..runtime.torch_fn import Substitute


@dataclass(frozen=True)
class Match:
    """Where a library pattern sits in a program: the ops it covers, the tensors it reads, the one it makes."""

    ops: frozenset[int]
    inputs: tuple[int, ...]
    output: int


def _uses(program: KernelGraph) -> dict[int, list[tuple[int, int]]]:
    """tensor guid -> [(op guid, operand position)] of every op that reads it."""
    uses: dict[int, list[tuple[int, int]]] = {}
    for op in program.ops:
        for i, t in enumerate(op.inputs):
            uses.setdefault(t.guid, []).append((op.guid, i))
    return uses


def _made_by(t: DTensor, op_type: str) -> KNOp | None:
    op = t.op
    return op if op is not None and op.op_type == op_type else None


def _scores(A: DTensor) -> tuple[KNOp, KNOp | None, DTensor | None] | None:
    """``A = matmul(Q, K)``: (that matmul, None, None); ``A = mul(matmul(Q, K), s)`` (either operand order)
    with ``s`` of one element: (the matmul, the mul, s); anything else: None."""
    mm = _made_by(A, "matmul")
    if mm is not None:
        return mm, None, None
    mul = _made_by(A, "mul")
    if mul is None:
        return None
    for prod, s in (mul.inputs, mul.inputs[::-1]):
        mm = _made_by(prod, "matmul")
        if mm is not None and prod.dims == A.dims and all(d == 1 for d in s.dims):
            return mm, mul, s
    return None


def match_attention(program: KernelGraph) -> list[Match]:
    """Every ``matmul(div(E, reduction(E, last)), V)`` with ``E = exp(matmul(Q, K))`` (or ``exp(mul(matmul(Q,
    K), s))``, ``s`` of one element) in ``program`` whose intermediates nothing else reads; ``inputs`` are
    (Q, K, V) or (Q, K, V, s), ``output`` is the second matmul's tensor.

    Exact: another reduction dim, a missing exp, the probabilities as the right operand, a
    normaliser that is not E's own row sum, a scale of more than one element, or an intermediate
    read elsewhere is no match.
    """
    if not isinstance(program, KernelGraph):
        raise MirageLabError(f"match_attention: expected a KernelGraph, got {type(program).__name__}")
    uses = _uses(program)
    outputs = {t.guid for t in program.outputs}
    found: list[Match] = []
    for mm2 in program.ops:
        if mm2.op_type != "matmul":
            continue
        P, V = mm2.inputs
        div = _made_by(P, "div")
        if div is None:
            continue
        E, R = div.inputs
        ex, red = _made_by(E, "exp"), _made_by(R, "reduction")
        if ex is None or red is None or red.inputs[0] is not E or red.attrs.get("dim") != E.num_dims - 1:
            continue
        A = ex.inputs[0]
        scores = _scores(A)
        if scores is None or P.dims != E.dims:  # D = E / R element for element: R broadcast along the keys only
            continue
        mm1, mul, scale = scores
        Q, K = mm1.inputs
        # each intermediate read exactly where the pattern reads it, and by nothing else
        wanted = {A.guid: [(ex.guid, 0)], E.guid: sorted([(red.guid, 0), (div.guid, 0)]), R.guid: [(div.guid, 1)],
                  P.guid: [(mm2.guid, 0)]}
        if mul is not None:
            QK = mm1.outputs[0]
            wanted[QK.guid] = [(mul.guid, mul.inputs.index(QK))]
        if any(sorted(uses.get(g, [])) != w for g, w in wanted.items()) or outputs & set(wanted):
            continue
        ops = {mm1.guid, ex.guid, red.guid, div.guid, mm2.guid} | ({mul.guid} if mul is not None else set())
        ins = (Q.guid, K.guid, V.guid) + ((scale.guid,) if scale is not None else ())
        found.append(Match(frozenset(ops), ins, mm2.outputs[0].guid))
    return found


def sdpa_attention(q, k, v, s=None):
    """softmax((q @ k) * s) @ v for q [..., L, d], keys stored transposed k [..., d, S], v [..., S, dv] and
    s a one-element tensor (None: 1): one torch.nn.functional.scaled_dot_product_attention call (scale
    1.0, s folded into q; FlashAttention where it applies)."""
    import torch  # here: this source is what export writes out, and the module imports without torch

    L, d, S, dv = q.shape[-2], q.shape[-1], v.shape[-2], v.shape[-1]
    if s is not None:  # a tensor, not sdpa's float scale: its value stays on the device (CUDA graphs)
        q = q * s
    q4 = q.reshape(-1, 1, L, d)
    # the attention kernels read keys as [S, d] rows: the one copy, of K (Q and V are views)
    k4 = k.transpose(-1, -2).contiguous().reshape(-1, 1, S, d)
    v4 = v.reshape(-1, 1, S, dv)
    o = torch.nn.functional.scaled_dot_product_attention(q4, k4, v4, scale=1.0)
    return o.reshape(*q.shape[:-2], L, dv)


@dataclass(frozen=True)
class LibraryLowering:
    """A registered library lowering: its contender name, the title a report says, its function and matcher."""

    name: str
    title: str
    function: Callable[..., torch.Tensor]
    match: Callable[[KernelGraph], list[Match]]

    def substitutes(self, program: KernelGraph) -> "tuple[Substitute, ...]":
        """One :class:`Substitute` per match in ``program`` (none where the pattern is absent)."""
        from ..runtime.torch_fn import Substitute

        src = inspect.getsource(self.function)
        return tuple(Substitute(self.name, m.ops, m.inputs, m.output, self.function, src) for m in self.match(program))


LIBRARIES: dict[str, LibraryLowering] = {
    "sdpa": LibraryLowering("sdpa", "FlashAttention (sdpa)", sdpa_attention, match_attention),
}


def library_lowerings(program: KernelGraph) -> list[str]:
    """The names of the registered library lowerings that match part of ``program`` (plain ops only)."""
    if program.customized_ops:
        return []
    return [name for name, lib in LIBRARIES.items() if lib.match(program)]


def library_title(lowering: str) -> str | None:
    """What a report calls the lowering (``"FlashAttention (sdpa)"``), ``None`` if it is no library lowering."""
    lib = LIBRARIES.get(lowering)
    return None if lib is None else lib.title


def library_function(program: KernelGraph, lowering: str) -> Any:
    """The program run with the library ``lowering`` in place of its matches: a ``ProgramFunction``
    (called like a compiled kernel, captured in CUDA graphs). Raises if the lowering does not apply."""
    from ..runtime.program import ProgramFunction

    lib = LIBRARIES.get(lowering)
    if lib is None:
        raise MirageLabError(f"no library lowering {lowering!r}; registered: {', '.join(LIBRARIES)}")
    subs = lib.substitutes(program)
    if not subs:
        raise MirageLabError(f"{lib.title} computes no part of this program (its pattern is not in it)")
    return ProgramFunction(program, compiled=False, substitutes=subs, lowering=lowering)


__all__ = ["Match", "match_attention", "sdpa_attention", "LibraryLowering", "LIBRARIES", "library_lowerings",
           "library_title", "library_function"]
