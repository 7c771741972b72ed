"""The explorer's progress line as HTML: counter cards and the status (pure functions, no widgets).

    >>> from mirage_lab.search.events import SearchStats
    >>> 'data-stat="states"' in stat_cards_html(SearchStats(states=1200), candidates=2, rate=0.0)
    True
    >>> status_html("running", SearchStats(), candidates=1, errors=[])
    '<span class="mlab-status" data-state="running">⏳ searching… 1 candidate so far</span>'
"""
from __future__ import annotations

import html
from typing import Any, Sequence

from ..search.events import SearchStats

STAT_CARDS = [  # (SearchStats field or derived key, label)
    ("states", "states"), ("rate", "states/s"), ("pruned_expr", "pruned · expression"),
    ("pruned_dedup", "pruned · dedup"), ("pruned_other", "pruned · shape/limits"),
    ("fingerprint_tests", "fingerprint tests"), ("reused", "memo replays"), ("candidates", "candidates"),
    ("elapsed", "elapsed"),
]


def recent_rate(history: Sequence[dict[str, Any]]) -> float:
    """States per second over the last ~2 s of ``history`` (the whole run while shorter)."""
    if len(history) < 2:
        return 0.0
    last = history[-1]
    first = next((s for s in reversed(history) if last["elapsed"] - s["elapsed"] >= 2.0), history[0])
    dt = last["elapsed"] - first["elapsed"]
    return (last["states"] - first["states"]) / dt if dt > 0 else 0.0


def stat_cards_html(stats: SearchStats, candidates: int, rate: float) -> str:
    """One card per counter this version of the search keeps, plus the rate and the candidates found."""
    vals = {k: getattr(stats, k) for k, _ in STAT_CARDS if hasattr(stats, k)}
    vals["candidates"] = candidates
    vals["rate"] = rate
    vals.setdefault("elapsed", 0.0)
    cards = []
    for key, label in STAT_CARDS:
        if key not in vals:  # a counter this version of the search does not keep
            continue
        v = vals[key]
        text = f"{v:.1f} s" if key == "elapsed" else f"{v:,.0f}"
        cards.append(f'<div class="mlab-stat" data-stat="{key}" style="border:1px solid #e0e0e0;'
                     f'border-radius:4px;padding:2px 8px;min-width:92px"><div style="font-size:11px;'
                     f'color:#616161">{label}</div><div style="font-size:15px;font-weight:600">{text}</div></div>')
    return f'<div style="display:flex;flex-wrap:wrap;gap:6px">{"".join(cards)}</div>'


def status_html(state: str, stats: SearchStats, candidates: int, errors: Sequence[str]) -> str:
    """The status line (``data-state`` is the explorer's state), with the last three errors under it."""
    n = candidates
    if state == "running":
        status = f"⏳ searching… {n} candidate{'s' if n != 1 else ''} so far"
    elif state == "finished":
        status = f"✓ finished in {stats.elapsed:.1f} s: {n} candidate{'s' if n != 1 else ''}"
    elif state == "stopped":
        status = f"■ stopped after {stats.elapsed:.1f} s: {n} candidate{'s' if n != 1 else ''} kept"
    elif state == "stopping":  # cancel asked, the search not yet ended
        status = "■ stopping…"
    elif state == "error":
        status = "✗ the search failed"
    else:
        status = "not started"
    if errors:
        status += "".join(f'<div style="color:#b71c1c">{html.escape(e)}</div>' for e in errors[-3:])
    return f'<span class="mlab-status" data-state="{state}">{status}</span>'
