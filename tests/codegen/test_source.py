"""The generated source: structure, lowering choices, readability (no GPU, no simulator run)."""
from __future__ import annotations

import ast

import pytest

import mirage_lab as mi
from mirage_lab.codegen import CodegenOptions, generate_module
from mirage_lab.codegen.block_kernel import emit_block_kernel
from mirage_lab.codegen.staged_mma import StagedMmaEmitter
from mirage_lab.errors import CodegenError
from mirage_lab.examples import gated_mlp_fused, gqa_flashdecoding, rms_norm_linear_fused

from codegen_cases import CASES, spill_graph, structural_graph


@pytest.mark.parametrize("name,build", [(c[0], c[1]) for c in CASES])
def test_every_case_generates_valid_python(name, build) -> None:
    g = build()
    mod = generate_module(g)
    ast.parse(mod.source)
    assert len(mod.kernels) == len(g.customized_ops)
    assert mod.source.count("@cuda.jit(cache=True, fastmath=True, **_bounds(") == len(g.customized_ops)
    assert "«" not in mod.source


def test_rms_norm_linear_streams_the_weight_with_wide_loads() -> None:
    g = rms_norm_linear_fused(16, 4096, 4096, grid=256, forloop_range=8)
    src, info = emit_block_kernel(g.customized_ops[0].block_graph, "k")
    assert info.streamed_inputs == [1]          # W goes straight to registers
    assert info.input_views == ["int32", "int32"]
    assert "ldg2(in1" in src or "ldg4(in1" in src  # 8/16-byte loads of W
    assert "ldg4(in0" in src                       # X tile: 16-byte loads
    assert "split-K" in src
    assert info.pool_floats * 4 <= 48 * 1024


def test_gqa_streams_k_and_v() -> None:
    g = gqa_flashdecoding(batch=64, q_len=1, head_dim=128, kv_len=4096, kv_splits=16, q_blocks=1, forloop_range=4)
    info = generate_module(g).kernels[0]
    assert info.grid == (64, 16, 1)
    assert sorted(info.streamed_inputs) == [1, 2]


def test_staged_matmul_when_the_tile_has_two_consumers() -> None:
    info = generate_module(structural_graph()).kernels[0]
    assert info.streamed_inputs == []


def test_large_tiles_spill_to_global_scratch() -> None:
    info = generate_module(spill_graph()).kernels[0]
    assert info.scratch_floats_per_block >= 128 * 128
    assert info.pool_floats * 4 <= 48 * 1024
    assert info.dyn_smem_bytes == 0


def test_a_larger_pool_keeps_them_in_dynamic_shared_memory() -> None:
    gen = generate_module(spill_graph(), options=CodegenOptions(smem_kb=227))
    info, src = gen.kernels[0], gen.kernel_sources["kernel_0"]
    assert info.scratch_floats_per_block == 0 and info.dyn_smem_bytes == info.pool_floats * 4 > 48 * 1024
    assert "sm = cuda.shared.array(0, dtype=F32)" in src
    assert f"smem={info.dyn_smem_bytes})" in gen.source     # the launch asks for it
    # a pool that fits 48 KB stays static whatever the option allows
    small = generate_module(structural_graph(), options=CodegenOptions(smem_kb=227)).kernels[0]
    assert small.dyn_smem_bytes == 0


def test_the_cost_model_sees_the_scratch_go() -> None:
    from mirage_lab.pipeline.cost_model import estimate

    g = spill_graph()
    static, dynamic = estimate(g, CodegenOptions()), estimate(g, CodegenOptions(smem_kb=227))
    assert dynamic.latency_us < static.latency_us


def test_pool_sizes_outside_what_a_block_may_opt_in_to_are_refused() -> None:
    for bad in (47, 228, 100.0):
        with pytest.raises(ValueError, match="smem_kb"):
            CodegenOptions(smem_kb=bad)


def test_docstring_shows_the_block_graph_and_chains() -> None:
    src = generate_module(gated_mlp_fused(4, 128, 128, grid=4, forloop_range=4)).kernel_sources["kernel_0"]
    assert "Fusion chains (thread graph)" in src and "silu" in src


def test_plain_kernel_ops_become_torch_calls() -> None:
    g = mi.new_kernel_graph()
    a = g.new_input((4, 8))
    b = g.new_input((8, 4))
    g.mark_output(g.exp(g.matmul(g.rms_norm(a), b)))
    src = generate_module(g).source
    assert "torch.matmul(" in src and "torch.exp(" in src and "@cuda.jit" not in src


def test_rejects_non_graphs() -> None:
    with pytest.raises(CodegenError):
        generate_module("not a graph")  # type: ignore[arg-type]


def test_tensor_core_staged_tiles_get_padded_rows() -> None:
    """Q, K, V and exp(QK) tiles of attention on tensor cores: rows padded to 4 mod 8 floats (bank spread)."""
    from mirage_lab.codegen import CodegenOptions
    from mirage_lab.codegen.block_kernel import _Emitter

    bg = gqa_flashdecoding(batch=1, q_len=32, head_dim=16, kv_len=64, kv_splits=2, q_blocks=1,
                           forloop_range=2).customized_ops[0].block_graph
    em = _Emitter(bg, "k", CodegenOptions(mma=True))
    # Q [32,16] of QK and exp(QK) [32,16] of (.)V, the A operands: 16 columns -> pitch 20 floats
    # (K and V, the B operands, are k-pair words instead: test_b_operands_are_kept_as_k_pairs)
    assert sorted(em.pitch.values()) == [(16, 20)] * 2
    src, info = em.emit()
    assert "* 20 +" in src
    # Q is the same every iteration: its A fragments are packed once, before the loop
    pre, loop = src.split("for it in range(2):")
    assert "qa" in pre and "mma_f16(qa" in loop
    # the FMA lowering keeps dense tiles
    assert _Emitter(bg, "k", CodegenOptions()).pitch == {}


def test_b_operands_are_kept_as_k_pairs() -> None:
    """K and V of attention on tensor cores: words of two k-rows, one 32-bit load per B register, no float32 copy."""
    from mirage_lab.codegen import CodegenOptions
    from mirage_lab.codegen.block_kernel import _Emitter

    bg = gqa_flashdecoding(batch=1, q_len=32, head_dim=16, kv_len=64, kv_splits=2, q_blocks=1,
                           forloop_range=2).customized_ops[0].block_graph
    k_tile, v_tile = (op.inputs[1] for op in bg.ops if op.op_type == "matmul")
    em = _Emitter(bg, "k", CodegenOptions(mma=True))
    # 16 columns -> rows of 24 words (8 or 24 mod 32: a warp's reads of pair rows t, columns g hit 32 banks)
    assert em.pair_pitch == {em.bufname(k_tile): 24, em.bufname(v_tile): 24}
    src, _ = em.emit()
    loop = src.split("for it in range(2):")[1]
    # each tile: a thread's two rows of 8 halves interleaved into 8 words, stored 16 bytes at a time
    assert loop.count("u2f(pkl(") == 8 and loop.count("u2f(pkh(") == 8
    assert "h2f(r1_" not in loop and "h2f(r2_" not in loop                # no float32 copy of K or V
    assert loop.count("= f2u(sm[") == 2 + 2    # QK and (.)V: one k-step each, two B registers per k-step
    assert "pk16(f2h(sm[" in loop                                         # exp(QK), an A operand, stays float32
    # without tensor cores, or in the dense fallback layout, nothing is paired
    assert _Emitter(bg, "k", CodegenOptions()).pair_pitch == {}
    assert _Emitter(bg, "k", CodegenOptions(mma=True), pad=False).pair_pitch == {}


def test_index_arithmetic_by_powers_of_two_becomes_shifts_and_masks() -> None:
    """Floor division and remainder by 2**k are emitted as >> and &: the same integers, no sign fix-ups.

    Only in kernels with tensor-core staged matmuls, where it measured faster; the stream kernels keep // and %.
    """
    from mirage_lab.codegen import CodegenOptions
    from mirage_lab.codegen.index_ops import shift_pow2

    bg = gqa_flashdecoding(batch=1, q_len=32, head_dim=16, kv_len=64, kv_splits=2, q_blocks=1,
                           forloop_range=2).customized_ops[0].block_graph
    for opts, shifted in ((CodegenOptions(mma=True), True), (CodegenOptions(), False)):
        code = [ln for ln in emit_block_kernel(bg, "k", opts)[0].split('"""')[2].split("\n") if "#" not in ln]
        assert any(" // " in ln or " % " in ln for ln in code) is not shifted
    stream = emit_block_kernel(rms_norm_linear_fused(4, 256, 256, grid=8, forloop_range=4).customized_ops[0].block_graph,
                               "k", CodegenOptions(mma=True))[0]
    assert "tid // 32" in stream
    line = "    o = (e // 16) * 20 + e % 16 + (e // 3) % 5 + x // 1; y = e % 1"
    assert shift_pow2(line) == "    o = (e >> 4) * 20 + (e & 15) + e // 3 % 5 + x; y = e & 0"
    for e in range(-70, 70):  # Python's floor semantics are the shifts' for negative integers too
        o, y = eval(line.split("=", 1)[1].split(";")[0], {"e": e, "x": 7}), e % 1
        assert (o, y) == (eval(shift_pow2(line).split("=", 1)[1].split(";")[0], {"e": e, "x": 7}), e & 0)
    assert shift_pow2('    """e // 16 in a docstring"""') == '    """e // 16 in a docstring"""'
    assert shift_pow2("    if e % 4 < 2:") == "    if e & 3 < 2:"


def test_padding_that_would_spill_falls_back_to_dense_tiles() -> None:
    """64 queries x 64 keys per iteration: padded tiles would spill to global scratch; the dense layout is emitted."""
    from mirage_lab.codegen import CodegenOptions
    from mirage_lab.codegen.block_kernel import _Emitter, _PaddingOverflow

    opts = CodegenOptions(mma=True)
    bg = gqa_flashdecoding(batch=1, q_len=64, head_dim=64, kv_len=256, kv_splits=2, q_blocks=1,
                           forloop_range=2).customized_ops[0].block_graph
    with pytest.raises(_PaddingOverflow):
        _Emitter(bg, "k", opts).emit()
    assert emit_block_kernel(bg, "k", opts) == _Emitter(bg, "k", opts, pad=False).emit()


def test_warp_takes_a_block_of_tiles_and_reads_each_fragment_once() -> None:
    """Register blocking: a warp's tiles share their fragments in one k loop (4R + 2C shared loads, R x C mma)."""
    from mirage_lab.codegen import CodegenOptions

    # exp(S)V: 2 x 4 output tiles over 4 warps, one k-step: each warp a 1 x 2 block, A read once for both
    bg = gqa_flashdecoding(batch=1, q_len=32, head_dim=32, kv_len=64, kv_splits=2, q_blocks=1,
                           forloop_range=2).customized_ops[0].block_graph
    pv = [op for op in bg.ops if op.op_type == "matmul"][1]
    src, _ = emit_block_kernel(bg, "k", CodegenOptions(mma=True))
    g = pv.guid
    loop = src.split("for it in range(2):")[1]
    assert "each warp a 1x2 block of tiles" in loop
    assert f"ar{g}_0 = (tid >> 5 >> 1) * 16 + wg{g}" in loop      # block rows: warp // 2 (shifts)
    assert loop.count(f"a0_0{g} = ") == 1 and loop.count(f"b0_0{g} = ") == 1 and loop.count(f"b1_0{g} = ") == 1
    assert loop.count(f"mma_f16(a0_0{g}") == 2
    # gated MLP, 32 rows x 32 columns per block over 4 warps, 4 k-steps: each matmul one k loop written out,
    # each step's A fragment read once for the warp's two column tiles (8 shared loads for 2 mma; 12 before)
    gm = gated_mlp_fused(32, 128, 64, grid=2, forloop_range=2).customized_ops[0].block_graph
    src, _ = emit_block_kernel(gm, "k", CodegenOptions(mma=True))
    body = src.split("for it in range(2):")[1]
    assert body.count("register-blocked") == 2 and body.count("8 shared loads per k-step for 2 mma") == 2
    # the 4 k-steps written out (a rolled loop of 2 mma waited on its loads: NVVM did not unroll it)
    assert "for kk in range(" not in body and "for kq in range(" not in body
    for op in (op for op in gm.ops if op.op_type == "matmul"):
        assert body.count(f"a0_0{op.guid} = ") == 4 and body.count(f"b1_0{op.guid} = ") == 4
        assert body.count(f"= mma_f16(a0_0{op.guid}") == 8
    # with the blocking off (the probe's A/B), tiles are dealt round-robin with a k loop each
    try:
        StagedMmaEmitter.register_blocking = False
        off, _ = emit_block_kernel(gm, "k", CodegenOptions(mma=True))
    finally:
        StagedMmaEmitter.register_blocking = True
    assert "register-blocked" not in off and off.split("for it in range(2):")[1].count("for kk in range(4):") == 4


def test_buffers_are_placed_before_the_text_and_an_unplanned_one_is_an_internal_error() -> None:
    """The plan declares and places every buffer first; emitting only looks them up."""
    from mirage_lab.codegen.block_kernel import _Emitter

    bg = structural_graph().customized_ops[0].block_graph
    em = _Emitter(bg, "k")
    x = bg.input_ops[0].outputs[0]
    with pytest.raises(CodegenError, match="no planned buffer"):
        em.ref(x, "e0")                                   # nothing is placed yet
    pool, scratch = em.plan_buffers()
    assert em.p.placed and pool > 0 and scratch == 0
    b = em.p.bufs[em.bufname(x)]
    assert em.ref(x, "e0") == (f"sm[{b.offset} + e0]" if b.offset else "sm[e0]")
    with pytest.raises(CodegenError, match="was not planned"):
        em.p.buf("t999999", 4, "loop")
    src, info = _Emitter(bg, "k").emit()
    assert info.pool_floats == pool and "«" not in src and "sm[" in src


def test_mma_b16_reads_32_column_strips_with_16_byte_loads() -> None:
    """RMSNorm+Linear 16x4096x4096 over 128 blocks: each block's W strip is 32 columns (64 bytes a row).

    Tensor cores alone read it in 8-byte loads (a lane's 4 columns of 4 rows); ``mma_b16`` in
    16-byte loads (8 columns of rows g and g + 8) whose words movmatrix transposes into B fragments.
    """
    from mirage_lab.codegen import CodegenOptions
    from mirage_lab.codegen.block_kernel import _Emitter
    from mirage_lab.pipeline import with_block_dim

    for threads in (256, 512):
        bg = with_block_dim(rms_norm_linear_fused(16, 4096, 4096, grid=128, forloop_range=16),
                            threads).customized_ops[0].block_graph
        o_old = CodegenOptions(mma=True, pipeline_words=64)
        o_new = CodegenOptions(mma=True, pipeline_words=64, mma_b16=True)
        old, _ = emit_block_kernel(bg, "k", o_old)
        new, info = emit_block_kernel(bg, "k", o_new)
        assert "ldg2(in1" in old and "movt(" not in old
        assert "ldg4(in1" in new and "ldg2(in1" not in new and "movt(" in new and "pkl(" not in new
        assert info.streamed_inputs == [1]
        # the same prefetch budget: 2 loads x 4 words per k-step against 4 loads x 2 words
        e_old, e_new = _Emitter(bg, "k", o_old), _Emitter(bg, "k", o_new)
        (s_old,), (s_new,) = e_old.p.streams, e_new.p.streams
        assert s_new.mv and not s_old.mv and s_new.words == s_old.words == 8 * s_new.KS
        assert e_new._piped == e_old._piped == {s_new.op.guid}
        assert new.count("n1_") * 2 == old.count("n1_")   # half the registers' names, twice the words


def test_mma_b16_changes_nothing_where_it_does_not_apply() -> None:
    """64-column strips keep their 16-byte layout; without ``mma`` the option is inert (and not in the tag)."""
    from mirage_lab.codegen import CodegenOptions

    g = rms_norm_linear_fused(16, 4096, 4096, grid=64, forloop_range=16)
    base = generate_module(g, options=CodegenOptions(mma=True)).kernel_sources
    assert generate_module(g, options=CodegenOptions(mma=True, mma_b16=True)).kernel_sources == base
    g32 = rms_norm_linear_fused(4, 256, 256, grid=8, forloop_range=4)
    assert (generate_module(g32, options=CodegenOptions(mma_b16=True)).kernel_sources
            == generate_module(g32).kernel_sources)
    o = CodegenOptions(mma=True, pipeline_words=64, pipeline_depth=2, mma_b16=True)
    assert CodegenOptions(*o.astuple()) == o and o.tag().endswith("-mma-mv")
    assert CodegenOptions(mma_b16=True).tag() == CodegenOptions().tag()


def test_streamed_fma_temporaries_are_assigned_once_per_iteration() -> None:
    # numba's SSA pass rewrites the whole kernel once per re-defined name: the two streams of the gated
    # MLP (X·W1, X·W2) name their A and B values by stream, so no name is assigned twice in the loop body
    import re
    from collections import Counter

    src, info = emit_block_kernel(gated_mlp_fused(4, 256, 256, grid=8, forloop_range=4).customized_ops[0].block_graph,
                                  "k")
    assert len(info.streamed_inputs) == 2
    names = Counter(m.group(1) for stmt in src.replace(";", "\n").splitlines()
                    if (m := re.match(r"\s*([aw]\d+_\d+_\d+) = ", stmt)))
    assert names and max(names.values()) == 1, names.most_common(3)
    assert {n.split("_")[0] for n in names} == {"a1", "w1", "a2", "w2"}   # per streamed input (in1, in2)


def test_staged_tensor_core_matmul_pads_rows_to_16_and_never_stores_the_padding():
    from mirage_lab.codegen import CodegenOptions, generate_module
    from mirage_lab.codegen.plan import mma_rows, staged_mma_fits
    from mirage_lab.examples import gqa_flashdecoding

    from mirage_lab.pipeline import with_block_dim

    g = with_block_dim(gqa_flashdecoding(batch=1, q_len=71, head_dim=64, kv_len=256, kv_splits=2, q_blocks=1,
                                         forloop_range=2), 512)
    bg = g.customized_ops[0].block_graph
    mms = [op for op in bg.ops if op.op_type == "matmul"]
    on = CodegenOptions(mma=True)
    assert [mma_rows(m) for m in (1, 16, 17, 71)] == [16, 16, 32, 80]
    assert all(staged_mma_fits(op, 512, on) for op in mms)
    assert not any(staged_mma_fits(op, 512, on, padded=False) for op in mms)
    src = generate_module(g, options=on).kernel_sources
    text = "".join(src.values())
    assert text.count("(71 rows padded to 80)") == 2
    assert "min(" in text and "< 71:" in text       # padded rows read row 70 again; their results are not stored


def test_tensor_core_streams_of_columns_the_warps_cannot_split_evenly() -> None:
    """LLaMA-3 70B's QKV at decode (8 x 8192 x 10240) over 128 blocks, one wave of the H100/H200's 132 SMs: each
    block owns 80 columns, five 16-column chunks that 4 warps cannot share out. Every warp takes all five (five
    4-byte loads per row, 10 mma per k-step) and the warps split K; before, such widths fell back to FMA."""
    from mirage_lab.codegen.block_kernel import _Emitter
    from mirage_lab.pipeline.cost_model import H200, estimate

    g = rms_norm_linear_fused(8, 8192, 10240, grid=128, forloop_range=64)
    bg = g.customized_ops[0].block_graph
    (st,) = _Emitter(bg, "k", CodegenOptions(mma=True)).p.streams
    assert st.mma and (st.vw, st.NCW, st.CW, st.G) == (2, 1, 5, 4)
    assert st.words == 4 * st.KS * st.CW          # one word per row and chunk
    src, info = emit_block_kernel(bg, "k", CodegenOptions(mma=True))
    assert info.streamed_inputs == [1] and "5 chunks of 16 columns" in src
    loop = src[src.index("for it in range("):]
    assert loop.count("= mma_f16(") == 10 * st.KS
    assert all(f"b1_0_3c{c} = in1[" in src for c in range(5))
    # the tensor-core lowering is now what the cost model rates, not the FMA one (3x slower)
    e_mma, e_fma = estimate(g, CodegenOptions(mma=True), H200), estimate(g, CodegenOptions(), H200)
    assert e_mma.us < e_fma.us / 2
    # widths the warps do split keep their layout: 128 columns, 2 warps of 64 columns (one chunk each), 2 along K
    (st128,) = _Emitter(rms_norm_linear_fused(8, 8192, 10240, grid=80, forloop_range=64).customized_ops[0]
                        .block_graph, "k", CodegenOptions(mma=True)).p.streams
    assert (st128.CW, st128.NCW, st128.G) == (1, 2, 2)
