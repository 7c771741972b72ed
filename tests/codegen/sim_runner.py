"""Run the small codegen cases under the CUDA simulator; print one JSON object of results.

Invoked by the tests in a subprocess with NUMBA_ENABLE_CUDASIM=1 (numba reads it at import,
so it must be set before numba loads and must not leak into other tests' processes).
"""
from __future__ import annotations

import json
import os
import re
import sys
import traceback
import zlib
from pathlib import Path

assert os.environ.get("NUMBA_ENABLE_CUDASIM") == "1", "run me with NUMBA_ENABLE_CUDASIM=1"
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402

import mirage_lab as mi  # noqa: E402
from codegen_cases import ASYNC_CASES, CASES, MV_CASES, SMEM_CASES  # noqa: E402
from mirage_lab.codegen import CodegenOptions  # noqa: E402
from mirage_lab.runtime.profile import relative_error as rel  # noqa: E402


def main() -> None:
    args = sys.argv[1:]
    # --mma: tensor-core streamed matmuls (emulated mma.sync); --pipeline=WORDSxDEPTH: register
    # prefetch of streamed and staged tiles, DEPTH iterations ahead; --mv: mma_b16 (16-byte B
    # loads and movmatrix for 32-column warps), on the cases of MV_CASES
    pipe = next((a.split("=", 1)[1] for a in args if a.startswith("--pipeline=")), "0x1")
    words, depth = (int(v) for v in pipe.split("x"))
    mv = "--mv" in args
    # --smem=KB: the shared-memory pool (dynamic past 48 KB), on the cases of SMEM_CASES
    smem = next((int(a.split("=", 1)[1]) for a in args if a.startswith("--smem=")), None)
    # --async=S: staged tensor-core tiles copied by (simulated) cp.async into a ring of S stages, on ASYNC_CASES
    stages = next((int(a.split("=", 1)[1]) for a in args if a.startswith("--async=")), 0)
    # --ldmatrix: register-blocked tensor-core fragments by (emulated) ldmatrix (CodegenOptions.ldmatrix), on
    # ASYNC_CASES (with or without --async)
    # --split=S: each tile's loop split over S blocks, the last adding their sums (CodegenOptions.split)
    split = next((int(a.split("=", 1)[1]) for a in args if a.startswith("--split=")), 1)
    options = CodegenOptions(mma="--mma" in args, pipeline_words=words, pipeline_depth=depth, mma_b16=mv,
                             smem_kb=smem or 48, async_stages=stages, ldmatrix="--ldmatrix" in args, split=split)
    names = {a for a in args if not a.startswith("--")}
    res = {}
    for name, build, make in ASYNC_CASES if stages or "--ldmatrix" in args else SMEM_CASES if smem else \
            MV_CASES if mv else CASES:
        if names and name not in names:
            continue
        g = build()
        try:
            gen = torch.Generator().manual_seed(zlib.crc32(name.encode()) % 1000)   # the same in every process
            xs = make(g, gen)
            k = mi.runtime.compile(g, options=options)
            outs = k(inputs=xs, poison=True)  # NaN-filled first: an unwritten element shows as NaN
            refs = mi.run_reference(g, [x.double() for x in xs])
            entry = {"rel": [rel(o, r) for o, r in zip(outs, refs)],
                     "mma_streams": sum(src.count("mma.m16n8k16)") for src in k.generated.kernel_sources.values()),
                     "mma_staged": sum(src.count("tiles of 16x8") for src in k.generated.kernel_sources.values()),
                     "mv_streams": sum(src.count("transposed into fragments by movmatrix")
                                       for src in k.generated.kernel_sources.values()),
                     "movt": sum(src.count("movt(") for src in k.generated.kernel_sources.values()),
                     "async_tiles": sum(len(set(re.findall(r"cp\.async (\w+) \[", src)))
                                        for src in k.generated.kernel_sources.values()),
                     "ldsm": [sum(src.count(f"{f}(sm,") for src in k.generated.kernel_sources.values())
                              for f in ("ldsm4", "ldsm4t")],
                     "shapes_ok": all(tuple(o.shape) == tuple(r.shape) for o, r in zip(outs, refs)),
                     "dyn_smem": [i.dyn_smem_bytes for i in k.generated.kernels],
                     "scratch": [i.scratch_floats_per_block for i in k.generated.kernels],
                     "split_kernels": sum(1 for i in k.generated.kernels if i.counters),
                     "dynamic_ints": sum(src.count("smi = cuda.shared.array(0, dtype=I32)")
                                         for src in k.generated.kernel_sources.values()),
                     "dtypes": [str(o.dtype) for o in outs]}
            if split > 1:   # the tiles' counters were reset by their last blocks: a second call adds up the same
                entry["repeat_equal"] = all(torch.equal(a, b) for a, b in zip(outs, k(inputs=xs, poison=True)))
            if name == "rms_norm_linear":  # KernelGraph.__call__ delegates to the runtime
                (o2,) = g(inputs=xs)
                entry["call_rel"] = rel(o2, refs[0])
            res[name] = entry
        except Exception:
            res[name] = {"error": traceback.format_exc()[-3000:]}
    print("RESULTS " + json.dumps(res))


if __name__ == "__main__":
    main()
