"""Shared pytest set-up for every test directory (keep it generic: per-stage fixtures
belong in that stage's own ``tests/<stage>/conftest.py``)."""
from __future__ import annotations

import os
import random
import shutil
import tempfile

import pytest

# Tests must never grab a GPU by accident nor spawn one thread per core on a 2-core CI box.
os.environ.setdefault("OMP_NUM_THREADS", "2")
# superoptimize caches its results and kernels (mirage_lab.pipeline.cache): tests, and the notebooks
# and subprocesses they start, use a folder of this session's own, never the user's ~/.cache.
_CACHE = tempfile.mkdtemp(prefix="mirage_lab_test_cache_")
os.environ["MIRAGE_LAB_CACHE"] = _CACHE


def pytest_sessionfinish(session, exitstatus):
    shutil.rmtree(_CACHE, ignore_errors=True)


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the marks (``--dist loadgroup``)
def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist, keep the tests that share a costly fixture on one worker.

    A session- or module-scoped fixture runs once per worker that needs it: split across both
    workers, a simulator run (tests/codegen) or a JupyterLab server (tests/browser) would run twice.
    Tests on a session fixture of this project group by that fixture (and its parameter), so
    different fixtures still run side by side; tests on a module fixture group by module. An
    explicit ``@pytest.mark.xdist_group`` wins.
    """
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            group = _shared_fixture_group(item)
            if group:
                item.add_marker(pytest.mark.xdist_group(group))


def _shared_fixture_group(item) -> str | None:
    """The group of ``item``'s first project fixture (sorted by name) wider than a function, or None."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:  # not a python test function (e.g. a notebook under nbmake)
        return None
    module = None
    for name in sorted(info.name2fixturedefs):
        fixturedef = info.name2fixturedefs[name][-1]
        if not fixturedef.baseid:  # pytest's and plugins' own (tmp_path_factory, ...): cheap
            continue
        if fixturedef.scope == "session":
            callspec = getattr(item, "callspec", None)
            param = callspec.params.get(name) if callspec is not None else None
            return f"session:{name}" + ("" if param is None else f"[{param}]")
        if fixturedef.scope in ("module", "package", "class") and module is None:
            module = f"module:{item.nodeid.split('::')[0]}"
    return module


@pytest.fixture(autouse=True)
def _seed_everything():
    """Every test starts from the same random state, so a failure reproduces."""
    random.seed(0)
    try:
        import numpy as np

        np.random.seed(0)
    except ImportError:  # pragma: no cover
        pass
    try:
        import torch

        torch.manual_seed(0)
    except ImportError:  # pragma: no cover
        pass
    yield


def rel_err(out, ref) -> float:
    """‖out − ref‖ / ‖ref‖ in float64 (the project's accuracy measure)."""
    out, ref = out.double(), ref.double()
    return float((out - ref).norm() / ref.norm())


@pytest.fixture
def rel():
    """The relative-error function, as a fixture so any test directory can use it."""
    return rel_err
