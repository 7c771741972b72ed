"""Notebook widgets built on the search, the drawings, the code generator and the runtime.

:func:`explore` (also ``mi.lab.explore``) runs a search in the background and shows it
live: progress, a sortable table of candidates, the selected candidate's drawing at every
level, its generated code and verification, Stop, Export and (on a GPU) Measure. The
state behind it is an :class:`ExplorerSession` (:mod:`.session`), which needs no
ipywidgets: the widget modules load on first use of a name that needs them.

    >>> from mirage_lab.widgets import ExplorerSession, SearchExplorer, explore
"""
from __future__ import annotations

from ..lazy import lazy_attributes
from .records import CandidateRecord
from .session import ExplorerSession

_LAZY = {  # ipywidgets loads only with these
    "explore": ("mirage_lab.widgets.explorer", "explore"),
    "SearchExplorer": ("mirage_lab.widgets.explorer", "SearchExplorer"),
    "CandidateTable": ("mirage_lab.widgets.table", "CandidateTable"),
}
__all__ = ["explore", "SearchExplorer", "ExplorerSession", "CandidateRecord", "CandidateTable"]

__getattr__, __dir__ = lazy_attributes(globals(), _LAZY)
