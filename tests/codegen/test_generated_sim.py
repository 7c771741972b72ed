"""Every generated kernel matches the reference interpreter (CUDA simulator, small shapes).

Outputs are NaN-poisoned before the launch, so an element the kernel never writes fails the
test; inputs are fresh random values; the reference runs in float64.
"""
from __future__ import annotations

import math

import pytest

from codegen_cases import ASYNC_CASES, CASES, MV_CASES, MV_STREAMS, SMEM_CASES, SPLIT_CASES

TOL = {"torch.float16": 2e-3, "torch.float32": 2e-3, "torch.bfloat16": 1e-2}  # bf16 rounding alone is ~2e-3


@pytest.mark.parametrize("name", [c[0] for c in CASES])
def test_generated_kernel_matches_reference(sim_results: dict, name: str) -> None:
    r = sim_results[name]
    assert "error" not in r, r.get("error")
    assert r["shapes_ok"]
    for err, dt in zip(r["rel"], r["dtypes"]):
        assert not math.isnan(err), f"{name}: NaN in the output (an element was never written, or overflow)"
        assert err < TOL[dt], f"{name}: relative error {err:.3g} >= {TOL[dt]} ({dt})"


def test_kernel_graph_call_delegates_to_runtime(sim_results: dict) -> None:
    assert sim_results["rms_norm_linear"]["call_rel"] < 2e-3


# cases whose streamed matmuls take the tensor-core layout under CodegenOptions(mma=True)
MMA_CASES = {"rms_norm_linear": 1, "rms_norm_linear_m16": 1, "rms_norm_linear_bf16": 1, "gated_mlp": 2,
             "gqa_decode": 2, "streamed_epilogue": 1,
             "rms_norm_linear_80_columns": 1, "gated_mlp_48_columns": 2, "rms_norm_linear_384_columns": 1,
             "lora_fused": 1}


# cases with matmuls of two staged tiles on tensor cores (QK^T and exp(S)V of attention; split-K's partial X·W,
# whose W tile is staged; the structural case's 4-row X·W, its rows padded to one 16-row tile, as are the 20
# query rows of gqa_prefill_mma_padded to 32)
MMA_STAGED = {"gqa_prefill_mma": 2, "gqa_prefill_mma_padded": 2, "gqa_prefill_mma_blocked": 2,
              "gqa_prefill_mma_padded_blocked": 2, "split_k_m16": 1,
              "structural": 1, "gated_mlp_m32": 2, "gated_mlp_m32_long_k": 2,
              "gated_mlp_m64_rolled": 2}


@pytest.mark.parametrize("name", [c[0] for c in CASES])
def test_mma_kernel_matches_reference(sim_results_mma: dict, name: str) -> None:
    """mma.sync kernels (emulated warp-wide under the simulator), NaN-poisoned outputs, float64 reference.

    Checks the fragment layouts (A pairs packed in shared memory, B pairs built from two k
    rows' vector loads, accumulators scattered back per lane), the k-groups' reduction and
    the per-iteration variant (GQA's matmul -> exp), and the staged tensor-core matmul (both
    tiles in shared memory, 16x8 output tiles dealt to warps: attention with 32 queries per
    block); other cases fall back to the FMA path.
    """
    r = sim_results_mma[name]
    assert "error" not in r, r.get("error")
    assert r["shapes_ok"]
    assert r["mma_streams"] == MMA_CASES.get(name, 0)
    assert r["mma_staged"] == MMA_STAGED.get(name, 0)
    for err, dt in zip(r["rel"], r["dtypes"]):
        assert not math.isnan(err), f"{name}: NaN in the output (an element was never written, or overflow)"
        assert err < TOL[dt], f"{name}: relative error {err:.3g} >= {TOL[dt]} ({dt})"


@pytest.mark.parametrize("name", [c[0] for c in CASES])
def test_pipelined_kernel_matches_reference(sim_results_pipelined: dict, name: str) -> None:
    """``pipeline_depth=3``: streamed rows and staged tiles loaded up to three iterations ahead.

    The register ring (loads for iteration it + depth at the top of iteration it, every stage
    moved one place at its end) must hand each iteration its own tile: a stage off by one reads
    another iteration's rows and fails the float64 comparison; the cases' loops run 2 to 8
    iterations, so the depth is clamped to the loop as well.
    """
    r = sim_results_pipelined[name]
    assert "error" not in r, r.get("error")
    assert r["shapes_ok"]
    for err, dt in zip(r["rel"], r["dtypes"]):
        assert not math.isnan(err), f"{name}: NaN in the output (an element was never written, or overflow)"
        assert err < TOL[dt], f"{name}: relative error {err:.3g} >= {TOL[dt]} ({dt})"


@pytest.mark.parametrize("name", [c[0] for c in MV_CASES])
def test_mv_kernel_matches_reference(sim_results_mv: dict, name: str) -> None:
    """``mma_b16``: B in 16-byte loads of rows g, g + 8, fragments by (emulated) movmatrix.trans.

    Checks the mv layout end to end: the lanes' load addresses, the transposed B fragments,
    the A fragments in the standard k order (a wrong order fails by ~100 %), and the
    accumulators' columns (8t + 2c + u) in the reduction; NaN-poisoned outputs, float64 reference.
    """
    r = sim_results_mv[name]
    assert "error" not in r, r.get("error")
    assert r["shapes_ok"]
    assert r["mv_streams"] == MV_STREAMS[name] and (r["movt"] > 0) == (MV_STREAMS[name] > 0)
    for err, dt in zip(r["rel"], r["dtypes"]):
        assert not math.isnan(err), f"{name}: NaN in the output (an element was never written, or overflow)"
        assert err < TOL[dt], f"{name}: relative error {err:.3g} >= {TOL[dt]} ({dt})"


@pytest.mark.parametrize("name", [c[0] for c in MV_CASES])
def test_mv_pipelined_kernel_matches_reference(sim_results_mv_pipelined: dict, name: str) -> None:
    """``mma_b16`` with ``pipeline_words=64`` (depth 1 and 2): the mv layout's two loads per k-step
    prefetched into registers (where the 64-word budget allows), each iteration its own rows."""
    r = sim_results_mv_pipelined[name]
    assert "error" not in r, r.get("error")
    assert r["shapes_ok"]
    assert r["mv_streams"] == MV_STREAMS[name]
    for err, dt in zip(r["rel"], r["dtypes"]):
        assert not math.isnan(err), f"{name}: NaN in the output (an element was never written, or overflow)"
        assert err < TOL[dt], f"{name}: relative error {err:.3g} >= {TOL[dt]} ({dt})"


@pytest.mark.parametrize("name", [c[0] for c in SMEM_CASES])
def test_dynamic_shared_memory_kernel_matches_reference(sim_results_smem: dict, name: str) -> None:
    """Past 48 KB the pool is one dynamic shared area (the buffers stay out of global scratch); the
    tensor-core A fragments (int32) are a slice of it after the floats."""
    r = sim_results_smem[name]
    assert "error" not in r, r.get("error")
    assert r["shapes_ok"]
    assert r["dyn_smem"][0] > 48 * 1024 and r["scratch"] == [0] * len(r["scratch"])
    assert r["dynamic_ints"] == (1 if name == "rms_norm_linear_whole_x" else 0)
    for err, dt in zip(r["rel"], r["dtypes"]):
        assert not math.isnan(err), f"{name}: NaN in the output (an element was never written, or overflow)"
        assert err < TOL[dt], f"{name}: relative error {err:.3g} >= {TOL[dt]} ({dt})"



# tiles each ASYNC_CASES kernel copies by cp.async: K and V of attention (Q is loop-invariant); X, W1 and W2
ASYNC_TILES = {"gqa_prefill_mma_padded_blocked": 2, "gated_mlp_m64_rolled": 3, "gated_mlp_m32_ring": 3}


@pytest.mark.parametrize("name", [c[0] for c in ASYNC_CASES])
def test_async_ring_kernel_matches_reference(sim_results_async: dict, name: str) -> None:
    """``async_stages=3``: staged tensor-core tiles copied into a ring of 3 shared-memory stages, 2 iterations
    ahead; A fragments read as loaded, B fragments transposed by (emulated) movmatrix. Each iteration must read
    its own stage: with 6 iterations the ring wraps twice, and a stage off by one fails by ~90 %."""
    r = sim_results_async[name]
    assert "error" not in r, r.get("error")
    assert r["shapes_ok"]
    assert r["async_tiles"] == ASYNC_TILES[name] and r["movt"] > 0
    for err, dt in zip(r["rel"], r["dtypes"]):
        assert not math.isnan(err), f"{name}: NaN in the output (an element was never written, or overflow)"
        assert err < TOL[dt], f"{name}: relative error {err:.3g} >= {TOL[dt]} ({dt})"


# ldmatrix.x4 (A) and ldmatrix.x4.trans (B, two column tiles) per k-step of each case's register-blocked loops;
# attention's QK^T keeps its round-robin tiles (movt), exp(S)V's 1 x 2 blocks read V by ldmatrix.trans
LDSM = {"gqa_prefill_mma_padded_blocked": [0, 1], "gated_mlp_m64_rolled": [4, 4], "gated_mlp_m32_ring": [8, 8]}


@pytest.mark.parametrize("name", [c[0] for c in ASYNC_CASES])
def test_ldmatrix_fragments_match_reference(sim_results_ldmatrix: dict, name: str) -> None:
    """``CodegenOptions(ldmatrix=True)``: a warp's A registers from one (emulated) ldmatrix.x4 of the tile kept as loaded,
    two column tiles' B registers from one ldmatrix.x4.trans of a B tile kept k-major; register-staged or in a
    cp.async ring, or two register sets (the loop written out twice). Lanes naming the wrong rows (matrices 1 and
    2 swapped) fail by ~128 %."""
    r = sim_results_ldmatrix[name]
    assert "error" not in r, r.get("error")
    assert r["shapes_ok"] and r["ldsm"] == [n * sim_results_ldmatrix["unrolled"] for n in LDSM[name]]
    for err, dt in zip(r["rel"], r["dtypes"]):
        assert not math.isnan(err), f"{name}: NaN in the output (an element was never written, or overflow)"
        assert err < TOL[dt], f"{name}: relative error {err:.3g} >= {TOL[dt]} ({dt})"


@pytest.mark.parametrize("name", SPLIT_CASES)
def test_split_kernel_matches_reference(sim_results_split: dict, name: str) -> None:
    """``CodegenOptions.split``: each tile's loop run by 2 or 4 blocks, the last to arrive adding their sums.

    Checks the blocks' parts of the loop (a part read twice or skipped fails the float64 comparison), the
    hand-over of every kind of accumulator (rms and sum fused into the loads, streamed FMA and tensor-core
    partial sums, attention's sums kept in the mma registers) and that the tiles' counters are reset: a
    second call gives the same bits. Kernels whose loop the split does not divide, or that have none, stay whole.
    """
    if name not in sim_results_split:
        pytest.skip(f"{name}: no loop that {sim_results_split['split']} divides (run unsplit in the split-2 run)")
    r = sim_results_split[name]
    assert "error" not in r, r.get("error")
    assert r["shapes_ok"]
    S = sim_results_split["split"]
    g = dict((c[0], c[1]) for c in CASES)[name]()
    whole = [op.block_graph for op in g.customized_ops]
    expected = sum(1 for bg in whole if bg.forloop_range % S == 0
                   and any(op.op_type == "forloop_accum" for op in bg.ops))
    assert r["split_kernels"] == expected
    assert r["repeat_equal"]
    for err, dt in zip(r["rel"], r["dtypes"]):
        assert not math.isnan(err), f"{name}: NaN in the output (an element was never written, or overflow)"
        assert err < TOL[dt], f"{name}: relative error {err:.3g} >= {TOL[dt]} ({dt})"


def test_split_cases_split_some_kernels(sim_results_split: dict) -> None:
    split = [n for n in SPLIT_CASES if sim_results_split.get(n, {}).get("split_kernels")]
    assert len(split) >= (8 if sim_results_split["split"] == 2 else 3), split
