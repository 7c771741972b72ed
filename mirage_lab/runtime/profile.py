"""Measuring compiled μGraphs and torch baselines the same way, in the same process.

Every contender is timed with CUDA events after a warm-up, many repeats, median with
p10/p90. Inputs are rotated over several copies (enough that the copies together exceed
twice the L2 cache) so each timed call reads its weights from HBM, not from the 50 MB L2.
Before each batch of timed calls the GPU is held by a short sleep kernel, so the host
queues the whole batch ahead and the events measure device time, not Python launch gaps; a
batch the host could not queue before the GPU woke is measured again (:func:`time_calls`).
``python_call_us`` measures the launch gaps separately (wall clock per call).

    >>> import mirage_lab as mi
    >>> k = mi.runtime.compile(fused_graph)                          # doctest: +SKIP
    >>> t = mi.runtime.profile.profile_kernel(k, [X, W])             # doctest: +SKIP
    >>> t["cuda_graph"].median_us                                    # doctest: +SKIP
    12.9
"""
from __future__ import annotations

import math
import statistics
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Sequence

import torch

from ..ir.kernel_graph import KernelGraph
from .kernel import CompiledKernel
from .torch_fn import to_torch_fn

COPY_BANDWIDTH_TBPS = 3.0  # measured device-to-device copy peak on the H100 (DESIGN.md)


@dataclass
class Timing:
    """One contender's latency distribution (microseconds)."""

    name: str
    mode: str                  # cuda_graph | eager | python_call
    median_us: float
    p10_us: float
    p90_us: float
    repeats: int
    copies: int = 1
    extra: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def nbytes(tensors: Sequence[torch.Tensor]) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def floor_us(graph: KernelGraph, *, bandwidth_tbps: float = COPY_BANDWIDTH_TBPS) -> float:
    """The memory floor: every input read once and every output written once, at copy bandwidth."""
    total = sum(t.nbytes() for t in graph.inputs) + sum(t.nbytes() for t in graph.outputs)
    return total / (bandwidth_tbps * 1e12) * 1e6


def measure_copy_tbps(nbytes_each: int = 1 << 30, repeats: int = 20) -> float:
    """Device-to-device copy bandwidth (TB/s, bytes read + written), median of ``repeats`` copies."""
    src = torch.empty(nbytes_each // 2, dtype=torch.float16, device="cuda").normal_()
    dst = torch.empty_like(src)
    samples = []
    for i in range(repeats + 3):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        dst.copy_(src)
        e.record()
        e.synchronize()
        if i >= 3:
            samples.append(2 * nbytes_each / (s.elapsed_time(e) * 1e-3) / 1e12)
    del src, dst
    return statistics.median(samples)


def rotation_copies(inputs: Sequence[torch.Tensor], *, max_copies: int = 16) -> int:
    """How many input copies make every timed call read from HBM (copies x bytes > 2 x L2)."""
    if not inputs or inputs[0].device.type != "cuda":
        return 1
    l2 = torch.cuda.get_device_properties(inputs[0].device).L2_cache_size
    b = max(1, nbytes(inputs))
    return int(min(max_copies, max(2, math.ceil(2 * l2 / b) + 1)))


def make_copies(inputs: Sequence[torch.Tensor], n: int) -> list[list[torch.Tensor]]:
    """``n`` sets of inputs: the originals and ``n - 1`` clones."""
    return [list(inputs)] + [[x.clone() for x in inputs] for _ in range(n - 1)]


def _summary(name: str, mode: str, samples: list[float], copies: int, **extra: Any) -> Timing:
    qs = statistics.quantiles(samples, n=10) if len(samples) >= 10 else [min(samples)] * 9
    return Timing(name, mode, statistics.median(samples), qs[0], qs[-1], len(samples), copies, dict(extra))


SLEEP_CYCLES_PER_CALL = 200_000    # ~0.1 ms of GPU sleep per queued call (1.98 GHz)
MAX_SLEEP_CYCLES = 400_000_000     # ~0.2 s: the longest sleep a batch is queued behind
MAX_STALLED_BATCHES = 40           # batches thrown away for a stalled host before one is kept (and flagged)


def time_calls(calls: Sequence[Callable[[], Any]], *, name: str = "", mode: str = "cuda_graph",
               warmup: int = 10, repeats: int = 200, batch: int = 50) -> Timing:
    """Device time per call with CUDA events; ``calls[i % len(calls)]`` runs the i-th repeat.

    Each batch is queued behind a sleep kernel, and kept only if the host queued all of it before
    the GPU woke: otherwise a host stall (a busy CPU, another thread holding the GIL) left the GPU
    idle between an event and its call, and the sample measured the stall. On the H200 two tuning
    samples read 448 and 367 µs for a 17 µs kernel that way, while torch.compile built in a thread
    of the tuner's process, and ruled out every variant. A stalled batch is thrown away, and the
    next one is half as long behind a sleep twice as long per call; after ``MAX_STALLED_BATCHES``
    stalled batches are kept, and ``extra["host_stalled"]`` says so.
    """
    n = len(calls)
    for i in range(warmup):
        calls[i % n]()
    torch.cuda.synchronize()
    samples: list[float] = []
    i = 0
    per_call, most = SLEEP_CYCLES_PER_CALL, batch
    stalled = 0
    kept_stalled = False
    while len(samples) < repeats:
        b = min(most, repeats - len(samples))
        ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(b)]
        torch.cuda._sleep(min(per_call * b, MAX_SLEEP_CYCLES))  # the host queues the batch ahead of the GPU
        awake = torch.cuda.Event()
        awake.record()
        for s, e in ev:
            s.record()
            calls[i % n]()
            e.record()
            i += 1
        ahead = not awake.query()   # the GPU still sleeps: every call was queued before it ran
        torch.cuda.synchronize()
        if not ahead and stalled < MAX_STALLED_BATCHES:
            stalled += 1
            per_call, most = 2 * per_call, max(1, most // 2)
            continue
        kept_stalled = kept_stalled or not ahead
        samples += [s.elapsed_time(e) * 1e3 for s, e in ev]
    extra: dict[str, Any] = {}
    if stalled:
        extra["stalled_batches"] = stalled
    if kept_stalled:
        extra["host_stalled"] = True
    return _summary(name, mode, samples, n, **extra)


def time_python(call: Callable[[], Any], *, name: str = "", mode: str = "python_call", iters: int = 200,
                warmup: int = 10) -> Timing:
    """Wall-clock microseconds per call from Python (launch overhead included), synced at the end."""
    for _ in range(warmup):
        call()
    torch.cuda.synchronize()
    samples = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(iters // 5):
            call()
        torch.cuda.synchronize()
        samples.append((time.perf_counter() - t0) / (iters // 5) * 1e6)
    return _summary(name, mode, samples, 1)


def _capture(fn: Callable[[], Any]) -> torch.cuda.CUDAGraph:
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    torch.cuda.synchronize()
    return g


def time_captured(check_inputs: Callable[[Sequence[torch.Tensor]], Sequence[torch.Tensor]],
                  capture: Callable[[Sequence[torch.Tensor]], Callable[[], Any]], inputs: Sequence[torch.Tensor], *,
                  name: str = "", repeats: int = 200) -> Timing:
    """Device time per CUDA-graph replay, inputs rotated over copies: how every tuning contender is timed.

    ``check_inputs(inputs)`` gives the tensors to copy (a kernel's validated inputs);
    ``capture(copy)`` captures one call on that copy and returns its replay. μGraph lowering
    variants and the program's own torch lowerings go through this one function, so they
    see the same inputs, the same rotation and the same repeats.
    """
    sets = make_copies(list(check_inputs(inputs)), rotation_copies(inputs))
    replays = [capture(s) for s in sets]
    return time_calls(replays, name=name, mode="cuda_graph", repeats=repeats)


def capture_fn(fn: Callable[..., Any], inputs: Sequence[torch.Tensor]) -> Callable[[], Any]:
    """``fn(*inputs)`` captured in a CUDA graph (after a warm-up on a side stream); returns its replay."""
    g = _capture(lambda: fn(*inputs))
    return g.replay


def time_eager(fn: Callable[..., Any], inputs: Sequence[torch.Tensor], *, name: str = "torch eager",
               repeats: int = 200) -> Timing:
    """Device time of eager ``fn(*inputs)`` launches, inputs rotated as in :func:`time_captured`."""
    sets = make_copies(list(inputs), rotation_copies(inputs))
    return time_calls([lambda s=s: fn(*s) for s in sets], name=name, mode="eager", repeats=repeats)


def profile_kernel(kernel: CompiledKernel, inputs: Sequence[torch.Tensor], *, name: str = "mirage_lab",
                   repeats: int = 200, copies: int | None = None) -> dict[str, Timing]:
    """Device time (CUDA-graph replay and eager launches) and Python call time of a compiled μGraph."""
    xs = kernel.check_inputs(inputs)
    n = copies or rotation_copies(xs)
    sets = make_copies(xs, n)
    graphs = [kernel.capture(s) for s in sets]
    out = {
        "cuda_graph": time_calls([g.replay for g in graphs], name=name, mode="cuda_graph", repeats=repeats),
        "eager": time_calls([lambda s=s: kernel.run_unchecked(s) for s in sets], name=name, mode="eager",
                            repeats=repeats),
        "python_call": time_python(lambda: kernel(inputs=xs), name=name),
        "python_call_graph": time_python(lambda: kernel(inputs=xs, graph=True), name=name, mode="python_call_graph"),
    }
    return out


def profile_torch(fn: Callable[..., Any], inputs: Sequence[torch.Tensor], *, name: str = "torch",
                  repeats: int = 200, copies: int | None = None, graph: bool = True,
                  eager: bool = True) -> dict[str, Timing]:
    """Device time of a torch function, eagerly and captured in a CUDA graph."""
    n = copies or rotation_copies(inputs)
    sets = make_copies(inputs, n)
    out: dict[str, Timing] = {}
    if eager:
        out["eager"] = time_calls([lambda s=s: fn(*s) for s in sets], name=name, mode="eager", repeats=repeats)
        out["python_call"] = time_python(lambda: fn(*inputs), name=name)
    if graph:
        graphs = [_capture(lambda s=s: fn(*s)) for s in sets]
        out["cuda_graph"] = time_calls([g.replay for g in graphs], name=name, mode="cuda_graph", repeats=repeats)
    return out


def profile_baselines(program: KernelGraph, inputs: Sequence[torch.Tensor], *, repeats: int = 200,
                      compile_mode: str | None = "default") -> dict[str, Timing]:
    """torch eager, torch under a CUDA graph and torch.compile for the program's plain torch function."""
    fn = to_torch_fn(program)
    res = profile_torch(fn, inputs, name="torch", repeats=repeats)
    out = {"torch_eager": res["eager"], "torch_cuda_graph": res["cuda_graph"], "torch_python_call": res["python_call"]}
    if compile_mode is not None:
        cfn = torch.compile(fn, mode=None if compile_mode == "default" else compile_mode)
        t0 = time.perf_counter()
        cfn(*inputs)
        torch.cuda.synchronize()
        secs = time.perf_counter() - t0
        res = profile_torch(cfn, inputs, name="torch.compile", repeats=repeats)
        out["torch_compile"] = res["eager"]
        out["torch_compile"].extra["compile_s"] = secs
        out["torch_compile_cuda_graph"] = res["cuda_graph"]
        out["torch_compile_python_call"] = res["python_call"]
    return out


def relative_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    """‖out − ref‖ / ‖ref‖ in float64 (NaN anywhere gives NaN)."""
    o, r = out.double(), ref.double()
    if torch.isnan(o).any():
        return float("nan")
    return float((o - r).norm() / r.norm())
