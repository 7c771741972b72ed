"""The search package's shape: small modules, the public names where they always were."""
import doctest
import importlib
from pathlib import Path

import pytest

import mirage_lab.search as S

PACKAGE = Path(S.__file__).parent


def test_no_search_module_is_over_500_lines():
    sizes = {p.name: len(p.read_text().splitlines()) for p in PACKAGE.glob("*.py")}
    assert {name: n for name, n in sizes.items() if n > 500} == {}


def test_public_names_import_from_the_package_and_the_old_module_paths():
    assert [name for name in S.__all__ if not hasattr(S, name)] == []
    from mirage_lab.search.generator import BlockRoot, Cancelled, Generator, Target, Task  # noqa: F401
    from mirage_lab.search.runner import CancelToken, CheckpointError, SearchInputError, check_searchable, search

    assert (S.search, S.CancelToken, S.CheckpointError, S.SearchInputError) == \
        (search, CancelToken, CheckpointError, SearchInputError)
    with pytest.raises(SearchInputError, match="expected a KernelGraph"):
        check_searchable("not a graph")


@pytest.mark.parametrize("name", ["mirage_lab.search.cancel"])
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
