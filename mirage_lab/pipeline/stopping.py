"""When tuning has its answer: the variants the cost model still rates as possible winners.

The cost model ranks lowerings within a group — one candidate, FMA or tensor cores, one
block size — but not across groups (measured rank correlation about 0 across them), and
its microseconds are not the GPU's. So each group is calibrated by its own measurements:

* ``ratio(g)`` = the smallest measured / estimated time among the group's timed variants
  (the most optimistic calibration the group has shown);
* an unmeasured variant ``v`` of group ``g`` is a **possible winner** when
  ``estimate(v) · ratio(g)`` is within ``(1 + margin)`` of the best time measured so far,
  μGraph or the program's own lowering.

A group with no timed variant yet borrows the calibration of its **kind** (``kind(g)``; in
the tuner FMA or tensor-core lowering, :func:`lowering_kind`): ``ratio(k)``, the smallest
ratio of the measured groups of that kind, loosened by ``safety`` because groups of a kind
scatter around it (in one H100 run: FMA 0.24–2.4, tensor cores 1.15–3.5). Such a group is a
possible winner when ``estimate(v) · ratio(k)`` is within ``safety · (1 + margin)`` of the
best. A kind with nothing measured yet is a possible winner. What to *send* of the possible
winners (``wait=True``): of a kind with nothing measured, its first pending variant in plan
order (it calibrates the kind), the others wait for it; of a group calibrated by its kind,
its first pending variant, the others wait for that one's time. A pool compiling many
variants at once (32 on the 16-core H100 host) would otherwise send a whole kind, or a
group's every option set, before anything of it were known. Without this, every group was
measured once: 24 of the 62 timings of the README example (H100, 2026-11-27) went on FMA
groups estimated 2.6–93× the best measured; none came near.

Tuning stops once no variant left (not yet compiled, checked or timed) is a possible
winner: the best measured can then no longer change by the model's account.
``tune_seconds`` stays a ceiling. :func:`~.autotune.plan_variants` orders each group's
best before any group's second, and the groups by estimate, so the first group of a kind
measured is its best-estimated one.

    >>> from mirage_lab.pipeline.stopping import possible_winners
    >>> # (group, estimate µs, measured µs or None): group "a" measured 2x its estimate
    >>> items = [("a", 5.0, 10.0), ("a", 6.0, None), ("a", 9.0, None), ("b", 50.0, None)]
    >>> possible_winners(items, best_us=10.0, margin=0.25)   # 6*2 = 12 <= 12.5; 9*2 = 18 > 12.5; b unknown
    [1, 3]
    >>> # b of a's kind: 50 * 2 = 100 > 2.5 * 12.5, ruled out without being timed
    >>> possible_winners(items, best_us=10.0, margin=0.25, kind=lambda g: "k", safety=2.5)
    [1]
"""
from __future__ import annotations

import math
from typing import Any, Callable, Hashable, Sequence

# A calibrated estimate up to 25 % above the best measured may still win. Within a group the
# estimates of the option sets are often equal (the cost model does not see pipeline depth or
# mma_b16), so the margin is what a group's other options can gain on its best-estimated one:
# a few percent in the H100 runs (variants.py cites 2 % and 18.2 vs 19.4 µs), 25 % leaves room.
STOP_MARGIN = 0.25
# How far a group with no timed variant may beat its kind's most optimistic calibration and still
# be timed. Chosen by benchmarks/stop_replay.py on the 53 stored H100 records (RESULTS.md, "Tuning
# that stops sooner"): every record keeps its best from 2.0 on (two need 2.0: a first tensor-core
# group measured 2.9x its estimate, the winning variant 0.64x); 2.5 leaves 25 % over that at the
# same cost in the README example (35 variants timed); 3.0 would time 47-51 there.
KIND_SAFETY = 2.5

Item = tuple[Hashable, float, "float | None"]


def group_ratios(items: Sequence[Item]) -> dict[Hashable, float]:
    """Per group: the smallest measured / estimated ratio among its timed items."""
    out: dict[Hashable, float] = {}
    for g, est, us in items:
        if us is not None and math.isfinite(us) and est > 0:
            out[g] = min(out.get(g, math.inf), us / est)
    return out


def kind_ratios(ratios: dict[Hashable, float], kind: Callable[[Hashable], Hashable]) -> dict[Hashable, float]:
    """Per kind: the smallest ratio among its measured groups (``ratios``: :func:`group_ratios`)."""
    out: dict[Hashable, float] = {}
    for g, r in ratios.items():
        k = kind(g)
        out[k] = min(out.get(k, math.inf), r)
    return out


def possible_winners(items: Sequence[Item], *, best_us: float, margin: float = STOP_MARGIN,
                     pending: Sequence[int] | None = None, kind: Callable[[Hashable], Hashable] | None = None,
                     safety: float = KIND_SAFETY, wait: bool = False, probes: int = 1) -> list[int]:
    """Indices (into ``items``, in plan order) of unmeasured items the cost model still rates as possible winners.

    ``items[i] = (group, estimate_us, measured_us or None)``; ``pending``: the indices still
    to be measured, including those compiling (default: every item without a measurement).
    ``kind``: a group's kind, whose calibration (times ``safety``) rules on groups with nothing
    timed; ``None``: every item of a group with nothing timed is a possible winner.

    ``wait``: only those to send now. Of a kind with nothing timed, its first ``probes`` pending
    items (they calibrate it); of a group calibrated by its kind, its first pending item (the
    others wait for its time). The rest can still win, and are sent once these come back.
    """
    ratios = group_ratios(items)
    kinds = kind_ratios(ratios, kind) if kind is not None else {}
    bound = best_us * (1 + margin)
    todo = [i for i, (_, _, us) in enumerate(items) if us is None] if pending is None else sorted(pending)
    probing: dict[Hashable, int] = {}   # uncalibrated kind -> its items let through so far
    first: set[Hashable] = set()        # groups calibrated by their kind whose first pending item is let through
    out = []
    for i in todo:
        g, est, _ = items[i]
        r = ratios.get(g)
        if r is not None:
            if not math.isfinite(best_us) or est * r <= bound:
                out.append(i)
        elif kind is None:
            out.append(i)
        elif (rk := kinds.get(kind(g))) is not None:
            if (not math.isfinite(best_us) or est * rk <= bound * safety) and not (wait and g in first):
                first.add(g)
                out.append(i)
        elif not wait or probing.get(kind(g), 0) < probes:
            probing[kind(g)] = probing.get(kind(g), 0) + 1
            out.append(i)
    return out


def variant_group(variant: Any) -> tuple[int, bool, int]:
    """The group a lowering variant is calibrated in: (candidate, tensor cores, threads per block)."""
    return (variant.candidate, bool(variant.options.mma), variant.threads)


def lowering_kind(group: tuple[int, bool, int]) -> bool:
    """A group's kind (:func:`variant_group`'s): tensor cores or FMA, whose estimates err alike."""
    return group[1]


def rule_items(results: Sequence[Any]) -> list[Item]:
    """The rule's items of the tuner's ``VariantResult`` list: group, estimate, measured median (or None)."""
    return [(variant_group(r.variant), r.estimate.us, r.median_us if r.ok and r.timings else None) for r in results]


__all__ = ["KIND_SAFETY", "STOP_MARGIN", "group_ratios", "kind_ratios", "lowering_kind", "possible_winners",
           "rule_items", "variant_group"]
