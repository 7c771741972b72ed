"""Where mirage_lab keeps its files, and whether kernels run on the CUDA simulator.

Apart from :mod:`.kernel` (which imports torch) so that the persistent cache and the search
can use them without loading torch.

    >>> isinstance(cache_root(), Path), default_cache_dir().name
    (True, 'kernels')
"""
from __future__ import annotations

import os
from pathlib import Path


def simulator_active() -> bool:
    """True when numba runs kernels on the CPU simulator (``NUMBA_ENABLE_CUDASIM=1``)."""
    return os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"


def cache_root() -> Path:
    """mirage_lab's cache folder: ``$MIRAGE_LAB_CACHE``, else ``$XDG_CACHE_HOME/mirage_lab``, else ``~/.cache/mirage_lab``.

    Kernels live under ``kernels/``, superoptimize's results under ``results/`` (``mirage_lab.cache``).
    """
    env = os.environ.get("MIRAGE_LAB_CACHE")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "mirage_lab"


def default_cache_dir() -> Path:
    return cache_root() / "kernels"


__all__ = ["cache_root", "default_cache_dir", "simulator_active"]
