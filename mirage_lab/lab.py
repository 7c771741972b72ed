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

from .lazy import lazy_attributes

_LAZY = {
    "explore": ("mirage_lab.widgets", "explore"),
    "SearchExplorer": ("mirage_lab.widgets", "SearchExplorer"),
    "ExplorerSession": ("mirage_lab.widgets.session", "ExplorerSession"),
    "CandidateRecord": ("mirage_lab.widgets", "CandidateRecord"),
    "latency_figure": ("mirage_lab.viz.plots", "latency_figure"),
    "progress_figure": ("mirage_lab.viz.plots", "progress_figure"),
}
__all__ = list(_LAZY)

__getattr__, __dir__ = lazy_attributes(globals(), _LAZY)
