"""numba_compat's compile speed-ups change how fast numba compiles, never what it compiles.

In a process without the simulator (they are not applied under it): a generated kernel's LLVM IR
is the same with the call-typing memo, the fast flag ``values()`` and the lowering's memos as without them (up to
numba's per-compile counters), the memo answers repeated calls, and the search's fingerprint
kernels are cached on disk (issue 20). Skipped where numba-cuda cannot lower for CUDA here.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from proc_helpers import ROOT, run_python

sys.path.insert(0, str(ROOT / "tests" / "codegen"))
from codegen_ptx import toolchain  # noqa: E402

pytestmark = pytest.mark.skipif(toolchain() is None, reason="needs libNVVM (a CUDA toolkit) for numba's CUDA target")

SCRIPT = r"""
import json, os, re, sys
sys.path.insert(0, os.path.join(sys.argv[1], "tests", "codegen"))
from codegen_ptx import _patch_numba, toolchain
os.environ.setdefault("CUDA_HOME", toolchain()[0])
_patch_numba()
from mirage_lab.gpu import numba_compat
from numba.cuda.compiler import compile_cuda
from numba.cuda.core.targetconfig import TargetConfig
from numba.cuda.flags import CUDAFlags
from numba.cuda.typing.context import BaseContext
from mirage_lab.codegen import CodegenOptions
from mirage_lab.examples import rms_norm_linear_fused
from mirage_lab.runtime.kernel import compile as rt_compile
from mirage_lab.gpu.numba_compat import types

def norm(ir):  # numba's per-compile counters differ between two compiles of one function
    ir = re.sub(r"B\d+v\d+B", "BvB", ir)
    ir = re.sub(r"(_cudapy_[a-z]+_)\d+", r"\1N", ir)
    return re.sub(r"\$\d+", "$N", ir)

from numba.core.types.functions import Function
from numba.cuda.core.base import BaseContext as TargetContext

memo = BaseContext.resolve_function_type
fast_values = TargetConfig.values
call_type, get_function = Function.get_call_type, TargetContext.get_function
out = {"applied": [numba_compat.MEMO_TYPING, numba_compat.FAST_FLAG_VALUES, numba_compat.MEMO_LOWERING]}
f = CUDAFlags()
f.fastmath = True
f.nvvm_options = {"opt": 3}
out["values_same"] = fast_values(f) == fast_values.__wrapped__(f)

calls = [0]
original = memo.__wrapped__
def counting(self, func, args, kws):
    calls[0] += 1
    return original(self, func, args, kws)

irs = {}
for mma in (False, True):
    k = rt_compile(rms_norm_linear_fused(4, 256, 256, grid=8, forloop_range=4), options=CodegenOptions(mma=mma))
    info = k.kernels[0]
    launch = getattr(k.module, "_launch_" + info.name)
    sig = tuple(types.Array(getattr(types, str(t).replace("torch.", "")), 1, "C") for t in launch.views)
    py = getattr(k.module, info.name).py_func
    for on in (False, True):
        BaseContext.resolve_function_type = memo if on else counting
        TargetConfig.values = fast_values if on else fast_values.__wrapped__
        Function.get_call_type = call_type if on else call_type.__wrapped__
        TargetContext.get_function = get_function if on else get_function.__wrapped__
        calls[0] = 0
        cres = compile_cuda(py, types.void, sig, fastmath=True, nvvm_options={"fastmath": True, "opt": 3}, cc=(9, 0))
        irs[(mma, on)] = norm(cres.library.get_llvm_str())
        if not on:
            out["numba_calls_typed_%s" % mma] = calls[0]
    out["ir_same_%s" % mma] = irs[(mma, False)] == irs[(mma, True)]

from mirage_lab.search import cuda_digest
from mirage_lab.verify import cuda_backend
kernels = [cuda_digest._digest_kernel] + [getattr(cuda_backend, n) for n in
           ("_lut_kernel", "_arith_kernel", "_matmul_kernel", "_reduce_kernel", "_copy_kernel")]
out["fingerprint_cached"] = [type(k._cache).__name__ for k in kernels]
print("RESULTS " + json.dumps(out))
"""


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict:
    return run_python(SCRIPT, tmp_path_factory.mktemp("compat"), args=[str(ROOT)], simulator=False, timeout=900)


def test_speedups_are_applied_and_flag_values_unchanged(results: dict) -> None:
    assert results["applied"] == [True, True, True]
    assert results["values_same"]


def test_generated_kernels_lower_to_the_same_llvm_ir(results: dict) -> None:
    # FMA and tensor-core lowerings of one μGraph; the typing memo must have had repeats to skip
    assert results["ir_same_False"] and results["ir_same_True"]
    assert results["numba_calls_typed_False"] > 100


def test_fingerprint_kernels_use_numbas_disk_cache(results: dict) -> None:
    assert "NullCache" not in results["fingerprint_cached"], results["fingerprint_cached"]
