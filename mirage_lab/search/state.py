"""The search's compact state: tensors as :class:`Node`, ops as plain tuples, and the units of work.

A tensor of a partial μGraph is a :class:`Node`: its shape, its fingerprint array (computed
once, when the op is pushed) and its abstract expression. An op is a tuple
``(op type, input indices, attributes)``; a customized op's attributes hold its block ops.
The search is split into :class:`Task` subtrees; a candidate comes back as a :class:`Hit`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence


from ..ops import binary_ops, names, unary_ops
from .arrays import digest_any

# from the ops table (mirage_lab.ops); ops outside the default search rank after the others,
# so a program without them orders its states exactly as before they existed
UNARY = unary_ops()
BINARY = binary_ops()
TYPE_RANK = {t: i for i, t in enumerate(
    names(searched=True)[:-1] + ("rms_norm", "accum", "customized")
    + tuple(n for n in unary_ops(searched=False) + binary_ops(searched=False)))}


@dataclass
class Node:
    """A tensor of a partial μGraph: kernel-level (``dims`` = full shape) or a block tile."""

    dims: tuple[int, ...]
    fp: Any                        # None only for a node listed without its fingerprint
    expr: Any
    after_accum: bool = False
    is_input: bool = False
    _key: tuple | None = None

    def key(self) -> tuple:
        """Shape, phase and a digest of the fingerprint: equal keys mean the same tensor."""
        if self._key is None:
            self._key = (self.dims, self.after_accum, tuple(self.fp.shape), digest_any(self.fp))
        return self._key


def order_key(inputs: Sequence[int], op_type: str) -> tuple:
    """Canonical order of ops: the input indices newest first, compared lexicographically, then the type.

    Each op must have a key strictly above the last op's. Mirage compares the indices in the
    order given (ascending here), which makes some μGraphs unbuildable in any order: in
    ``x / sqrt(sum(square(x)))`` with ``x`` computed in the block graph, the divide reads
    ``accum(x)``, made from ``x``, and the sqrt, made after ``square(x)``; ascending keys need
    ``accum(x)`` after ``sum(square(x))``, whose key is larger (nTrans's outer norm). Newest
    first, an op reading the tensor just made always follows, so every DAG has exactly one
    admitted order (pick the ready op of least key each step): the space is complete and
    each graph is still built once.

        >>> order_key((6, 8), "div") > order_key((7,), "sqrt")
        True
    """
    # Kept per (inputs, type): the enumeration asks for the same few hundred keys about a
    # million times in a full-shape search's first 10,000 states (RESULTS.md, "Search speed").
    try:
        return _ORDER_KEYS[inputs, op_type]
    except KeyError:
        k = _ORDER_KEYS[inputs, op_type] = (tuple(sorted(inputs, reverse=True)), TYPE_RANK[op_type])
        return k
    except TypeError:   # unhashable inputs (a list)
        return (tuple(sorted(inputs, reverse=True)), TYPE_RANK[op_type])


_ORDER_KEYS: dict[tuple, tuple] = {}


@dataclass
class BlockRoot:
    """The first choice of a customized op: its inputs and how they are tiled."""

    inputs: tuple[int, ...]
    grid: tuple[int, int, int]
    imaps: tuple[tuple[int, int, int], ...]
    fmaps: tuple[int, ...]
    frange: int


@dataclass(frozen=True)
class Then:
    """A kernel task's second kernel op and the choice after it (``None``: that op's state alone)."""

    op: tuple
    child: Any = None


@dataclass
class Task:
    """An independent subtree: the root's first op (a kernel op tuple, or a :class:`BlockRoot`)."""

    index: int
    kind: str                      # "kernel" | "block"
    op: Any
    child: Any = None              # kernel tasks: the second choice (None: the first op's state alone; Then: a path)

    @property
    def task_id(self) -> str:
        return f"{self.index}:{self.kind}:{self.op!r}:{self.child!r}"


@dataclass
class Hit:
    """A candidate as plain data: the kernel ops after the inputs (see :mod:`.build`)."""

    ops: list[tuple]
    output_perm: tuple[int, ...]
    leaves: tuple[int, ...]



class Cancelled(Exception):
    """Raised inside a task when its ``should_stop`` answers yes."""
