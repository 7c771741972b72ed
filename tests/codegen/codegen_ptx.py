"""Compile generated kernels to PTX and assemble them with ptxas, without a GPU.

numba's ``compile_ptx`` needs libNVVM only, but numba-cuda 0.30 also asks libNVRTC for the
list of supported architectures; where libNVRTC is missing we answer for it (sm_90). This
catches numba typing errors and reports registers/spills per kernel in CI, where the CUDA
simulator (which runs the Python source directly) cannot.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

CUDA_HOMES = [os.environ.get("CUDA_HOME", ""), "/usr/local/cuda", "/usr/local/cuda-13.0", "/usr/local/cuda-12.8"]


def toolchain() -> tuple[str, str] | None:
    """(CUDA_HOME, ptxas path) when libNVVM and ptxas exist here, else None."""
    for home in CUDA_HOMES:
        if home and (Path(home) / "nvvm").exists() and (Path(home) / "bin" / "ptxas").exists():
            return home, str(Path(home) / "bin" / "ptxas")
    return None


def _patch_numba() -> None:
    from numba.cuda import cuda_paths
    from numba.cuda.cudadrv import nvrtc

    try:
        nvrtc.get_supported_ccs()
    except Exception:
        nvrtc.get_supported_ccs = lambda: [(9, 0)]
        nvrtc.get_arch_option = lambda major, minor: f"compute_{major}{minor}"
        cuda_paths._get_nvrtc_path = lambda: None


def arg_types(info):
    from numba import types

    ts = [types.Array(types.int32 if v == "int32" else types.int16, 1, "C") for v in info.input_views]
    ts += [types.Array(types.float32 if d == "float32" else types.int16, 1, "C") for d in info.output_dtypes]
    ts.append(types.Array(types.float32, 1, "C"))
    if info.counters:   # split-K: the tiles' arrival counters
        ts.append(types.Array(types.int32, 1, "C"))
    return tuple(ts)


def ptx_report(module, infos, cc=(9, 0), dump_dir: str | None = None) -> list[dict]:
    """PTX-compile each kernel of an imported generated module; ptxas -v it. One dict per kernel."""
    tc = toolchain()
    assert tc is not None, "no CUDA toolchain (libNVVM + ptxas) on this machine"
    _patch_numba()
    from numba import cuda

    rows = []
    for info in infos:
        kern = getattr(module, info.name)
        ptx, _ = cuda.compile_ptx(kern.py_func, arg_types(info), cc=cc, fastmath=True)
        if dump_dir:
            Path(dump_dir, f"{module.__name__}.{info.name}.ptx").write_text(ptx)
        with tempfile.TemporaryDirectory() as d:
            p = Path(d) / "k.ptx"
            p.write_text(ptx)
            r = subprocess.run([tc[1], f"-arch=sm_{cc[0]}{cc[1]}", "-v", str(p), "-o", str(Path(d) / "k.cubin")],
                               capture_output=True, text=True)
        info_txt = r.stderr
        regs = re.search(r"Used (\d+) registers", info_txt)
        spill = re.search(r"(\d+) bytes spill stores", info_txt)
        stack = re.search(r"(\d+) bytes stack frame", info_txt)
        rows.append({
            "kernel": info.name, "ok": r.returncode == 0, "regs": int(regs.group(1)) if regs else None,
            "spill_bytes": int(spill.group(1)) if spill else None, "stack_bytes": int(stack.group(1)) if stack else None,
            "ld_v4": ptx.count("ld.global.v4"), "ld_v2": ptx.count("ld.global.v2"),
            "mma": ptx.count("mma.sync.aligned.m16n8k16"), "cp_async": ptx.count("cp.async.cg.shared.global"),
            "cp_wait": ptx.count("cp.async.wait_group"), "ldmatrix": ptx.count("ldmatrix.sync.aligned"),
            "f64_ops": len(re.findall(r"\.f64", ptx)), "ptxas": info_txt.strip()[-300:],
        })
    return rows
