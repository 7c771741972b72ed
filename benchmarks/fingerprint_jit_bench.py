"""What the search's CUDA fingerprint kernels cost each worker process at start, and what numba's disk cache saves.

The fingerprint kernels (``verify/cuda_backend.py``, ``search/cuda_digest.py``) are ``@cuda.jit(cache=True)``
(issue 20: every search worker compiled them again at start). Two modes:

- without a GPU: numba-cuda's compile steps for sm_90 of each kernel (typing + lowering, NVVM, and ptxas
  where the toolkit has one), for the argument types a search passes; the sum is what one worker process
  paid before the cache, per signature (a search meets a few: one per tuple length of a shape);
- on a GPU (``--gpu``): two fresh processes, one after the other, on one empty ``NUMBA_CACHE_DIR``, each
  running every fingerprint op once and a digest; the first compiles (and writes the cache), the second
  loads. Their difference is what each worker after the first saves.

    python benchmarks/fingerprint_jit_bench.py            # CPU: compile seconds per kernel
    python benchmarks/fingerprint_jit_bench.py --gpu      # GPU: cold process against warm process
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))


def cpu_compile_times(tuple_len: int = 2) -> list[tuple[str, float, float, float]]:
    """(kernel, numba s, nvvm s, ptxas s) for each fingerprint kernel at the argument types a search uses."""
    import compile_time_bench as ctb
    from numba.cuda.compiler import compile_cuda, kernel_fixup

    from mirage_lab.gpu.numba_compat import types
    from mirage_lab.search import cuda_digest
    from mirage_lab.verify import cuda_backend as cb

    # the kernels call @cuda.jit(device=True) functions, which numba compiles for the current device's
    # compute capability: with no device here, name the H100's
    from numba.cuda import dispatcher

    dispatcher.get_current_device = lambda: type("H100", (), {"compute_capability": ctb.CC})()
    u16 = types.Array(types.uint16, 1, "C")
    i64 = types.int64
    tup = types.UniTuple(types.int64, tuple_len)
    sigs = {
        "_lut_kernel": (cb._lut_kernel, (u16, u16, u16, i64)),
        "_arith_kernel": (cb._arith_kernel, (u16, u16, u16, tup, tup, tup, i64, i64)),
        "_matmul_kernel": (cb._matmul_kernel, (u16, u16, u16, tup, tup, tup, i64, i64, i64, i64)),
        "_reduce_kernel": (cb._reduce_kernel, (u16, u16, i64, i64, i64)),
        "_copy_kernel": (cb._copy_kernel, (u16, u16, tup, tup, tup, i64, i64, i64)),
        "_digest_kernel": (cuda_digest._digest_kernel, (u16, i64, types.Array(types.uint64, 1, "C"))),
    }
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, (kern, sig) in sigs.items():
            t0 = time.perf_counter()
            cres = compile_cuda(kern.py_func, types.void, sig, nvvm_options={"opt": 3}, cc=ctb.CC)
            kernel_fixup(cres.library.get_function(cres.fndesc.llvm_func_name), False)
            t1 = time.perf_counter()
            ptx = cres.library.get_asm_str(cc=ctb.CC)
            t2 = time.perf_counter()
            rows.append((name, t1 - t0, t2 - t1, ctb.ptxas(ptx, Path(tmp)).get("ptxas_s", 0.0)))
    return rows


CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import numpy as np
from mirage_lab.verify.cuda_backend import CudaFieldOps
from mirage_lab.search.cuda_digest import device_digest
from mirage_lab.gpu.numba_compat import cuda
t1 = time.perf_counter()
ops = CudaFieldOps.instance()
a = ops.asarray(np.arange(24, dtype=np.uint16).reshape(2, 3, 4) % 7)
b = ops.asarray(np.arange(24, dtype=np.uint16).reshape(2, 4, 3) % 5)
ops.matmul(a, b); ops.reduce_sum(a, 2); ops._arith("add", a, a); ops._arith("mul", a, a)
ops.lut(a, np.arange(1 << 16, dtype=np.uint16)); ops.copy_view(a, (2, 4, 3), (12, 1, 4)); ops.concat(a, a, 1)
device_digest(ops.copy_view(a, (24,), (1,)))
cuda.synchronize()
print(json.dumps({"import_s": t1 - t0, "first_ops_s": time.perf_counter() - t1}))
"""


def gpu_cold_warm() -> list[dict]:
    """Two fresh processes on one empty numba cache folder: the first compiles, the second loads."""
    out = []
    with tempfile.TemporaryDirectory(prefix="numba_cache_") as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache, PYTHONPATH=str(ROOT))
        env.pop("NUMBA_ENABLE_CUDASIM", None)
        for label in ("cold (compiles, fills the cache)", "warm (loads from the cache)"):
            r = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True)
            if r.returncode:
                raise SystemExit(r.stderr[-2000:])
            rec = json.loads(r.stdout.strip().splitlines()[-1])
            rec["process"] = label
            out.append(rec)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gpu", action="store_true", help="cold against warm process on a real GPU")
    a = ap.parse_args(argv)
    if a.gpu:
        rows = gpu_cold_warm()
        print("| process | import s | first call of every fingerprint op s |\n|---|---|---|")
        for r in rows:
            print(f"| {r['process']} | {r['import_s']:.2f} | {r['first_ops_s']:.2f} |")
        print(f"# saved per worker process after the first: {rows[0]['first_ops_s'] - rows[1]['first_ops_s']:.2f} s")
        return 0
    os.environ.pop("NUMBA_ENABLE_CUDASIM", None)
    import compile_time_bench as ctb

    ctb._without_nvrtc()
    rows = cpu_compile_times()
    print(f"# load {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; sm_90; one signature per kernel")
    print("| kernel | numba s | nvvm s | ptxas s | total s |\n|---|---|---|---|---|")
    for name, lo, nv, pt in rows:
        print(f"| {name} | {lo:.2f} | {nv:.2f} | {pt:.2f} | {lo + nv + pt:.2f} |")
    print(f"| all | {sum(r[1] for r in rows):.2f} | {sum(r[2] for r in rows):.2f} | {sum(r[3] for r in rows):.2f} | "
          f"{sum(r[1] + r[2] + r[3] for r in rows):.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
