"""Compile every case's kernels to PTX with numba + libNVVM and assemble with ptxas (no GPU).

Prints RESULTS {name: [per-kernel dicts]}; run by test_ptx.py in a subprocess because it
patches numba's architecture query when libNVRTC is missing.
"""
from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from codegen_ptx import ptx_report, toolchain  # noqa: E402

import os  # noqa: E402

_tc = toolchain()
if _tc is not None:
    os.environ.setdefault("CUDA_HOME", _tc[0])  # numba finds libNVVM through it

import mirage_lab as mi  # noqa: E402
from codegen_cases import ASYNC_CASES, CASES  # noqa: E402
from mirage_lab.examples import gated_mlp_fused  # noqa: E402
from mirage_lab.pipeline import with_block_dim  # noqa: E402
from mirage_lab.codegen import CodegenOptions  # noqa: E402


def full_size_cases():
    """The benchmark shapes of the skinny matmuls (compiled only: the simulator is too slow for them)."""
    from mirage_lab.examples import gated_mlp_fused, rms_norm_linear_fused

    return [("rms_norm_linear_full", lambda: rms_norm_linear_fused(16, 4096, 4096, grid=128, forloop_range=16), None),
            ("gated_mlp_full", lambda: gated_mlp_fused(8, 4096, 4096, grid=256, forloop_range=16), None)]


def main() -> None:
    mma = "--mma" in sys.argv[1:]  # tensor-core streamed matmuls (inline-PTX mma.sync)
    # --async=S: cp.async rings of S stages (inline-PTX cp.async, commit, wait), on ASYNC_CASES
    stages = next((int(a.split("=", 1)[1]) for a in sys.argv[1:] if a.startswith("--async=")), 0)
    ldsm = "--ldmatrix" in sys.argv[1:]   # register-blocked fragments by ldmatrix, on the same cases as --async
    ring = stages or ldsm
    options = CodegenOptions(mma=mma, async_stages=stages, smem_kb=227 if ring else 48, ldmatrix=ldsm)
    res = {}
    cases = ASYNC_CASES + [("gated_mlp_m32_full", lambda: with_block_dim(
        gated_mlp_fused(32, 3072, 8192, grid=128, forloop_range=16), 256), None)] if ring else \
        CASES + (full_size_cases() if mma else [])
    for name, build, _ in cases:
        try:
            k = mi.runtime.compile(build(), options=options)
            res[name] = ptx_report(k.module, k.kernels)
            for row, src in zip(res[name], k.generated.kernel_sources.values()):
                row["cp16"] = src.count("cp16(sm")
        except Exception:
            res[name] = {"error": traceback.format_exc()[-3000:]}
    print("RESULTS " + json.dumps(res))


if __name__ == "__main__":
    main()
