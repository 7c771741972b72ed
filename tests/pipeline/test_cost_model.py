"""The cost model's mechanism on small synthetic μGraphs: what a user of the ranking relies on
(more work never estimates faster; hiding latency and tensor cores help where the kernel does it)."""
from __future__ import annotations

import pytest

from mirage_lab.codegen import CodegenOptions
from mirage_lab.errors import MirageLabError
from mirage_lab.examples import rms_norm_linear_fused
from mirage_lab.pipeline.cost_model import H100, Estimate, estimate, with_constants
from mirage_lab.pipeline.variants import with_block_dim


def us(g, **opts) -> float:
    return estimate(g, CodegenOptions(**opts)).us


def test_more_dram_bytes_never_estimate_faster():
    # the same tiling over a longer K: each block streams more of W
    for opts in ({}, {"mma": True}):
        times = [us(rms_norm_linear_fused(16, k, 2048, grid=128, forloop_range=k // 256), **opts)
                 for k in (1024, 2048, 4096, 8192)]
        assert times == sorted(times), (opts, times)
        assert times[-1] > times[0]


def test_more_waves_never_estimate_faster():
    # blocks of the same tile; 128 blocks fit one wave of 132 SMs, 1024 need several
    times, waves = [], []
    for n in (2048, 4096, 8192, 16384):
        e = estimate(rms_norm_linear_fused(16, 1024, n, grid=n // 16, forloop_range=4), CodegenOptions())
        times.append(e.us)
        waves.append(e.waves)
    assert times == sorted(times) and waves == sorted(waves)
    assert waves[0] == 1 and waves[-1] > 1


def test_a_slower_dram_or_a_longer_round_trip_never_estimates_faster():
    g = rms_norm_linear_fused(16, 4096, 4096, grid=128, forloop_range=16)
    base = estimate(g, CodegenOptions(mma=True))
    for name in ("hbm_bytes_us", "sm_bytes_us"):
        assert estimate(g, CodegenOptions(mma=True), with_constants(**{name: getattr(H100, name) / 2})).us >= base.us
    assert estimate(g, CodegenOptions(mma=True), with_constants(dram_latency_us=H100.dram_latency_us * 2)).us >= base.us


def test_a_long_loop_pays_its_round_trips_and_two_deep_prefetch_hides_them():
    short = rms_norm_linear_fused(2, 4096, 6144, grid=192, forloop_range=16)
    long = rms_norm_linear_fused(2, 4096, 6144, grid=192, forloop_range=64)
    assert us(long, mma=True) > us(short, mma=True)
    plain = us(long, mma=True)
    deep = us(long, mma=True, pipeline_words=64, pipeline_depth=2)
    assert deep < plain
    assert estimate(long, CodegenOptions(mma=True)).latency_us > estimate(short, CodegenOptions(mma=True)).latency_us


def test_tensor_cores_estimate_faster_than_fma_for_a_16_row_stream():
    g = rms_norm_linear_fused(16, 4096, 4096, grid=128, forloop_range=16)
    assert us(g, mma=True) < us(g)


def test_fma_partial_sums_past_the_register_budget_cost_more_at_more_threads():
    # 16 x 8 partial sums a thread: within 255 registers at 128 threads, past 128 at 512 threads (spills)
    g = rms_norm_linear_fused(16, 1024, 1024, grid=32, forloop_range=4)
    small, large = with_block_dim(g, 128), with_block_dim(g, 512)
    assert us(large) > us(small)
    assert us(large) > estimate(large, CodegenOptions(), with_constants(spill_us=0.0)).us


def test_buffers_past_the_shared_memory_pool_cost_their_l2_round_trips():
    # a 32 x 512 staged tile (64 KB as float32) cannot sit in the 48 KB pool: the generator moves it to global
    # scratch, and its steps wait on L2; a 16 x 1024 / 32-block tiling fits and is unaffected
    spilled = rms_norm_linear_fused(32, 2048, 512, grid=16, forloop_range=4)
    fits = rms_norm_linear_fused(16, 1024, 1024, grid=32, forloop_range=2)
    no_l2_cost = with_constants(scratch_us=0.0)
    assert us(spilled) > estimate(spilled, CodegenOptions(), no_l2_cost).us
    assert us(fits) == estimate(fits, CodegenOptions(), no_l2_cost).us


def test_estimate_keeps_its_public_fields():
    e = estimate(rms_norm_linear_fused(4, 256, 256, grid=8, forloop_range=4), CodegenOptions())
    assert isinstance(e, Estimate)
    d = e.as_dict()
    for k in ("us", "memory_us", "compute_us", "launches", "sm_share"):
        assert k in d
    assert e.us > 0 and e.launches == 1 and 0 < e.sm_share <= 1
    assert Estimate(1.0, 1.0, 0.0, 1, 1.0).us == 1.0   # positional construction, as other code does


def test_bad_input_names_the_fix():
    with pytest.raises(MirageLabError, match="KernelGraph"):
        estimate("not a graph", CodegenOptions())
    with pytest.raises(MirageLabError, match="no constant named"):
        with_constants(warp_speed=9.0)


def test_the_constants_are_the_tuning_gpus(monkeypatch):
    # an H200 moves 3.9 TB/s in a device-to-device copy, an H100 3.0: the tuner estimates with its own GPU's
    # constants (a search worker, or a process without CUDA, with the H100's)
    from mirage_lab.pipeline.cost_model import H200, hardware

    assert hardware("NVIDIA H200") == H200 and hardware("NVIDIA H100 80GB HBM3") == H100
    assert hardware("Tesla T4") == H100 and hardware() == H100   # no CUDA initialised in this process
    g = rms_norm_linear_fused(16, 4096, 4096, grid=128, forloop_range=16)
    assert estimate(g, CodegenOptions(mma=True)) == estimate(g, CodegenOptions(mma=True), H100)
    assert estimate(g, CodegenOptions(mma=True), H200).memory_us < estimate(g, CodegenOptions(mma=True), H100).memory_us
    monkeypatch.setenv("MIRAGE_LAB_HBM_TBS", "2.5")
    assert hardware("NVIDIA H200").hbm_bytes_us == 2.5e6
    monkeypatch.setenv("MIRAGE_LAB_HBM_TBS", "fast")
    with pytest.raises(MirageLabError, match="MIRAGE_LAB_HBM_TBS must be a number of TB/s, got 'fast'"):
        hardware()


def test_split_spreads_a_narrow_grid_and_pays_for_the_combine() -> None:
    """80 tiles of a 168 MB weight: split over 8 blocks the grid covers every SM (the whole grid leaves 52 idle);
    a split the loop does not divide is costed as the whole kernel."""
    from mirage_lab.pipeline.cost_model import profile

    g = with_block_dim(rms_norm_linear_fused(8, 8192, 10240, grid=80, forloop_range=64), 128)
    whole, split = profile(g, CodegenOptions(mma=True))[0], profile(g, CodegenOptions(mma=True, split=8))[0]
    assert (whole.blocks, whole.iters, whole.combine_trips) == (80, 64, 0.0)
    assert (split.blocks, split.iters, split.combine_trips) == (640, 8, 2.0)
    assert split.dram_total > whole.dram_total      # the partial sums written and read back
    assert estimate(g, CodegenOptions(mma=True, split=8)).sm_share > estimate(g, CodegenOptions(mma=True)).sm_share
    small = rms_norm_linear_fused(4, 256, 256, grid=8, forloop_range=4)
    assert estimate(small, CodegenOptions(split=16)).us == estimate(small, CodegenOptions()).us
