"""How well the cost model ranks lowerings: Spearman's rank correlation, ties given their average rank.

The tuner spends a short budget in the cost model's order, so what matters is whether the model
orders the variants as the GPU does (issue 19 asks for rho >= 0.8 over the suite). scipy is no
dependency; the ranks are computed here (numpy).

    >>> spearman([1.0, 2.0, 3.0, 4.0], [10.0, 30.0, 20.0, 40.0])
    0.8
    >>> spearman([1.0, 1.0, 2.0], [5.0, 6.0, 7.0])      # tied estimates share rank 1.5
    0.866
    >>> spearman([1.0], [2.0]) is None
    True
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ..errors import MirageLabError


def average_ranks(xs: Sequence[float]) -> np.ndarray:
    """1-based ranks of ``xs``; equal values share the mean of the ranks they span."""
    a = np.asarray(xs, dtype=np.float64)
    order = np.argsort(a, kind="stable")
    ranks = np.empty(len(a), dtype=np.float64)
    sa = a[order]
    i = 0
    while i < len(a):
        j = i
        while j + 1 < len(a) and sa[j + 1] == sa[i]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def spearman(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Spearman's rho of paired samples, rounded to 3 digits: the Pearson correlation of their average
    ranks. ``None`` with fewer than two pairs or where one side is constant (no ranking to compare)."""
    if len(xs) != len(ys):
        raise MirageLabError(f"spearman: {len(xs)} estimates but {len(ys)} measurements; pass them in pairs")
    if len(xs) < 2:
        return None
    if not all(np.isfinite(v) for v in (*xs, *ys)):
        raise MirageLabError("spearman: every estimate and measurement must be a finite number")
    rx, ry = average_ranks(xs), average_ranks(ys)
    rx, ry = rx - rx.mean(), ry - ry.mean()
    den = float(np.sqrt((rx * rx).sum() * (ry * ry).sum()))
    if den == 0.0:
        return None
    return round(float((rx * ry).sum()) / den, 3)


def pooled_spearman(groups: Sequence[Sequence[tuple[float, float]]]) -> dict[str, float | None]:
    """Over several tunings (one program each): ``"pooled"``, rho of every (estimate, measured) pair taken
    together (across programs it also rewards putting big programs after small ones), and ``"mean"``,
    the mean of each program's own rho weighted by its pairs (how well the model ranks within a
    program, which is what the tuner relies on).

        >>> pooled_spearman([[(1, 2), (2, 3), (3, 5)], [(10, 30), (20, 20)]])
        {'pooled': 0.9, 'mean': 0.2, 'programs': 2, 'pairs': 5}
    """
    every = [p for g in groups for p in g]
    pooled = spearman([e for e, _ in every], [m for _, m in every])
    per = [(spearman([e for e, _ in g], [m for _, m in g]), len(g)) for g in groups]
    per = [(r, n) for r, n in per if r is not None]
    n = sum(k for _, k in per)
    mean = round(sum(r * k for r, k in per) / n, 3) if n else None
    return {"pooled": pooled, "mean": mean, "programs": len(per), "pairs": len(every)}


__all__ = ["average_ranks", "spearman", "pooled_spearman"]
