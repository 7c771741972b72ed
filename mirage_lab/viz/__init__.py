"""Drawings (Graphviz) and plots of μGraphs."""
from .graphviz_draw import LEVELS, dot_available, draw, render_svg

__all__ = ["draw", "render_svg", "dot_available", "LEVELS"]
