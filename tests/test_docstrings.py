"""The examples in the foundation's docstrings run as written."""
from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["mirage_lab", "mirage_lab.ir.kernel_graph", "mirage_lab.ir.block_graph", "mirage_lab.ir.dtypes",
           "mirage_lab.ir.serialize", "mirage_lab.interp.reference", "mirage_lab.examples",
           "mirage_lab.viz", "mirage_lab.viz.graphviz_draw", "mirage_lab.report", "mirage_lab.cli"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    mod = importlib.import_module(name)
    result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False)
    assert result.failed == 0, f"{result.failed} docstring example(s) of {name} failed (run python -m doctest -v)"
    assert result.attempted > 0
