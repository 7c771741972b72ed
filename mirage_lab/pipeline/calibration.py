"""A calibration pair timed on every GPU worker before tuning: can timings from these GPUs be compared?

Two fixed kernels through torch, timed with CUDA events (median of ``repeats``): a device-to-device
copy (memory bound) and a small fp16 matmul (tensor-core bound). Same-model GPUs should agree within
a few percent; one that does not (thermal throttling, a lower clock or power cap, a busy neighbour,
a card in a slower slot) makes its variants' timings incomparable with the others', so
:func:`calibration_outliers` names every worker that differs from the median by more than
:data:`CALIBRATION_TOLERANCE`, and the cluster tuner warns.

    >>> table = {"w0": {"copy_us": 100.0, "matmul_us": 50.0}, "w1": {"copy_us": 100.5, "matmul_us": 50.0},
    ...          "w2": {"copy_us": 108.0, "matmul_us": 50.1}}
    >>> calibration_outliers(table)
    ['w2: copy_us 108.00 µs is 7.5 % from the median 100.50 µs']
"""
from __future__ import annotations

import statistics
from typing import Any, Mapping

CALIBRATION_TOLERANCE = 0.03   # the bar: one GPU more than 3 % from the median is flagged
COPY_BYTES = 256 << 20          # larger than any L2 (50 MB on an H100): a copy from HBM to HBM
MATMUL_N = 2048                 # fp16 2048^3: about 17 GFLOP, tens of µs on an H100's tensor cores


def calibrate_gpu(repeats: int = 50) -> dict[str, float] | None:
    """Median µs of the copy and of the matmul on this process's current CUDA device; ``None`` without a GPU.

        >>> calibrate_gpu()                                  # doctest: +SKIP
        {'copy_us': 1052.3, 'matmul_us': 31.8, 'device': 'NVIDIA H100 80GB HBM3'}
    """
    import torch

    from ..runtime.paths import simulator_active

    if simulator_active() or not torch.cuda.is_available():
        return None
    src = torch.empty(COPY_BYTES // 2, dtype=torch.float16, device="cuda").normal_()
    dst = torch.empty_like(src)
    a = torch.randn(MATMUL_N, MATMUL_N, dtype=torch.float16, device="cuda")
    b = torch.randn(MATMUL_N, MATMUL_N, dtype=torch.float16, device="cuda")
    out = {"copy_us": _median_us(lambda: dst.copy_(src), repeats),
           "matmul_us": _median_us(lambda: torch.mm(a, b), repeats)}
    return {**out, "device": torch.cuda.get_device_name()}  # type: ignore[dict-item]


def _median_us(fn: Any, repeats: int, warm_s: float = 0.2, batch: int = 10) -> float:
    """Median µs per launch of ``fn`` over ``repeats`` batches of ``batch`` back-to-back launches.

    The batch is replayed from a CUDA graph where it can be captured: launched one by one from Python, a
    28 µs matmul was timed 27.7-31.1 µs on four H200s of one host whose CPUs were compiling (a starved
    launcher leaves the GPU idle between launches), and the 3 % check warned about GPUs that did not
    differ. The GPU is first kept busy for ``warm_s`` seconds: its clocks ramp up over tens of ms, and a
    card that was idle (a worker restarted mid-run) otherwise times slower than one that was busy.
    """
    import time

    import torch

    run = _graph_batch(fn, batch) or (lambda: [fn() for _ in range(batch)])
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < warm_s:
        run()
        torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / batch)
    return statistics.median(times)


def _graph_batch(fn: Any, batch: int) -> Any:
    """``batch`` launches of ``fn`` captured in one CUDA graph; its replay, or ``None`` where capture fails."""
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):   # cuBLAS picks its kernel and workspace outside the capture
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    try:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(batch):
                fn()
    except Exception:  # noqa: BLE001 - launched one by one then, as before
        torch.cuda.synchronize()
        return None
    return graph.replay


def calibration_outliers(table: Mapping[str, Mapping[str, Any]],
                         tolerance: float = CALIBRATION_TOLERANCE) -> list[str]:
    """One line per (worker, kernel) whose time is more than ``tolerance`` from that kernel's median over workers.

    ``table``: worker -> its :func:`calibrate_gpu` result (``None`` entries, workers without a GPU,
    are left out). With fewer than two workers nothing can differ.
    """
    rows = {w: t for w, t in table.items() if t}
    out = []
    kernels = sorted({k for t in rows.values() for k, v in t.items() if k.endswith("_us")})
    for k in kernels:
        vals = {w: float(t[k]) for w, t in rows.items() if k in t}
        if len(vals) < 2:
            continue
        med = statistics.median(vals.values())
        for w, v in sorted(vals.items()):
            if med > 0 and abs(v - med) / med > tolerance:
                out.append(f"{w}: {k} {v:.2f} µs is {abs(v - med) / med * 100:.1f} % from the median {med:.2f} µs")
    return out


__all__ = ["calibrate_gpu", "calibration_outliers", "CALIBRATION_TOLERANCE"]
