"""A/B on the GPU of two codegen changes, each switched off in turn: k-pair B tiles and shifted index math.

1. `LoaderEmitter.pair_tiles` keeps a 16-bit tile that only tensor-core staged matmuls read
   as their B operand (K and V of attention) as words holding two k-rows: one 32-bit shared
   load per B-fragment register, where the float32 tile cost two loads and a conversion.
2. `codegen.index_ops.shift_pow2` writes ``// 2**k`` and ``% 2**k`` of the kernels' index
   arithmetic as ``>> k`` and ``& (2**k - 1)`` (no floor-semantics sign fix-ups), outside the
   main loop or everywhere (`_Emitter.shift_scope`).

The probe generates μGraphs with neither, with 1, and with 1 and 2, checks each module
against float64 and times them in one process: CUDA events, inputs rotated over copies larger
than 2 x L2, plain calls and CUDA-graph replays.

    python benchmarks/probes/codegen_ab_probe.py [--threads 128,256,512] [--graphs gqa_2x256,rmsnorm16]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository (mirage_lab)

import mirage_lab as mi  # noqa: E402
from mirage_lab.codegen import CodegenOptions, generate_module  # noqa: E402
from mirage_lab.codegen.block_kernel import _Emitter  # noqa: E402
from mirage_lab.examples import gated_mlp_fused, rms_norm_linear_fused  # noqa: E402
from mirage_lab.pipeline import measuring_inputs, with_block_dim  # noqa: E402
from mirage_lab.runtime.kernel import _import_file  # noqa: E402
from mirage_lab.runtime.profile import make_copies, relative_error, rotation_copies, time_calls  # noqa: E402

FOUND = Path(__file__).resolve().parents[1] / "found"  # benchmarks/found
GRAPHS = {"gqa_2x256": lambda: mi.load(str(FOUND / "gqa_2x256x64x4096__searched_cand0.json")),
          "gqa_decode": lambda: mi.load(str(FOUND / "gqa_decode_64x1x128x4096__searched_cand0.json")),
          # the schedules the e2e searches chose (grid 128, 16 iterations)
          "rmsnorm16": lambda: rms_norm_linear_fused(16, 4096, 4096, grid=128, forloop_range=16),
          "mlp": lambda: gated_mlp_fused(8, 4096, 4096, grid=128, forloop_range=16)}
# the options each μGraph's e2e run chose (benchmarks/RESULTS.md, run 14)
OPTIONS = {"rmsnorm16": [CodegenOptions(mma=True, mma_b16=True, pipeline_words=64, pipeline_depth=2)],
           "mlp": [CodegenOptions(mma=True, mma_b16=True, pipeline_words=64)],
           "gqa_decode": [CodegenOptions()]}
LEVELS = ["neither", "k-pairs", "k-pairs + shifts outside the loop", "k-pairs + shifts"]
SCOPES = ["none", "none", "outside", "all"]


def source(g: mi.KernelGraph, level: int, options: CodegenOptions) -> str:
    keep_pairs, keep_scope = _Emitter.pair_tiles, _Emitter.shift_scope
    if level < 1:
        _Emitter.pair_tiles = lambda self: {}
    _Emitter.shift_scope = SCOPES[level]
    try:
        return generate_module(g, options=options).source
    finally:
        _Emitter.pair_tiles, _Emitter.shift_scope = keep_pairs, keep_scope


def measure(name: str, text: str, g: mi.KernelGraph, tmp: Path, repeats: int = 300) -> tuple[float, float, float]:
    """The module ``text`` of ``g``: its worst relative error against float64 (two input seeds), and the device
    µs of a plain call and of a CUDA-graph replay (inputs rotated past L2)."""
    path = tmp / f"{name}.py"
    path.write_text(text)
    mod = _import_file(path, name)
    errs = []
    for seed in (1, 2):
        m = measuring_inputs(g, seed=seed)
        outs = mod.run(list(m.inputs), True)
        errs += [relative_error(o, r) for o, r in zip(outs, m.reference)]
    xs = list(measuring_inputs(g, seed=0).inputs)
    sets = make_copies(xs, rotation_copies(xs))
    dev = time_calls([lambda s=s: mod.run(s) for s in sets], repeats=repeats).median_us
    graphs = []
    for s in sets:
        gr = torch.cuda.CUDAGraph()
        mod.run(s)
        torch.cuda.synchronize()
        with torch.cuda.graph(gr):
            mod.run(s)
        graphs.append(gr)
    return max(errs), dev, time_calls([gr.replay for gr in graphs], repeats=repeats).median_us


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", default="128,256,512")
    ap.add_argument("--graphs", default=",".join(GRAPHS))
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp())
    print(torch.cuda.get_device_name(), flush=True)
    print("| μGraph | threads | options | changes on | rel err | call µs | graph µs |")
    print("|---|---|---|---|---|---|---|")
    for gname in a.graphs.split(","):
        for T in (int(t) for t in a.threads.split(",")):
            g = with_block_dim(GRAPHS[gname](), T)
            gqa_opts = [CodegenOptions(mma=True), CodegenOptions(mma=True, pipeline_words=64, pipeline_depth=2)]
            for opts in OPTIONS.get(gname, gqa_opts):
                seen: list[str] = []
                for level in range(len(LEVELS)):
                    text = source(g, level, opts)
                    if text in seen:
                        print(f"| {gname} | {T} | {opts.tag()} | {LEVELS[level]}: the same source | | | |", flush=True)
                        continue
                    seen.append(text)
                    err, dev, gdev = measure(f"{gname}_{T}_{opts.tag().replace('-', '_')}_{level}", text, g, tmp)
                    print(f"| {gname} | {T} | {opts.tag()} | {LEVELS[level]} | {err:.1e} | {dev:.2f} | {gdev:.2f} |",
                          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
