"""A candidate's lowering variants: every distinct generated module, made once per graph content."""
from mirage_lab import examples as ex
from mirage_lab.pipeline import variants as vmod
def test_lowering_variants_are_generated_once_per_graph_content():
    # asked for by the search's stop rule, the speculative compiles, the shortlist and the tuner:
    # the generated modules of one candidate are made once; each caller gets its own Variants
    g = ex.rms_norm_linear_fused(grid=128)
    calls = []
    real = vmod._source_key
    vmod._MEMO.clear()
    try:
        vmod._source_key = lambda *a: calls.append(1) or real(*a)
        first = vmod.lowering_variants(g, candidate=0)
        n = len(calls)
        again = vmod.lowering_variants(g, candidate=3)
        assert n > 0 and len(calls) == n                       # no module generated the second time
        assert [v.tag.split("/", 1)[1] for v in again] == [v.tag.split("/", 1)[1] for v in first]
        assert {v.candidate for v in again} == {3} and again[0] is not first[0]
        again[0].estimate_us = 1.0
        assert first[0].estimate_us is None                    # callers do not share mutable Variants
    finally:
        vmod._source_key = real


def _spilling_graph():
    # a 16 x 1024 block holding all of X (64 KB of float32 tiles past the static 48 KB pool) and its 1024 x 64 W
    return ex.rms_norm_linear_fused(16, 1024, 64, grid=1, forloop_range=1)


def test_a_lowering_that_spills_to_global_scratch_gets_a_dynamic_shared_memory_twin(monkeypatch):
    from mirage_lab.codegen import generate_module

    monkeypatch.delenv("MIRAGE_LAB_SMEM_KB", raising=False)
    vmod._MEMO.clear()
    vs = vmod.lowering_variants(_spilling_graph(), candidate=0)
    twins = [v for v in vs if v.options.smem_kb > 48]
    assert twins, [v.tag for v in vs]
    for v in twins:
        base = next(b for b in vs if b.threads == v.threads and b.options.smem_kb == 48
                    and b.options.astuple()[:7] == v.options.astuple()[:7])
        spilled = generate_module(base.graph, options=base.options)
        held = generate_module(v.graph, options=v.options)
        assert any(k.scratch_floats_per_block for k in spilled.kernels)
        assert all(k.scratch_floats_per_block == 0 for k in held.kernels)    # every buffer in shared memory
        assert v.options.smem_kb % 8 == 0 and v.options.smem_kb < 227        # what the buffers need, not the most
        assert f"-smem{v.options.smem_kb}" in v.tag
    # a lowering that fits 48 KB has no twin
    assert not [v for v in vmod.lowering_variants(ex.rms_norm_linear_fused(grid=128), candidate=0)
                if v.options.smem_kb > 48]


def test_the_shared_memory_limit_can_be_set_and_a_bad_setting_is_named(monkeypatch):
    import pytest

    from mirage_lab.errors import MirageLabError

    vmod._MEMO.clear()
    monkeypatch.setenv("MIRAGE_LAB_SMEM_KB", "48")         # a GPU with no opt-in past 48 KB: no twins
    assert not [v for v in vmod.lowering_variants(_spilling_graph(), candidate=0) if v.options.smem_kb > 48]
    monkeypatch.setenv("MIRAGE_LAB_SMEM_KB", "lots")
    with pytest.raises(MirageLabError, match="MIRAGE_LAB_SMEM_KB must be an integer"):
        vmod.lowering_variants(_spilling_graph(), candidate=0)


def test_an_attention_block_of_71_query_rows_is_estimated_on_tensor_cores():
    # Falcon-7B's 71 query heads over one KV head: the tensor-core variant pads the rows to 80 and the cost
    # model rates it well ahead of the FMA lowering of the same μGraph
    from mirage_lab.codegen import CodegenOptions
    from mirage_lab.pipeline.cost_model import estimate

    g = vmod.with_block_dim(ex.gqa_flashdecoding(batch=8, q_len=71, head_dim=64, kv_len=2048, kv_splits=8,
                                                 q_blocks=1, forloop_range=16), 256)
    mma, fma = estimate(g, CodegenOptions(mma=True)).us, estimate(g, CodegenOptions()).us
    assert mma < 0.5 * fma, (mma, fma)


def test_cp_async_rings_are_raced_only_when_asked_for_and_only_where_a_tile_qualifies(monkeypatch):
    import pytest

    from mirage_lab.codegen import CodegenOptions, generate_module

    monkeypatch.delenv("MIRAGE_LAB_SMEM_KB", raising=False)
    g = ex.gated_mlp_fused(32, 384, 64, grid=2, forloop_range=6)   # X, W1, W2 16-bit tiles of tensor-core matmuls
    vmod._MEMO.clear()
    assert not [v for v in vmod.lowering_variants(g, candidate=0) if v.options.async_stages]   # off by default
    monkeypatch.setattr(vmod, "ASYNC_STAGES", (2, 3, 4))
    vmod._MEMO.clear()
    rings = [v for v in vmod.lowering_variants(g, candidate=0) if v.options.async_stages]
    assert {v.options.async_stages for v in rings} == {2, 3, 4} and {v.threads for v in rings} == {128, 256, 512}
    for v in rings:
        src = "".join(generate_module(v.graph, options=v.options).kernel_sources.values())
        assert "cp16(sm" in src and f"cp_wait{v.options.async_stages - 2}()" in src
        assert f"-cp{v.options.async_stages}-" in v.tag and v.tag.endswith("-mma") and v.options.mma
    # a μGraph whose matmul streams W through registers (no staged tensor-core matmul) gets no ring
    vmod._MEMO.clear()
    assert not [v for v in vmod.lowering_variants(ex.rms_norm_linear_fused(grid=128), candidate=0)
                if v.options.async_stages]
    with pytest.raises(ValueError, match="async_stages must be 0"):
        CodegenOptions(mma=True, async_stages=5)
    vmod._MEMO.clear()


def test_tensor_core_variants_read_by_ldmatrix_only_where_a_register_blocked_loop_does():
    # ldmatrix measured 3-12 % faster on the H200 (RESULTS.md 2026-11-29 (f)); where no register-blocked loop
    # reads by it, the option would only change the B tiles' layout, so the variant goes without it
    from mirage_lab.codegen import generate_module

    vmod._MEMO.clear()
    g = ex.gated_mlp_fused(32, 384, 64, grid=2, forloop_range=6)
    with_ldsm = 0
    for v in vmod.lowering_variants(g, candidate=0):
        src = "".join(generate_module(v.graph, options=v.options).kernel_sources.values())
        assert v.options.ldmatrix == ("ldsm4" in src), v.tag
        assert ("-ldsm" in v.tag) == v.options.ldmatrix
        with_ldsm += v.options.ldmatrix
    assert with_ldsm >= 2
    # Phi-3-mini's SwiGLU tiling: at 48 KB the tiles spill to global scratch (no blocked loop); its shared-memory
    # twin is register-blocked and reads by ldmatrix (the lowering measured fastest, RESULTS.md 2026-11-29 (f))
    vmod._MEMO.clear()
    phi3 = vmod.lowering_variants(ex.gated_mlp_fused(32, 3072, 8192, grid=128, forloop_range=16), candidate=0,
                                  threads=(256,))
    assert [v.options.smem_kb > 48 for v in phi3 if v.options.ldmatrix] == [True, True], [v.tag for v in phi3]
    vmod._MEMO.clear()
    assert not [v for v in vmod.lowering_variants(ex.rms_norm_linear_fused(grid=128), candidate=0)
                if v.options.ldmatrix]


def test_split_twins_only_for_grids_that_leave_sms_idle():
    """80 tiles (fewer than 3/4 of 132 SMs): each lowering also split over 4 and 8 blocks; 128 tiles: none."""
    narrow = vmod.lowering_variants(ex.rms_norm_linear_fused(8, 8192, 10240, grid=80, forloop_range=64))
    tags = [v.options.tag() for v in narrow]
    assert any("-sk4" in t for t in tags) and any("-sk8" in t for t in tags)
    assert not any("-sk2" in t or "-sk16" in t for t in tags)
    assert len({v.source_key for v in narrow}) == len(narrow)
    wide = vmod.lowering_variants(ex.rms_norm_linear_fused(16, 4096, 4096, grid=128, forloop_range=16))
    assert not any(v.options.split > 1 for v in wide)
