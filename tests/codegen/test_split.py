"""Split-K across blocks (``CodegenOptions.split``): the launch, the hand-over and the bad input (no GPU)."""
from __future__ import annotations

import ast

import pytest
from proc_helpers import run_python

from mirage_lab.codegen import CodegenOptions, generate_module
from mirage_lab.codegen.block_kernel import emit_block_kernel
from mirage_lab.codegen.split import split_problem
from mirage_lab.examples import gated_mlp_fused, rms_norm_linear_fused


def test_split_launch_grid_counters_and_scratch() -> None:
    bg = rms_norm_linear_fused(8, 1024, 1024, grid=8, forloop_range=8).customized_ops[0].block_graph
    src, whole = emit_block_kernel(bg, "k")
    src4, info = emit_block_kernel(bg, "k", CodegenOptions(split=4))
    assert whole.grid == (8, 1, 1) and whole.counters == 0 and "cnt" not in src
    assert info.grid == (8, 1, 4) and info.counters == 8            # blocks ks = blockIdx.z, one counter a tile
    assert "def k(in0, in1, out0, scr, cnt):" in src4
    assert "cuda.atomic.add(cnt, bx, 1) == 3" in src4 and "cnt[bx] = 0" in src4
    assert "for it in range(2):" in src4 and "for it in range(8):" in src      # each block a quarter of the loop
    # every block has its own area, 128-byte aligned (the sums of 8 rows x 128 columns and 8 rms sums)
    assert info.scratch_floats_per_block % 32 == 0 and info.scratch_floats_per_block >= 8 * 128 + 8
    ast.parse(src4)


def test_split_module_passes_counters_and_exports_standalone() -> None:
    g = gated_mlp_fused(4, 256, 256, grid=4, forloop_range=4)
    mod = generate_module(g, options=CodegenOptions(split=2), standalone=True)
    assert "_Counters(" in mod.source and ".get(dev, sp))" in mod.source
    assert "class _Counters" in mod.source          # the standalone module carries the prelude's counters
    compile(mod.source, "<split>", "exec")


def test_a_loop_the_split_does_not_divide_stays_whole() -> None:
    g = rms_norm_linear_fused(4, 256, 256, grid=8, forloop_range=4)
    bg = g.customized_ops[0].block_graph
    assert split_problem(bg, 3) == "split 3 does not divide the loop of 4 iterations"
    a = generate_module(g, options=CodegenOptions()).kernel_sources
    b = generate_module(g, options=CodegenOptions(split=8)).kernel_sources
    assert list(a.values()) == list(b.values())


@pytest.mark.parametrize("bad", [0, -2, 17, 2.0, "2"])
def test_split_must_be_a_small_positive_int(bad) -> None:
    with pytest.raises(ValueError, match="split must be an int from 1 to 16"):
        CodegenOptions(split=bad)


def test_split_tag_and_positional_rebuild() -> None:
    o = CodegenOptions(mma=True, ldmatrix=True, split=8)
    assert o.tag() == "pw0-regNone-acc128-ldsm-sk8-mma"
    assert CodegenOptions(*o.astuple()) == o
    assert CodegenOptions().tag() == "pw0-regNone-acc128"   # unsplit tags (and cache keys) as before


THREE_D = """
import json, sys, torch
sys.path.insert(0, {here!r})
import mirage_lab as mi
from codegen_cases import gqa_inputs
from mirage_lab.codegen import CodegenOptions
from mirage_lab.examples import gqa_flashdecoding
from mirage_lab.runtime.profile import relative_error as rel
g = gqa_flashdecoding(2, 32, 16, 64, kv_splits=2, q_blocks=2, forloop_range=2)
xs = gqa_inputs(g, torch.Generator().manual_seed(3))
refs = mi.run_reference(g, [x.double() for x in xs])
out = {{}}
for o in (CodegenOptions(split=2), CodegenOptions(split=2, mma=True)):
    k = mi.runtime.compile(g, options=o)
    outs, again = k(inputs=xs, poison=True), k(inputs=xs, poison=True)
    out[o.tag()] = {{"grids": [list(i.grid) for i in k.generated.kernels], "rel": [rel(a, r) for a, r in zip(outs, refs)],
                    "same": all(torch.equal(a, b) for a, b in zip(outs, again))}}
print("RESULTS " + json.dumps(out))
"""


def test_split_of_a_three_dimensional_grid_matches_reference(tmp_path) -> None:
    """Attention's grid (batch, kv splits, query blocks) = (2, 2, 2) with its loop over 2 blocks: the launch's z
    is query block x part (``bz = kz % 2``, ``ks = kz // 2``); CUDA simulator, float64 reference, same bits twice."""
    from pathlib import Path

    here = str(Path(__file__).resolve().parent)
    r = run_python(THREE_D.format(here=here), tmp_path, timeout=600)
    for tag, v in r.items():
        assert v["grids"] == [[2, 2, 4], [2, 2, 1]], (tag, v)
        assert all(e < 2e-3 for e in v["rel"]) and v["same"], (tag, v)

