"""Notebook widgets built on the search, the drawings, the code generator and the runtime.

:func:`explore` (also ``mi.lab.explore``) runs a search in the background and shows it
live: progress, a sortable table of candidates, the selected candidate's drawing at every
level, its generated code and verification, Stop, Export and (on a GPU) Measure.

    >>> from mirage_lab.widgets import SearchExplorer, explore
"""
from .explorer import SearchExplorer, explore
from .records import CandidateRecord
from .table import CandidateTable

__all__ = ["explore", "SearchExplorer", "CandidateRecord", "CandidateTable"]
