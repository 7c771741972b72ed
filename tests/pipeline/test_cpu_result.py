"""On a CPU-only machine the superoptimize result stays usable whatever was read from it or called on it."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import mirage_lab as mi
from mirage_lab import examples as ex
from mirage_lab.errors import KernelInputError

from pipe_helpers import SMALL_SEARCH

pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU-only path")


@pytest.fixture(scope="module")
def program_and_best():
    g = ex.rms_norm_linear_program(4, 64, 64)
    return g, g.superoptimize(tune=False, **SMALL_SEARCH)


def _check(best, g, X, W):
    (out,) = best([X, W])
    (ref,) = mi.run_reference(g, [X.double(), W.double()])
    assert float((out.double() - ref).norm() / ref.norm()) < 1e-5


def test_reading_the_kernel_and_bad_calls_do_not_break_later_calls(program_and_best, tmp_path, monkeypatch):
    monkeypatch.setenv("MIRAGE_LAB_CACHE", str(tmp_path))
    g, best = program_and_best
    X, W = torch.randn(4, 64), torch.randn(64, 64)
    _check(best, g, X, W)
    assert best.kernel is not None            # compiles the kernels (it cannot launch them here)
    _check(best, g, X, W)
    with pytest.raises(KernelInputError, match=r"2 inputs .* as a list of torch tensors, e.g. best\(\[X, W\]\); got None"):
        best(None)
    _check(best, g, X, W)
    with pytest.raises(KernelInputError, match="input 0 must be a torch.Tensor, got numpy.ndarray; convert it with "
                                                r"torch.from_numpy\(a\)"):
        best([np.zeros((4, 64)), np.zeros((64, 64))])
    with pytest.raises(KernelInputError, match="got numpy.ndarray"):
        best(np.zeros((4, 64)))
    with pytest.raises(KernelInputError, match=r"takes 2 inputs \(float16\[4,64\], float16\[64,64\]\) but got 1"):
        best([X])
    with pytest.raises(mi.MirageLabError):
        best([X, torch.randn(3, 3)])         # the reference interpreter names the shape
    _check(best, g, X, W)
    (o2,) = best([X, W], graph=True)           # no CUDA graphs on a CPU: runs as a plain call
    assert o2.shape == (4, 64)
    assert not best.is_program and best.winner == "μGraph" and best.latency_us is None and best.speedup is None
