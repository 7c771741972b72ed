"""The door through which the IR's conveniences reach the layers above it.

``KernelGraph.__call__``, ``.search`` and ``.superoptimize`` (Mirage's API) need the
runtime, the search and the tuner; its notebook display needs the drawings. All sit above
the IR, which imports none of them: :mod:`mirage_lab.pipeline` and :mod:`mirage_lab.viz`
install their functions here when they are imported (``import mirage_lab`` does both), and
the methods call through.

    >>> import mirage_lab  # installs the pipeline's and viz's functions
    >>> sorted(k for k, v in _HOOKS.items() if v is not None)
    ['call', 'inspect', 'mimebundle', 'search', 'superoptimize', 'svg']
"""
from __future__ import annotations

from typing import Any, Callable

from ..errors import MirageLabError

_HOOKS: dict[str, Callable[..., Any] | None] = {"call": None, "search": None, "superoptimize": None,
                                                "mimebundle": None, "svg": None, "inspect": None}
_PROVIDER = {"call": "mirage_lab.pipeline", "search": "mirage_lab.pipeline", "superoptimize": "mirage_lab.pipeline",
             "mimebundle": "mirage_lab.viz", "svg": "mirage_lab.viz", "inspect": "mirage_lab.viz"}


def install(**fns: Callable[..., Any]) -> None:
    """Register the functions behind the conveniences (the pipeline does this on import)."""
    for name, fn in fns.items():
        if name not in _HOOKS:
            raise MirageLabError(f"ir.hooks: unknown hook {name!r}")
        _HOOKS[name] = fn


def get(name: str) -> Callable[..., Any]:
    fn = _HOOKS.get(name)
    if fn is None:
        import importlib

        importlib.import_module(_PROVIDER[name])  # installs the hooks; the IR itself never imports it
        fn = _HOOKS[name]
    assert fn is not None
    return fn
