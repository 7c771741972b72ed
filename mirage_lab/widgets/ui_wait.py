"""Block a notebook cell while the widgets stay live: clicks are handled during the wait.

A cell that blocks (``explorer.wait()``, ``session.verified(i, timeout)``) holds the kernel's
main thread, and the kernel handles a widget's messages (a click on Stop, on a table row) on
that thread: left alone they queue until the cell ends, so Stop could never stop a search
from the next cell of a Run All. :func:`wait_until` keeps them flowing while it waits:

* on kernels that pump their own messages (``kernel.do_one_iteration``: ipykernel 6 and
  early 7), through jupyter-ui-poll, which also holds back the next cells' execute requests
  until this one ends;
* on ipykernel 7 with subshells (7.4 has no ``do_one_iteration``, so jupyter-ui-poll would
  silently do nothing), by routing the given widgets' comm messages to a kernel subshell
  (a thread of its own) for the length of the wait: the click handlers run there, under the
  widgets' own locks.

Outside a kernel, or off the main thread, it is a plain wait.

    >>> import threading
    >>> ev = threading.Event(); ev.set()
    >>> wait_until(ev.is_set, timeout=1)
    True
"""
from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterable, Iterator

POLL_S = 0.05           # the longest a click waits to be handled (plus its handler's own time)
_subshell_id: str | None = None
_subshell_lock = threading.Lock()
_active = threading.local()


def _kernel() -> Any:
    """The running ipykernel, or None (a script, a test, a thread that is not the main one)."""
    if threading.current_thread() is not threading.main_thread():
        return None
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    shell = get_ipython()
    return getattr(shell, "kernel", None) if shell is not None else None


def _plain(done: Callable[[], bool], deadline: float | None) -> bool:
    while not done():
        if deadline is not None and time.monotonic() >= deadline:
            return done()
        time.sleep(POLL_S)
    return True


def wait_until(done: Callable[[], bool], timeout: float | None = None, widgets: Iterable[Any] = ()) -> bool:
    """Wait until ``done()`` is true or ``timeout`` s pass; returns ``done()``. In a notebook, clicks on
    ``widgets`` (and, through jupyter-ui-poll where it works, on any widget) are handled meanwhile."""
    deadline = None if timeout is None else time.monotonic() + timeout
    kernel = _kernel()
    if kernel is None or getattr(_active, "on", False):  # no kernel, or a wait inside a click handler's wait
        return _plain(done, deadline)
    _active.on = True
    try:
        if hasattr(kernel, "do_one_iteration"):
            from jupyter_ui_poll import ui_events

            with ui_events() as poll:
                while not done():
                    if deadline is not None and time.monotonic() >= deadline:
                        break
                    poll(10)
                    time.sleep(POLL_S)
            return done()
        widgets = list(widgets)
        with _comms_on_subshell(kernel) as route:
            while not done():
                route(widgets)  # again each time: rows added to a table during the wait
                if deadline is not None and time.monotonic() >= deadline:
                    break
                time.sleep(POLL_S)
            return done()
    finally:
        _active.on = False


def _widget_tree(widgets: Iterable[Any]) -> Iterator[Any]:
    """The widgets and every widget they hold (children, tabs' children, ...), each once."""
    seen: set[int] = set()
    todo = list(widgets)
    while todo:
        w = todo.pop()
        if id(w) in seen or getattr(w, "comm", None) is None:
            continue
        seen.add(id(w))
        yield w
        for name in getattr(w, "keys", ()):
            v = getattr(w, name, None)
            for x in (v if isinstance(v, (list, tuple)) else (v,)):
                if hasattr(x, "comm") and hasattr(x, "keys"):
                    todo.append(x)


def _subshell(kernel: Any) -> str | None:
    """A kernel subshell of this process's, made once (ipykernel 7: a thread with its own message loop)."""
    global _subshell_id
    manager = getattr(getattr(kernel, "shell_channel_thread", None), "manager", None)
    if manager is None:
        return None
    with _subshell_lock:
        if _subshell_id is None or _subshell_id not in manager.list_subshell():
            # What a client's create_subshell_request does on the control thread: ask the shell channel
            # thread. That socket is the control thread's; it uses it only for a client's subshell
            # requests, which JupyterLab does not send on its own, and this runs once per kernel.
            sock = manager.control_to_shell_channel.from_socket
            sock.send_json({"type": "create"})
            reply = sock.recv_json()
            _subshell_id = reply.get("subshell_id") if reply.get("status") == "ok" else None
    return _subshell_id


@contextmanager
def _comms_on_subshell(kernel: Any) -> Iterator[Callable[[Iterable[Any]], None]]:
    """Yields ``route(widgets)``, which sends the front end's messages for ``widgets`` (and the widgets they
    hold) to a subshell until the block ends; without subshells, ``route`` does nothing."""
    routed: dict[int, Any] = {}
    sid: list[str | None] = []  # made on first use: a wait with no widgets needs no subshell

    def route(widgets: Iterable[Any]) -> None:
        for w in _widget_tree(widgets):
            if not sid:
                sid.append(_subshell(kernel))
            if sid[0] is None:
                return
            c = w.comm
            if id(c) not in routed:  # ipykernel asks the comm where to send the front end's message
                c._reply_subshell_for = lambda data, default, _sid=sid[0]: _sid
                routed[id(c)] = c

    try:
        yield route
    finally:
        for c in routed.values():
            c.__dict__.pop("_reply_subshell_for", None)


__all__ = ["wait_until", "POLL_S"]
