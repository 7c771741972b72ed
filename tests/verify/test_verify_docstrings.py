"""The examples in the verifier's and the abstract expressions' docstrings run as written."""
from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["mirage_lab.verify", "mirage_lab.verify.field", "mirage_lab.verify.fingerprint",
           "mirage_lab.verify.equivalence", "mirage_lab.expr", "mirage_lab.expr.terms", "mirage_lab.expr.abstract",
           "mirage_lab.expr.oracle"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    mod = importlib.import_module(name)
    result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False)
    assert result.failed == 0, f"{result.failed} docstring example(s) of {name} failed (run python -m doctest -v)"
    assert result.attempted > 0
