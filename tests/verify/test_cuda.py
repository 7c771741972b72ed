"""The Numba-CUDA fingerprint backend is bit-identical to the numpy one.

On CI (no GPU) the kernels run under the CUDA simulator in a subprocess: the simulator
must be switched on before numba is first imported, and this pytest process has imported
it already. On a GPU machine the same checks also run in-process on the device.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent


def test_cuda_simulator_matches_numpy():
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", PYTHONPATH=os.pathsep.join([str(ROOT), str(HERE)]))
    proc = subprocess.run([sys.executable, str(HERE / "verify_cuda_check.py"), "tiny"], env=env, cwd=HERE,
                          capture_output=True, text=True, timeout=600)
    out = proc.stdout + proc.stderr
    print(out[-2000:])
    assert proc.returncode == 0, out[-4000:]
    assert "FAILED 0" in out


def _gpu() -> bool:
    from mirage_lab.gpu.numba_compat import gpu_available

    return gpu_available()


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu(), reason="needs a CUDA GPU")
def test_cuda_gpu_matches_numpy():
    import verify_cuda_check

    n, fails = verify_cuda_check.run_checks("small")
    assert not fails, fails
    assert n > 50


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu(), reason="needs a CUDA GPU")
def test_cuda_gpu_equivalence_api():
    import mirage_lab as mi
    import verify_graphs as vg

    for name, (mp, mf) in vg.pairs("small").items():
        r = mi.verify.equivalent(mp(), mf(), seed=2, backend="cuda")
        assert r and r.backend == "cuda", f"{name}: {r.reason}"
    assert mi.verify.get_ops("auto").name == "cuda"


def test_kernels_compiled_for_another_pq_are_refused(tmp_path):
    """The kernels are disk-cached keyed by their file, not by field.PQ: a kernel computing modulo another PQ
    (as one cached before P or Q changed would) is caught by the first ``CudaFieldOps.instance()``."""
    sys.path.insert(0, str(ROOT / "tests"))
    from proc_helpers import run_python

    code = """
import json
from mirage_lab.verify import cuda_backend as cb
from mirage_lab.verify.field import FieldError
cb.CudaFieldOps.instance()                       # the kernels agree with numpy: accepted
good = cb.CudaFieldOps._inst is not None
cb.CudaFieldOps._inst = None
cb.PQ += 2                                      # what the simulator's kernels read: a stale kernel's modulus
try:
    cb.CudaFieldOps.instance()
    err = None
except FieldError as e:
    err = str(e)
print("RESULTS " + json.dumps({"good": good, "err": err}))
"""
    res = run_python(code, tmp_path, simulator=True, timeout=600)
    assert res["good"]
    assert res["err"] and "modulo PQ=25651" in res["err"] and "__pycache__" in res["err"]
