"""A dict that keeps only its most recently used entries, for process-wide caches.

    >>> c = LRUDict(2)
    >>> c["a"] = 1; c["b"] = 2; _ = c.get("a"); c["c"] = 3
    >>> sorted(c)
    ['a', 'c']
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Any, Hashable


class LRUDict(OrderedDict):
    """An ``OrderedDict`` of at most ``maxsize`` entries; reads and writes make an entry the newest."""

    def __init__(self, maxsize: int) -> None:
        super().__init__()
        self.maxsize = maxsize

    def __getitem__(self, key: Hashable) -> Any:
        value = super().__getitem__(key)
        self.move_to_end(key)
        return value

    def get(self, key: Hashable, default: Any = None) -> Any:
        return self[key] if key in self else default

    def __setitem__(self, key: Hashable, value: Any) -> None:
        super().__setitem__(key, value)
        self.move_to_end(key)
        while len(self) > self.maxsize:
            self.popitem(last=False)
