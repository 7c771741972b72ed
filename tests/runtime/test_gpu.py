"""On a real GPU: generated kernels at full benchmark shapes, CUDA graphs, torch streams,
profiling and export. Skipped (with the reason) where no CUDA GPU is visible."""
from __future__ import annotations

import importlib.util
import os

import pytest
import torch

import mirage_lab as mi
from mirage_lab.examples import gated_mlp_fused, gqa_flashdecoding, rms_norm_linear_fused

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available() or os.environ.get("NUMBA_ENABLE_CUDASIM") == "1",
                       reason="needs a CUDA GPU (the CUDA simulator cannot run CUDA graphs or torch streams)"),
]

FULL = [  # the benchmark's first candidate of each program (so the kernel cache is shared)
    ("rmsnorm_linear_16x4096x4096", lambda: rms_norm_linear_fused(16, 4096, 4096, grid=128, forloop_range=16), [1.0, 1 / 64]),
    ("rmsnorm_linear_2x4096x6144", lambda: rms_norm_linear_fused(2, 4096, 6144, grid=192, forloop_range=8), [1.0, 1 / 64]),
    ("gqa_decode", lambda: gqa_flashdecoding(64, 1, 128, 4096, kv_splits=16, q_blocks=1, forloop_range=2),
     [1 / 128 ** 0.5, 0.5, 1.0]),
    ("gqa_2x256", lambda: gqa_flashdecoding(2, 256, 64, 4096, kv_splits=8, q_blocks=16, forloop_range=4),
     [1 / 8, 0.5, 1.0]),
    ("gated_mlp", lambda: gated_mlp_fused(8, 4096, 4096, grid=256, forloop_range=16), [1.0, 1 / 64, 1 / 64]),
]


def _inputs(g, scales, seed):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    return [(torch.randn(t.dims, generator=gen, device="cuda") * s).to(t.dtype.torch) for t, s in zip(g.inputs, scales)]


def _check_against_reference(name, g, k, scales, seeds, rel):
    """Fresh inputs per seed, NaN-poisoned outputs, float64 reference."""
    for seed in seeds:
        xs = _inputs(g, scales, seed)
        outs = k(inputs=xs, poison=True)
        torch.cuda.synchronize()
        refs = mi.run_reference(g, [x.double() for x in xs])
        for o, r in zip(outs, refs):
            assert not torch.isnan(o).any(), f"{name}: NaN (unwritten output element?)"
            assert rel(o, r) < 2e-3, f"{name}: rel err {rel(o, r):.3g}"


@pytest.mark.parametrize("name,build,scales", FULL, ids=[f[0] for f in FULL])
def test_full_shape_kernels_match_float64_reference(name, build, scales, rel):
    g = build()
    _check_against_reference(name, g, mi.runtime.compile(g), scales, (1, 2), rel)


@pytest.mark.parametrize("name,build,scales", FULL, ids=[f[0] for f in FULL])
def test_mma_kernels_match_float64_reference(name, build, scales, rel):
    """CodegenOptions(mma=True): inline-PTX mma.sync streamed matmuls at full shape, NaN-poisoned outputs."""
    from mirage_lab.codegen import CodegenOptions

    g = build()
    k = mi.runtime.compile(g, options=CodegenOptions(mma=True))
    if name.startswith(("rmsnorm", "gated")):
        assert any("tensor cores: mma.m16n8k16" in src for src in k.generated.kernel_sources.values())
    _check_against_reference(name, g, k, scales, (3, 4), rel)


MV = [  # tensor-core warps of 32 columns: W strips read with 16-byte loads and movmatrix (mma_b16)
    ("rmsnorm_linear_16x4096x4096_t512", lambda: rms_norm_linear_fused(16, 4096, 4096, grid=128, forloop_range=16),
     [1.0, 1 / 64], 512),
    ("rmsnorm_linear_2x4096x6144", lambda: rms_norm_linear_fused(2, 4096, 6144, grid=192, forloop_range=8),
     [1.0, 1 / 64], 128),
    ("gated_mlp_8x4096x4096_grid128", lambda: gated_mlp_fused(8, 4096, 4096, grid=128, forloop_range=16),
     [1.0, 1 / 64, 1 / 64], 256),
]


@pytest.mark.parametrize("name,build,scales,threads", MV, ids=[f[0] for f in MV])
def test_mma_b16_kernels_match_float64_reference(name, build, scales, threads, rel):
    """CodegenOptions(mma=True, mma_b16=True): B fragments by movmatrix.trans of 16-byte loads, at full shape."""
    from mirage_lab.codegen import CodegenOptions
    from mirage_lab.pipeline import with_block_dim

    g = with_block_dim(build(), threads)
    for opts in (CodegenOptions(mma=True, mma_b16=True), CodegenOptions(mma=True, mma_b16=True, pipeline_words=64)):
        k = mi.runtime.compile(g, options=opts)
        assert any("movt(" in src for src in k.generated.kernel_sources.values())
        _check_against_reference(name, g, k, scales, (5, 6), rel)


SPLIT = [  # narrow grids whose loops split over blocks (CodegenOptions.split): norm + linear decode, gated MLP, attention
    ("rmsnorm_linear_8x8192x10240_grid80", lambda: rms_norm_linear_fused(8, 8192, 10240, grid=80, forloop_range=64),
     [1.0, 1 / 90], 512),
    ("gated_mlp_8x4096x4096", lambda: gated_mlp_fused(8, 4096, 4096, grid=128, forloop_range=16),
     [1.0, 1 / 64, 1 / 64], 256),
    ("gqa_decode", lambda: gqa_flashdecoding(64, 1, 128, 4096, kv_splits=16, q_blocks=1, forloop_range=4),
     [1 / 128 ** 0.5, 0.5, 1.0], 128),
]


@pytest.mark.parametrize("name,build,scales,threads", SPLIT, ids=[f[0] for f in SPLIT])
def test_split_kernels_match_float64_reference_and_repeat(name, build, scales, threads, rel):
    """Each tile's loop over 2 and 4 blocks, the last adding their sums: correct at full shape, the same bits on
    every call (the counters are reset, the sums added in block order), in a CUDA graph and on a second stream."""
    from mirage_lab.codegen import CodegenOptions
    from mirage_lab.pipeline import with_block_dim

    g = with_block_dim(build(), threads)
    for opts in (CodegenOptions(split=2), CodegenOptions(mma=True, pipeline_words=64, pipeline_depth=2, split=4)):
        k = mi.runtime.compile(g, options=opts)
        assert any(i.counters for i in k.generated.kernels)
        _check_against_reference(name, g, k, scales, (7,), rel)
        xs = _inputs(g, scales, 8)
        first = k(inputs=xs)
        for _ in range(3):
            assert all(torch.equal(a, b) for a, b in zip(first, k(inputs=xs)))
        graphed = k(inputs=xs, graph=True)
        assert all(torch.equal(a, b) for a, b in zip(first, graphed))
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            side = k(inputs=xs)
        main = k(inputs=xs)
        torch.cuda.current_stream().wait_stream(s)
        torch.cuda.synchronize()
        assert all(torch.equal(a, b) for a, b in zip(first, side)) and all(torch.equal(a, b) for a, b in zip(first, main))


def test_cuda_graph_replay_tracks_in_place_input_updates():
    g = rms_norm_linear_fused(16, 4096, 4096, grid=256, forloop_range=16)
    k = mi.runtime.compile(g)
    xs = _inputs(g, [1.0, 1 / 64], 5)
    (eager,) = k(inputs=xs)
    (graphed,) = k(inputs=xs, graph=True)
    assert torch.equal(eager, graphed)
    xs[0].copy_(torch.randn_like(xs[0]))          # static buffers: update in place, replay
    (graphed2,) = k(inputs=xs, graph=True)
    (eager2,) = k(inputs=xs)
    assert graphed2.data_ptr() == graphed.data_ptr() and torch.equal(eager2, graphed2)


def test_graph_replay_over_the_rotation_of_input_sets_captures_each_set_once(monkeypatch):
    # the timed calls rotate over profile.rotation_copies() sets (5 for RMSNorm 16x4096²): with a cache of 4
    # graphs every call recaptured (389 µs instead of 41, H100)
    from mirage_lab.runtime import kernel as rk
    from mirage_lab.runtime.profile import make_copies

    g = rms_norm_linear_fused(16, 256, 512, grid=8, forloop_range=4)
    k = mi.runtime.compile(g)
    captures = []
    real = rk.GraphedKernel
    monkeypatch.setattr(rk, "GraphedKernel", lambda *a: captures.append(1) or real(*a))
    sets = make_copies(_inputs(g, [1.0, 1 / 16], 3), rk.GRAPHS_PER_KERNEL)
    for _ in range(3):
        outs = [k(inputs=s, graph=True)[0].clone() for s in sets]
    assert len(captures) == len(sets)
    for s, o in zip(sets, outs):
        assert torch.equal(o, k(inputs=s)[0])


def test_launches_follow_torchs_current_stream():
    g = gated_mlp_fused(8, 4096, 4096, grid=256, forloop_range=16)
    k = mi.runtime.compile(g)
    xs = _inputs(g, [1.0, 1 / 64, 1 / 64], 6)
    (ref,) = k(inputs=xs)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        torch.cuda._sleep(50_000_000)             # the stream is busy: an unsynchronised launch would race
        (out,) = k(inputs=xs)
    torch.cuda.current_stream().wait_stream(s)
    assert torch.equal(out, ref)


def test_kept_buffers_on_two_streams_and_in_a_graph():
    """Two-kernel module: intermediates kept per stream, outputs fresh per call, a graph keeps its own."""
    g = gqa_flashdecoding(2, 256, 64, 4096, kv_splits=8, q_blocks=16, forloop_range=4)
    k = mi.runtime.compile(g)
    sets = [_inputs(g, [1 / 8, 0.5, 1.0], seed) for seed in (8, 9)]
    refs = [k(inputs=xs, poison=True)[0] for xs in sets]  # poison: allocated in the call, not kept
    outs = [k(inputs=xs)[0] for xs in sets + sets]
    assert len({o.data_ptr() for o in outs + refs}) == 6
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        torch.cuda._sleep(50_000_000)             # the side stream lags: its intermediates must be its own
        (side,) = k(inputs=sets[1])
    (main,) = k(inputs=sets[0])
    (graphed,) = k(inputs=sets[1], graph=True)
    (after,) = k(inputs=sets[0])
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    for o, r in zip(outs + [main, side, graphed, after], refs + refs + [refs[0], refs[1], refs[1], refs[0]]):
        assert torch.equal(o, r)
    assert len(k.module._BUFS.sets) >= 2          # one set per stream used


def test_profile_and_select_fastest():
    cands = [gqa_flashdecoding(64, 1, 128, 4096, kv_splits=16, q_blocks=1, forloop_range=4),
             gqa_flashdecoding(64, 1, 128, 4096, kv_splits=8, q_blocks=1, forloop_range=8)]
    xs = _inputs(cands[0], [1 / 128 ** 0.5, 0.5, 1.0], 7)
    sel = mi.pipeline.select_fastest(cands, xs, repeats=50)
    assert sel.best is not None and all(c.error is None for c in sel.candidates)
    t = sel.best.timings["cuda_graph"]
    assert 0 < t.p10_us <= t.median_us <= t.p90_us and t.copies >= 2
    assert sel.best.median_us == min(c.median_us for c in sel.candidates)


def test_exported_module_runs_on_gpu(tmp_path, rel):
    g = gqa_flashdecoding(64, 1, 128, 4096, kv_splits=16, q_blocks=1, forloop_range=4)
    p = mi.runtime.export(g, tmp_path / "gqa_decode.py", latency_us=47.0, device=torch.cuda.get_device_name())
    spec = importlib.util.spec_from_file_location("gqa_decode_export", p)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    xs = _inputs(g, [1 / 128 ** 0.5, 0.5, 1.0], 8)
    (out,) = mod.forward(*xs)
    (ref,) = mi.run_reference(g, [x.double() for x in xs])
    assert rel(out, ref) < 2e-3
    assert "47.00 µs" in p.read_text()


def test_timing_is_not_inflated_by_a_thread_holding_the_gil():
    """A busy Python thread (torch.compile building beside the tuner) stalls the host between an event
    and its call; those batches are measured again, so the device time stays the quiet one."""
    import threading

    from mirage_lab.runtime.profile import time_calls

    x = torch.randn(1 << 20, device="cuda")
    y = torch.empty_like(x)
    calls = [lambda: torch.add(x, 1.0, out=y)]
    quiet = time_calls(calls, repeats=50).median_us
    stop = threading.Event()

    def hog() -> None:   # pure Python: holds the GIL for whole switch intervals
        n = 0
        while not stop.is_set():
            n += sum(range(2000))

    threads = [threading.Thread(target=hog, daemon=True) for _ in range(2)]
    for t in threads:
        t.start()
    try:
        busy = time_calls(calls, repeats=50)
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert busy.median_us < 1.5 * quiet + 2.0, (quiet, busy)
    assert not busy.extra.get("host_stalled"), busy.extra
