"""The μGraph search: generator, events, executors, checkpoints (MIRAGE_SPEC §2)."""
from .config import SearchConfig, SearchConfigError
from .cost import StaticCost, static_cost
from .events import CandidateFound, Finished, Progress, SearchError, SearchStats
from .cancel import CancelToken
from .checkpoint import CheckpointError, CheckpointRepaired
from .inputs import SearchInputError
from .runner import search
from .results import NoCandidateError, SearchResult, run_search

__all__ = ["search", "run_search", "SearchResult", "SearchConfig", "SearchConfigError", "CancelToken",
           "CheckpointError", "CheckpointRepaired", "SearchInputError", "NoCandidateError", "Progress", "CandidateFound", "Finished",
           "SearchError", "SearchStats", "StaticCost", "static_cost"]
