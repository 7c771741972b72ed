"""Handing tuning work to GPU workers in small units: a fast GPU takes more, a lost worker's units move.

Plain bookkeeping, no Dask: :mod:`.distributed` drives it with the cluster's futures, and the
tests drive it with fake workers. The planned variants (:func:`~.autotune.plan_variants`, the
order a time budget spends on them) are cut into :class:`Unit` s of a few variants each. A
worker asks for work whenever it has fewer than ``depth`` units in hand (pull, not fixed
shares: a GPU that finishes sooner asks sooner). A worker that leaves gives its units back to
the front of the queue, and each such move is recorded, so the report can say which units
moved and from which worker.

    >>> s = UnitScheduler(make_units(5, size=2), depth=1)
    >>> s.assign(["w0", "w1"])
    [('w0', Unit(id=0, variants=(0, 1))), ('w1', Unit(id=1, variants=(2, 3)))]
    >>> s.lose("w1")                      # w1 died with unit 1 in hand: it goes back first
    [Unit(id=1, variants=(2, 3))]
    >>> s.done("w0", 0); s.assign(["w0"])
    [('w0', Unit(id=1, variants=(2, 3)))]
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

from ..errors import MirageLabError


@dataclass(frozen=True)
class Unit:
    """A few planned variants (their indices in the plan) measured by one worker in one task."""

    id: int
    variants: tuple[int, ...]


TAKEN = "taken by an idle worker"


@dataclass
class Move:
    """A unit given back by a worker that left before finishing it (or taken from one by an idle worker,
    ``reason`` :data:`TAKEN`), and where it went next."""

    unit: int
    variants: list[int]
    from_worker: str
    to_worker: str | None = None   # set when it is handed out again
    reason: str = "worker lost"


def _check_size(size: int) -> None:
    if size < 1:
        raise MirageLabError(f"a tuning unit holds at least one variant, got unit size {size}: pass unit_variants >= 1")


def make_units(n_variants: int, *, size: int) -> list[Unit]:
    """The plan's variants ``0..n_variants-1`` in plan order, cut into units of ``size`` (the last may be smaller)."""
    _check_size(size)
    return [Unit(i // size, tuple(range(i, min(i + size, n_variants)))) for i in range(0, n_variants, size)]


def unit_size(n_variants: int, n_workers: int, *, size: int, depth: int) -> int:
    """The unit size that lets every worker hold ``depth`` units: at most ``size``, smaller for a short plan.

    With few variants, units of ``size`` leave GPUs idle: 8 variants in units of 4 with ``depth`` 2 went
    to whichever worker asked first, and a second H200 cut a fixed-work tuning only 1.25x (2026-11-27).
    """
    _check_size(size)
    return max(1, min(size, -(-n_variants // max(1, n_workers * depth))))


@dataclass
class UnitScheduler:
    """Pending units, the units each worker holds, what each worker finished, and every move.

    ``depth``: units a worker may hold at once (2 keeps a GPU busy while its next unit is sent);
    ``max_moves``: a unit that has lost this many workers is the cause, not their victim: it is
    given up (:attr:`given_up`) instead of handed to the next.
    """

    units: Sequence[Unit]
    depth: int = 2
    max_moves: int = 3
    pending: deque = field(init=False)
    held: dict[str, list[int]] = field(init=False, default_factory=dict)      # worker -> unit ids in hand
    finished: dict[int, str] = field(init=False, default_factory=dict)        # unit id -> worker that did it
    skipped: set[int] = field(init=False, default_factory=set)
    given_up: set[int] = field(init=False, default_factory=set)
    moves: list[Move] = field(init=False, default_factory=list)
    lost: list[str] = field(init=False, default_factory=list)

    def __post_init__(self) -> None:
        if self.max_moves < 1:
            raise MirageLabError(f"max_moves must be at least 1, got {self.max_moves}")
        if self.depth < 1:
            raise MirageLabError(f"a worker must be able to hold at least one unit, got depth {self.depth}")
        self.by_id = {u.id: u for u in self.units}
        self.pending = deque(u.id for u in self.units)

    # ------------------------------------------------------------------ handing out
    def assign(self, workers: Iterable[str]) -> list[tuple[str, Unit]]:
        """Fill every live worker up to ``depth`` units, in turns (one unit each per round), from the queue's front."""
        live = [w for w in workers if w not in self.lost]
        for w in live:
            self.held.setdefault(w, [])
        out: list[tuple[str, Unit]] = []
        while self.pending:
            hungry = [w for w in live if len(self.held[w]) < self.depth]
            if not hungry:
                break
            for w in hungry:
                if not self.pending:
                    break
                uid = self.pending.popleft()
                self.held[w].append(uid)
                for m in self.moves:
                    if m.unit == uid and m.to_worker is None:
                        m.to_worker = w
                out.append((w, self.by_id[uid]))
        return out

    def take_waiting(self, workers: Iterable[str],
                     can_take: Callable[[str, int], bool] = lambda w, u: True) -> list[tuple[str, str, Unit]]:
        """Idle workers take units that wait in another worker's hands; returns ``(from, to, unit)`` triples.

        Only once nothing is pending: each worker in ``workers`` that holds no unit takes the last unit
        of the worker holding the most (two or more: its first is being measured, the others wait behind
        it). Without this a worker stuck on a long unit (its process's first torch.compile build, 19 s
        on an H200) kept the unit behind it while the other GPU sat idle (2026-11-29, 34 s of a 65 s run).
        Each is recorded in :attr:`moves` with the reason ``TAKEN``; it does not count as a lost worker.
        ``can_take(holder, unit_id)``: False keeps a unit where it is (its results are already back).
        """
        if self.pending:
            return []
        out = []
        for w in workers:
            if w in self.lost or self.held.get(w):
                continue
            victims = [v for v, h in self.held.items()
                       if v != w and v not in self.lost and len(h) >= 2 and can_take(v, h[-1])]
            if not victims:
                break
            victim = max(victims, key=lambda v: len(self.held[v]))
            uid = self.held[victim].pop()
            self.held.setdefault(w, []).append(uid)
            self.moves.append(Move(uid, list(self.by_id[uid].variants), victim, w, reason=TAKEN))
            out.append((victim, w, self.by_id[uid]))
        return out

    def skip(self, worker: str, unit_id: int) -> None:
        """The unit was dropped before running (no variant in it can still win): it counts as done, untried."""
        self.held[worker].remove(unit_id)
        self.skipped.add(unit_id)

    def done(self, worker: str, unit_id: int) -> None:
        """``worker`` returned the unit's results."""
        if unit_id not in self.held.get(worker, []):
            raise MirageLabError(f"unit {unit_id} was not held by {worker}: its results cannot be accepted twice")
        self.held[worker].remove(unit_id)
        self.finished[unit_id] = worker

    def retry(self, worker: str, unit_id: int) -> None:
        """The unit's task was cancelled on a worker that is still there: it goes back to the queue's front, no move."""
        self.held[worker].remove(unit_id)
        self.pending.appendleft(unit_id)

    def lose(self, worker: str, reason: str = "worker lost") -> list[Unit]:
        """``worker`` left: the units it held go back to the queue's front, in their order; returns them.

        A unit that has now lost ``max_moves`` workers is not returned: it goes to :attr:`given_up`.
        """
        back = self.held.pop(worker, [])
        if worker not in self.lost:
            self.lost.append(worker)
        for uid in back:
            self.moves.append(Move(uid, list(self.by_id[uid].variants), worker, reason=reason))
        again = [u for u in back if sum(m.unit == u and m.reason != TAKEN for m in self.moves) < self.max_moves]
        self.given_up.update(u for u in back if u not in again)
        for uid in reversed(again):
            self.pending.appendleft(uid)
        return [self.by_id[u] for u in again]

    def drop_pending(self) -> list[Unit]:
        """The budget ran out: the units not yet handed out are left untried; returns them."""
        out = [self.by_id[u] for u in self.pending]
        self.pending.clear()
        return out

    # ------------------------------------------------------------------ state
    @property
    def complete(self) -> bool:
        """Nothing pending and nothing in any worker's hands (done, skipped or given up)."""
        return not self.pending and not any(self.held.values())

    def worker_of(self, variant: int) -> str | None:
        """The worker whose results hold this variant (where its compiled kernel lives), if done."""
        for uid, w in self.finished.items():
            if variant in self.by_id[uid].variants:
                return w
        return None

    def units_per_worker(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for w in self.finished.values():
            out[w] = out.get(w, 0) + 1
        return out


__all__ = ["Unit", "Move", "TAKEN", "UnitScheduler", "make_units", "unit_size"]
