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
