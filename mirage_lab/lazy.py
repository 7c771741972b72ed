"""Module attributes imported on first use (PEP 562), so a package stays light until a name is needed.

``mirage_lab.lab`` and ``mirage_lab.widgets`` name their ipywidgets / plotly entry points
this way: ``import mirage_lab`` does not load the widget stack, the first ``mi.lab.explore``
does. ``mirage_lab.verify.field`` resolves the names that moved out of it this way (an
eager import there would be circular).

    >>> __getattr__, __dir__ = lazy_attributes({"__name__": "demo", "__all__": ["sqrt"]},
    ...                                        {"sqrt": ("math", "sqrt")})
    >>> __getattr__("sqrt")(9.0)
    3.0
    >>> __getattr__("cbrt")
    Traceback (most recent call last):
    ...
    AttributeError: module 'demo' has no attribute 'cbrt'
"""
from __future__ import annotations

import importlib
from typing import Any, Callable, Mapping


def lazy_attributes(namespace: dict[str, Any], table: Mapping[str, tuple[str, str | None]]
                    ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A module's ``__getattr__`` and ``__dir__`` for the names of ``table`` (``name -> (module, attribute)``).

    An attribute of ``None`` names the module itself (a package's submodule, e.g. ``mi.runtime.profile``).

    ``namespace`` is the module's ``globals()``: a name, once imported, is stored there, so
    later lookups do not come back here. ``__dir__`` lists the module's names, ``__all__``
    and ``table``'s names.
    """
    module = namespace["__name__"]

    def __getattr__(name: str) -> Any:
        if name in table:
            mod, attr = table[name]
            value = importlib.import_module(mod)
            if attr is not None:
                value = getattr(value, attr)
            namespace[name] = value
            return value
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(namespace.get("__all__", ())) | set(table))

    return __getattr__, __dir__


__all__ = ["lazy_attributes"]
