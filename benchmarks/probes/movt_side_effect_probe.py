"""A/B in one process: the mma_b16 RMSNorm 16x4096^2 kernel (512 threads, pw64, depth 1 and 2) with
``movt``'s inline asm marked side-effecting (as ``mma_f16`` is) or pure, checked and timed alike.

    python benchmarks/probes/movt_side_effect_probe.py

H100, 2026-11-24: 19.65-19.81 vs 19.65-19.78 µs (depth 1), 19.01-19.07 vs 19.04-19.10 (depth 2), rel. err
2.1e-4 for all: the same, so movmatrix, a warp-collective instruction, is kept side-effecting (LLVM may
neither move it into divergent code nor drop it).
"""
import sys, tempfile
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository (mirage_lab)
import torch
import mirage_lab as mi
from mirage_lab.codegen import CodegenOptions, generate_module
from mirage_lab.examples import rms_norm_linear_fused
from mirage_lab.pipeline import with_block_dim, measuring_inputs
from mirage_lab.runtime.kernel import _import_file
from mirage_lab.runtime.profile import make_copies, rotation_copies, relative_error, time_calls
g = with_block_dim(rms_norm_linear_fused(16, 4096, 4096, grid=128, forloop_range=16), 512)
tmp = Path(tempfile.mkdtemp())
mods = {}
for depth in (1, 2):
    src = generate_module(g, options=CodegenOptions(mma=True, pipeline_words=64, pipeline_depth=depth, mma_b16=True)).source
    assert src.count("\"=r,r\", side_effect=True)") == 1
    for name, text in (("side_effect", src), ("pure", src.replace('"=r,r", side_effect=True)', '"=r,r")', 1))):
        p = tmp / f"m_{name}_{depth}.py"; p.write_text(text)
        mods[(name, depth)] = _import_file(p, f"m_{name}_{depth}")
m = measuring_inputs(g, seed=0); xs = list(m.inputs)
sets = make_copies(xs, rotation_copies(xs))
for key, mod in mods.items():
    (o,) = mod.run(xs, True); print(key, "rel err", relative_error(o, m.reference[0]))
for r in range(3):
    print(" | ".join(f"{k[0]} d{k[1]} {time_calls([lambda s=s, mod=mod: mod.run(s) for s in sets], repeats=300).median_us:.2f}"
                     for k, mod in mods.items()), flush=True)
