"""The notebook entry points, as ``mi.lab``: :func:`explore` runs a search with a live widget.

    >>> import mirage_lab as mi
    >>> from mirage_lab import examples as ex
    >>> w = mi.lab.explore(ex.rms_norm_linear_program(4, 256, 256), workers=1, max_kernel_ops=3)
    >>> w.stop()                                  # what the Stop button does; found candidates are kept
    True
    >>> w.state
    'stopped'

The plots are pure functions of :mod:`mirage_lab.viz.plots`, re-exported here. The widget
modules (ipywidgets, plotly) load on first use, so ``import mirage_lab`` stays light for
scripts and search workers.
"""
from __future__ import annotations

from typing import Any

_LAZY = {
    "explore": ("mirage_lab.widgets", "explore"),
    "SearchExplorer": ("mirage_lab.widgets", "SearchExplorer"),
    "ExplorerSession": ("mirage_lab.widgets.session", "ExplorerSession"),
    "CandidateRecord": ("mirage_lab.widgets", "CandidateRecord"),
    "latency_figure": ("mirage_lab.viz.plots", "latency_figure"),
    "progress_figure": ("mirage_lab.viz.plots", "progress_figure"),
}
__all__ = list(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        mod, attr = _LAZY[name]
        value = getattr(importlib.import_module(mod), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'mirage_lab.lab' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(list(globals()) + __all__)
