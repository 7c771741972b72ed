"""Stopping a search: the caller's :class:`CancelToken`, and the flag file its workers poll.

    >>> token = CancelToken()
    >>> token.is_set()
    False
    >>> token.cancel(); token.is_set()
    True
"""
from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable

from .lifetime import mark_owned


class CancelToken:
    """Set from any thread (a Stop button) to end a running search within a second.

    ``cancel(finish_confirmations=True)`` is a budget's stop (``search_seconds``, the quiet rule, the demo's time
    limit): a search with no candidate yet first waits, a while, for the hits its workers are confirming
    (``runner.CONFIRM_GRACE_S``). A plain ``cancel()`` (a Stop button, the user) does not wait, and overrides an
    earlier budget's stop.

        >>> t = CancelToken(); t.cancel(finish_confirmations=True); t.finish_confirmations
        True
        >>> t.cancel(); t.finish_confirmations
        False
    """

    def __init__(self) -> None:
        self._ev = threading.Event()
        self.finish_confirmations = False

    def cancel(self, finish_confirmations: bool = False) -> None:
        self.finish_confirmations = bool(finish_confirmations) and (self.finish_confirmations or not self._ev.is_set())
        self._ev.set()

    def is_set(self) -> bool:
        return self._ev.is_set()


class CancelFlag:
    """A file, in a temporary folder of its own, whose existence tells the workers to stop.

    A file works across threads, forked processes and Dask workers on this machine alike.
    The folder is removed by :meth:`remove_when` once no worker can still be polling it:
    at once when the executor is idle, otherwise by a background thread when it becomes
    idle (a worker that finds the file gone would not stop), and at interpreter exit at the
    latest.
    """

    def __init__(self) -> None:
        self.folder = tempfile.mkdtemp(prefix="mirage_lab_cancel_")
        self.path = os.path.join(self.folder, "cancel")
        mark_owned(self.folder)   # a search killed before it removes the folder: the next one does

    def set(self) -> None:
        Path(self.path).touch()

    def remove_when(self, idle: Callable[[], bool], poll: float = 0.1) -> None:
        """Remove the folder as soon as ``idle()`` (no worker of this search still runs) answers yes."""
        if idle():
            self.remove()
            return
        atexit.register(self.remove)

        def wait() -> None:
            while not idle():
                time.sleep(poll)
            self.remove()

        threading.Thread(target=wait, daemon=True, name="mirage_lab-search-cleanup").start()

    def remove(self) -> None:
        atexit.unregister(self.remove)
        try:
            shutil.rmtree(self.folder)
        except FileNotFoundError:   # removed already (by the other of the waiting thread and atexit)
            pass
