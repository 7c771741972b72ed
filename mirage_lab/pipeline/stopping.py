"""When tuning has its answer: the variants the cost model still rates as possible winners.

The cost model ranks lowerings within a group — one candidate, FMA or tensor cores, one
block size — but not across groups (measured rank correlation about 0 across them), and
its microseconds are not the GPU's. So each group is calibrated by its own measurements:

* ``ratio(g)`` = the smallest measured / estimated time among the group's timed variants
  (the most optimistic calibration the group has shown);
* an unmeasured variant ``v`` of group ``g`` is a **possible winner** when ``g`` has no
  timed variant yet (nothing is known of it), or when ``estimate(v) · ratio(g)`` is within
  ``(1 + margin)`` of the best time measured so far, μGraph or the program's own lowering.

Tuning stops once no variant left (not yet compiled, checked or timed) is a possible
winner: the best measured can then no longer change by the model's account.
``tune_seconds`` stays a ceiling. :func:`~.autotune.plan_variants` orders each group's
best before any group's second, so every group is calibrated before the rule prunes it.

    >>> from mirage_lab.pipeline.stopping import possible_winners
    >>> # (group, estimate µs, measured µs or None): group "a" measured 2x its estimate
    >>> items = [("a", 5.0, 10.0), ("a", 6.0, None), ("a", 9.0, None), ("b", 50.0, None)]
    >>> possible_winners(items, best_us=10.0, margin=0.25)   # 6*2 = 12 <= 12.5; 9*2 = 18 > 12.5; b unknown
    [1, 3]
"""
from __future__ import annotations

import math
from typing import Hashable, Sequence

# A calibrated estimate up to 25 % above the best measured may still win. Within a group the
# estimates of the option sets are often equal (the cost model does not see pipeline depth or
# mma_b16), so the margin is what a group's other options can gain on its best-estimated one:
# a few percent in the H100 runs (variants.py cites 2 % and 18.2 vs 19.4 µs), 25 % leaves room.
STOP_MARGIN = 0.25


def group_ratios(items: Sequence[tuple[Hashable, float, float | None]]) -> dict[Hashable, float]:
    """Per group: the smallest measured / estimated ratio among its timed items."""
    out: dict[Hashable, float] = {}
    for g, est, us in items:
        if us is not None and math.isfinite(us) and est > 0:
            out[g] = min(out.get(g, math.inf), us / est)
    return out


def possible_winners(items: Sequence[tuple[Hashable, float, float | None]], *, best_us: float,
                     margin: float = STOP_MARGIN, pending: Sequence[int] | None = None) -> list[int]:
    """Indices (into ``items``) of unmeasured items the cost model still rates as possible winners.

    ``items[i] = (group, estimate_us, measured_us or None)``; ``pending``: the indices still
    to be measured (default: every item without a measurement).
    """
    ratios = group_ratios(items)
    todo = [i for i, (_, _, us) in enumerate(items) if us is None] if pending is None else list(pending)
    out = []
    for i in todo:
        g, est, _ = items[i]
        r = ratios.get(g)
        if r is None or not math.isfinite(best_us) or est * r <= best_us * (1 + margin):
            out.append(i)
    return out


__all__ = ["STOP_MARGIN", "group_ratios", "possible_winners"]
