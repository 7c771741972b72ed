"""Drawings (Graphviz) and plots of μGraphs.

The ``graphviz`` Python package is imported only when something is drawn, so that
``import mirage_lab`` works where it is absent (e.g. a GPU box that only runs kernels);
drawing there raises :class:`~mirage_lab.errors.GraphvizMissingError` with the fix.
"""
from __future__ import annotations

import shutil
from types import ModuleType
from typing import Any

from ..errors import GraphvizMissingError

LEVELS = ("kernel", "block", "thread", "all")


def _backend() -> ModuleType:
    try:
        from . import graphviz_draw
    except ImportError as e:
        raise GraphvizMissingError(
            f"drawing μGraphs needs the graphviz Python package ({e}); install it with `pip install graphviz` "
            "(and the `dot` program: `apt-get install graphviz`). The graph itself is fine: print it, "
            "or save it with graph.to_json()."
        ) from e
    return graphviz_draw


def draw(graph: Any, level: str = "all", **kwargs: Any) -> Any:
    """A Graphviz drawing of ``graph`` at ``level`` (``"kernel"``, ``"block"``, ``"thread"`` or ``"all"``).

    Returns a :class:`graphviz.Digraph` (shown as SVG in a notebook); see
    :func:`mirage_lab.viz.graphviz_draw.draw` for the options.

    >>> import mirage_lab as mi
    >>> from mirage_lab.examples import gqa_flashdecoding
    >>> "grid (2, 8, 16)" in mi.draw(gqa_flashdecoding(), "kernel").source
    True
    """
    return _backend().draw(graph, level, **kwargs)


def render_svg(dot: Any) -> str:
    """Render a drawing to SVG text with the ``dot`` program (:class:`GraphvizMissingError` when missing)."""
    return _backend().render_svg(dot)


def dot_available() -> bool:
    """Whether Graphviz's ``dot`` program is on the PATH."""
    return shutil.which("dot") is not None


def inspect(graph: Any, metrics: Any = None, **kwargs: Any) -> Any:
    """The interactive inspector of ``graph`` (JupyterLab), coloured by ``metrics``; see
    :func:`mirage_lab.viz.inspector.inspect`.

    >>> import mirage_lab as mi
    >>> from mirage_lab.examples import gqa_flashdecoding
    >>> mi.inspect(gqa_flashdecoding(), metrics={"op3": {"latency_us": 31.5}})
    Inspection(5 kernel ops, coloured by latency_us)
    """
    from .inspector import inspect as _inspect

    return _inspect(graph, metrics, **kwargs)


def compare(*graphs: Any, **kwargs: Any) -> Any:
    """Two candidates side by side with their numbers; see :func:`mirage_lab.viz.inspector.compare`."""
    from .inspector import compare as _compare

    return _compare(*graphs, **kwargs)


__all__ = ["draw", "render_svg", "dot_available", "inspect", "compare", "LEVELS"]


def _install_display() -> None:
    """Notebook display of KernelGraphs: the IR calls these through its hooks (it never imports viz)."""
    from ..ir import hooks
    from .mime import mimebundle, svg_or_none

    hooks.install(mimebundle=mimebundle, svg=svg_or_none, inspect=inspect)


_install_display()
