"""The search's fingerprint arrays on a GPU give the numpy backend's results, bit for bit.

Without a GPU the Numba-CUDA kernels run under the CUDA simulator in a subprocess (the
simulator must be switched on before numba is imported); on a GPU machine the same checks
run in-process on the device at a larger size.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from mirage_lab.search.arrays import ArrayBackendError, get_arrays
from mirage_lab.search.config import SearchConfig, SearchConfigError

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent


def _gpu() -> bool:
    from mirage_lab.gpu.numba_compat import gpu_available

    return gpu_available()


def test_cuda_arrays_match_numpy_in_the_simulator():
    path = [str(ROOT), str(HERE)] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", PYTHONPATH=os.pathsep.join(path))
    proc = subprocess.run([sys.executable, "-W", "ignore", str(HERE / "search_cuda_check.py"), "tiny"], env=env,
                          cwd=HERE, capture_output=True, text=True, timeout=900)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "FAILED 0" in out


def test_backend_choice_and_errors():
    assert get_arrays("numpy").name == "numpy"
    assert get_arrays("auto").name == ("cuda" if _gpu() else "numpy")
    if not _gpu():
        with pytest.raises(ArrayBackendError, match="needs a usable CUDA GPU"):
            get_arrays("cuda")
    with pytest.raises(SearchConfigError, match="fingerprint_backend"):
        SearchConfig.from_args(fingerprint_backend="tpu")
    # results do not depend on it, so a checkpoint from either backend fits the other
    assert SearchConfig.from_args(fingerprint_backend="auto").fingerprint() == SearchConfig.from_args().fingerprint()


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu(), reason="needs a CUDA GPU")
def test_cuda_arrays_match_numpy_on_the_gpu():
    sys.path.insert(0, str(HERE))
    import search_cuda_check

    n, fails = search_cuda_check.run_checks("small")
    assert not fails, fails
