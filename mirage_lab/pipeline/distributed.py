"""Tuning spread over a Dask cluster: GPU workers pull small units of variants; the one-GPU winner rule picks.

Every worker that declares the resource ``GPU`` (one worker per GPU: ``dask worker ...
--nthreads 8 --resources GPU=1`` with ``CUDA_VISIBLE_DEVICES`` set to its card, or
:func:`local_gpu_cluster` on one machine) first times a calibration pair (:mod:`.calibration`),
builds the measuring inputs and races the program's own lowerings; then it takes units of the
planned variants as it finishes the last (:mod:`.scheduling`): each compiled on the cluster's
``CPU`` workers or, ahead of its turn, in a pool of its host's cores (a compile task on one of
the GPU worker's other threads: the ``GPU`` resource keeps one GPU task at a time), checked and
timed on its GPU. A worker lost
mid-run gives its units to another, and the report's :class:`ClusterRun` says which moved.
Results come back as JSON (:mod:`.codec`) and are filed by plan position; the caller applies the
one-process stopping rule over all of them and the one-process winner rule. Timings are
comparable only on one GPU model, so a cluster of mixed models is refused. The result goes to
the caller's cache like any other (``docs/scaling.md``: one cache for a team).

    >>> from dask.distributed import Client                          # doctest: +SKIP
    >>> best = graph.superoptimize(cluster=Client("tcp://gpu-host:8786"))   # doctest: +SKIP
"""
from __future__ import annotations

import functools
import json
import os
import threading
import time
import uuid
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from ..cpus import usable_cpus
from ..errors import GpuFaultError, MirageLabError
from ..ir.kernel_graph import KernelGraph
from .autotune import TuneFinished, TuneReport, TuneStarted, VariantDone, VariantResult, plan_variants
from .calibration import calibrate_gpu, calibration_outliers
from .codec import decode, dumps, encode
from .contenders import PROGRAM_LOWERINGS
from .measured import fault_summary, gpu_fault
from .scheduling import TAKEN, Move, UnitScheduler, make_units, unit_size
from .stopping import STOP_MARGIN

RESOURCE = "GPU"      # the worker resource that marks one GPU
GPU_WORKER_THREADS = 8  # a GPU worker's threads: its GPU tasks one at a time (the resource), compiles on the others
CPU_RESOURCE = "CPU"  # the worker resource that marks a compile worker
_CLIENTS: dict[str, Any] = {}


def client_for(cluster: Any) -> Any:
    """A ``dask.distributed.Client`` for ``cluster``: a Client as it is, a scheduler address, or a cluster object.

    A Client made here from an address is kept for the next call to the same address.
    """
    try:
        from dask.distributed import Client
    except ImportError as e:  # pragma: no cover - dask[distributed] is a dependency
        raise MirageLabError("tuning on a cluster needs dask[distributed]: pip install 'dask[distributed]'") from e
    if isinstance(cluster, Client):
        return cluster
    address = cluster if isinstance(cluster, str) else getattr(cluster, "scheduler_address", None)
    if isinstance(address, str):
        c = _CLIENTS.get(address)
        if c is None or c.status in ("closed", "closing"):
            c = _CLIENTS[address] = Client(address)
        return c
    raise MirageLabError(f"cluster must be a dask Client, a scheduler address or a cluster, got {type(cluster).__name__}")


def _workers_info(client: Any) -> dict[str, Any]:
    """Every worker the scheduler knows now, asked of it directly.

    Not ``client.scheduler_info()``: it returns the client's cached identity, which the client's own
    periodic refresh (``n_workers=0``) may replace with one listing no worker between the fetch and
    the read; under load that made every worker look gone.
    """
    return client.sync(client.scheduler.identity, n_workers=-1)["workers"]


def gpu_workers(client: Any) -> list[str]:
    """Addresses of the workers that declare the ``GPU`` resource."""
    info = _workers_info(client)
    return sorted(a for a, w in info.items() if w.get("resources", {}).get(RESOURCE, 0) >= 1)


def cluster_device(client: Any) -> dict[str, Any]:
    """The GPU the cluster's timings come from (:func:`~.cache.device_info` on its GPU workers); refuses mixed models."""
    workers = gpu_workers(client)
    if not workers:
        raise MirageLabError(f"the cluster has no worker with the resource {RESOURCE!r}: start one per GPU with "
                             f"`dask worker <scheduler> --nthreads 8 --resources {RESOURCE}=1`")
    infos = client.run(_device_json, workers=workers)
    kinds = {v for v in infos.values()}
    if len(kinds) > 1:
        raise MirageLabError("the cluster's GPU workers differ (" + "; ".join(sorted(kinds)) + "): timings on "
                             "different GPUs cannot be compared; give superoptimize a cluster of one GPU model")
    return json.loads(kinds.pop())


def _device_json() -> str:
    from .cache import device_info

    return json.dumps(device_info(), sort_keys=True)


# ----------------------------------------------------------------------------- what the report says of the run
@dataclass
class WorkerRecord:
    """One GPU worker of the run: its GPU, its calibration times, what it measured, whether it was lost (how busy
    its GPU was: :func:`gpu_timeline_summary` of ``ClusterRun.timeline``)."""

    address: str
    device: str = ""
    calibration: dict[str, Any] | None = None
    units: int = 0
    variants: int = 0
    lost: bool = False


@dataclass
class ClusterRun:
    """How a tuning was spread over a cluster (``TuneReport.cluster``).

    ``workers``: every GPU worker that took part, with its calibration times (:mod:`.calibration`);
    ``moved``: the units a lost worker gave back, or an idle worker took from a busy one (``Move.reason``), which
    variants, from which worker to which;
    ``calibration_warnings``: GPUs more than 3 % from the median on a calibration kernel;
    ``reference``: the worker whose program lowerings and baselines the report carries;
    ``timeline``: each GPU task (``kind`` "start" or "unit") with its worker and wall-clock ``span``, and a unit's
    ``compile_span`` (its compile task, on the worker or a ``CPU`` worker): :func:`gpu_timeline_summary` says
    where each GPU waited; ``compiler_warmup``: per worker, its torch.compile warm-up (:func:`_warm_compiler_task`:
    ``span``, seconds ``s`` or ``error``, and ``ran``: false where the process was already warm).
    """

    workers: list[WorkerRecord]
    moved: list[Move]
    unit_variants: int
    calibration_warnings: list[str]
    compiled_on: str
    reference: str
    timeline: list[dict[str, Any]] = field(default_factory=list)
    compiler_warmup: dict[str, Any] = field(default_factory=dict)

    def rows(self) -> list[dict[str, Any]]:
        """One flat record per worker (JSON-ready): the calibration table."""
        return [{"worker": w.address, "device": w.device, "units": w.units, "variants": w.variants, "lost": w.lost,
                 **{k: round(v, 2) for k, v in (w.calibration or {}).items() if k.endswith("_us")}}
                for w in self.workers]


def gpu_timeline_summary(timeline: Sequence[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per GPU worker, over the GPU tasks of one or more runs (``ClusterRun.timeline`` entries, e.g. of runs
    tuned at once): ``window_s`` from its first task's start to its last one's end, ``busy_s`` in GPU tasks,
    ``idle_s`` between them, and ``waiting_compile_s``, the part of that idle time a unit's own compile was
    still running (the GPU was free, the next unit not yet compiled). Spans are wall-clock seconds of the
    workers' hosts.

        >>> t = [{"kind": "start", "worker": "a", "span": [0, 1]},
        ...      {"kind": "unit", "worker": "a", "span": [3, 4], "compile_span": [1, 3]}]
        >>> gpu_timeline_summary(t)["a"]
        {'window_s': 4.0, 'busy_s': 2.0, 'idle_s': 2.0, 'waiting_compile_s': 2.0}
    """
    out: dict[str, dict[str, float]] = {}
    by_worker: dict[str, list[dict[str, Any]]] = {}
    for e in timeline:
        if e.get("span"):
            by_worker.setdefault(e["worker"], []).append(e)
    for w, es in by_worker.items():
        es.sort(key=lambda e: e["span"][0])
        busy = idle = waiting = 0.0
        free_at = es[0]["span"][0]
        for e in es:
            a, b = e["span"]
            busy += b - a
            gap = max(0.0, a - free_at)
            idle += gap
            c = e.get("compile_span")
            if gap and c:   # the part of the gap before this unit's compile ended
                waiting += max(0.0, min(c[1], a) - free_at)
            free_at = max(free_at, b)
        out[w] = {"window_s": round(float(free_at - es[0]["span"][0]), 3), "busy_s": round(busy, 3), "idle_s": round(idle, 3),
                  "waiting_compile_s": round(waiting, 3)}
    return out


# ----------------------------------------------------------------------------- on a GPU worker
_SESSIONS: dict[str, "_WorkerSession"] = {}   # run id -> this worker process's state for that run


PROFILER_CALLBACKS = ("profile", "profile-cycle")   # dask's statistical profiler, in Worker.periodic_callbacks


def stop_worker_profiler(timeout_s: float = 10.0) -> bool:
    """Stop dask's statistical profiler in the worker this task runs in; ``False`` outside a worker.

    Every 10 ms the profiler calls ``sys._current_frames()`` from the worker's event loop. On
    CPython 3.11 before 3.11.12 that call holds the runtime's thread-list lock while it allocates a
    frame object per thread; an allocation can start a garbage collection whose Python callbacks
    (dask's own gc diagnosis) give up the GIL, and a thread being started or ended then takes the GIL
    and waits for that lock: the whole process hangs (CPython gh-106883, gh-116969; dask/distributed
    #8616, whose fix turned off only the event-loop watch, not this one). The CUDA simulator starts and
    ends one Python thread per simulated CUDA thread (512 per block), which made the hang likely; on a
    GPU the profiler's sampling only adds noise to the timings, and tuning does not read the profiles.
    Returns once the loop has stopped the callbacks, so no sample is taken after it.
    """
    import threading

    try:
        from distributed import get_worker

        worker = get_worker()
    except (ImportError, ValueError):   # not in a Dask worker (the tests' in-process use)
        return False
    callbacks = [pc for name, pc in worker.periodic_callbacks.items() if name in PROFILER_CALLBACKS]
    if not any(pc.is_running() for pc in callbacks):
        return True
    done = threading.Event()

    def stop() -> None:   # PeriodicCallback is not thread-safe: stopped on the loop that runs it
        for pc in callbacks:
            pc.stop()
        done.set()

    worker.loop.add_callback(stop)
    if not done.wait(timeout_s):
        raise MirageLabError(f"the Dask worker {worker.address} did not stop its profiler within {timeout_s:g} s")
    return True


def _worker_address() -> str:
    try:
        from distributed import get_worker

        return get_worker().address
    except ValueError:   # not in a Dask worker (the tests' in-process use)
        return "local"


class GpuExclusiveTimer:
    """A timer whose timings hold this GPU's lock: workers that share one GPU time one at a time.

    Two processes timing kernels on one GPU at once each see the other's kernels in their CUDA
    events, so their timings (and the winner) would depend on the overlap. Compiles and checks still
    run in parallel; only the timed replays are serialised. The lock is a file named by the card's
    UUID in the temporary directory, so it works across processes of one host (``filelock``).
    """

    def __init__(self, timer: Any, lock_path: str) -> None:
        from filelock import FileLock

        self.timer, self.lock = timer, FileLock(lock_path)

    def exclusive(self, fn: Callable[[], Any]) -> Any:
        """``fn()`` under this GPU's lock (the calibration: a neighbour's timings would skew it)."""
        with self.lock:
            return fn()

    def graph(self, *args: Any, **kw: Any) -> Any:
        with self.lock:
            return self.timer.graph(*args, **kw)

    def eager(self, *args: Any, **kw: Any) -> Any:
        with self.lock:
            return self.timer.eager(*args, **kw)


def gpu_lock_path() -> str:
    """The lock file of this process's current CUDA device (its UUID where torch reports one)."""
    import tempfile

    import torch

    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    card = str(getattr(props, "uuid", "") or f"{props.name}-{getattr(props, 'pci_bus_id', torch.cuda.current_device())}")
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in card)
    return os.path.join(tempfile.gettempdir(), f"mirage_lab-gpu-{safe}.lock")


_COMPILER_WARM: dict[str, Any] = {}   # this worker process's warm-up of torch.compile: {"s": seconds} or {"error": ...}
_COMPILER_LOCK = threading.Lock()


def _warm_compiler_task() -> str:
    """torch.compile's first build in this worker process, on a tiny function, on a thread beside the GPU tasks.

    A process's first build is the long one (dynamo, inductor and Triton starting up): 10-29 s on the H200 hosts,
    the next ones 0.6-2 s (2026-11-29 (g), call G). Built by a run's program warm-up, it ran beside that worker's
    GPU tasks and one of them took 20 s (2 H200s, 2026-11-29 (h), call G). Sent as a run starts, it runs while the
    first units compile (their GPU tasks wait on those anyway). Once per process; a second call, or one made while
    the first still runs, returns at once. Best effort: an error is reported, never raised."""
    from ..runtime.paths import simulator_active

    t0 = time.time()
    if _COMPILER_WARM or not _COMPILER_LOCK.acquire(blocking=False):
        return dumps({"worker": _worker_address(), "span": [t0, time.time()], **_COMPILER_WARM, "ran": False})
    try:
        if not _COMPILER_WARM:
            try:
                import torch

                if not simulator_active() and torch.cuda.is_available():
                    f = torch.compile(lambda x: torch.nn.functional.silu(x) * 2.0)
                    f(torch.ones(256, device="cuda", dtype=torch.float16))
                    torch.cuda.synchronize()
                _COMPILER_WARM["s"] = round(time.time() - t0, 3)
            except Exception as e:  # noqa: BLE001 - the run's own build reports what is wrong with torch.compile
                _COMPILER_WARM["error"] = f"{type(e).__name__}: {str(e)[:300]}"
    finally:
        _COMPILER_LOCK.release()
    return dumps({"worker": _worker_address(), "span": [t0, time.time()], **_COMPILER_WARM, "ran": True})


def _compile_warmup(program: KernelGraph, lowerings: Sequence[str], sim: bool) -> Any:
    """torch.compile of the program built in a background thread, when this worker races it (on a GPU).

    Runs tuned at once build theirs in threads of one process. A process's first build is the long one: with 8
    programs on 2 workers of one H200 each worker's first took 24 and 9.7 s, the six others 0.6-1.7 s (2026-11-29
    (g), call G), so they stay here rather than go to child processes that would each start cold."""
    if sim or "torch.compile" not in lowerings:
        return None
    from .contenders import ProgramWarmup

    return ProgramWarmup(program, "torch.compile")


class _WorkerSession:
    """One run's state on one GPU worker: calibration, measuring inputs, the program's lowerings, compiled kernels.

    Made by the worker's first task of the run, so a worker that joins late (or a restarted one)
    builds its own; kept until :func:`_drop_task`.
    """

    def __init__(self, spec: dict[str, Any], lowerings: Sequence[str]) -> None:
        import torch

        from ..ir.serialize import from_json
        from ..runtime.paths import simulator_active
        from .autotune import _Tuning
        from .contenders import default_timer
        from .inputs import measuring_inputs

        stop_worker_profiler()   # before any thread is started here (see its docstring: a hang otherwise)
        self.sim = simulator_active()
        if not self.sim and not torch.cuda.is_available():
            raise MirageLabError(f"the GPU worker {_worker_address()} sees no CUDA GPU: start it with "
                                 "CUDA_VISIBLE_DEVICES=<its card> on a GPU host")
        self.spec = spec
        timer = spec["timer"] if spec["timer"] is not None else default_timer()
        # one lock per card, shared with the other processes timing on it: calibration and timed replays
        exclusive = None if self.sim else GpuExclusiveTimer(timer, gpu_lock_path())
        if spec["calibrate"] is None:
            self.calibration = None
        elif exclusive is None:
            self.calibration = spec["calibrate"]()
        else:
            self.calibration = exclusive.exclusive(spec["calibrate"])
        program = from_json(spec["program"])
        inputs = spec["inputs"]
        if inputs is not None and not self.sim:
            inputs = [x.to("cuda") for x in inputs]
        if timer is not None and exclusive is not None:
            timer = exclusive
        mi = measuring_inputs(program, device="cpu" if self.sim else "cuda", inputs=inputs)
        # no stopping rule here: the caller decides what is still worth measuring, over every worker's results
        self.tn = _Tuning(program, [], mi, timer, spec["cache_dir"], spec["repeats"], None, lambda ev: None,
                          time.monotonic())
        # torch.compile's compile (10-30 s of CPU) runs in a thread while this worker measures variants: raced
        # before them, each run's reference worker spent its one task thread compiling, and runs tuned at
        # once queued their compiles there (4 H200s, 4 programs at once: 1.17x on 2 GPUs, 1.70x on 4)
        self.tn.race_program(lowerings, warm=_compile_warmup(program, lowerings, self.sim), block=False)
        self.ready = time.time()   # the budget counts from here
        self.slot: dict[int, int] = {}    # plan index -> position in self.tn.results
        self.device = "CUDA simulator" if self.sim else torch.cuda.get_device_name()

    def info(self) -> dict[str, Any]:
        return {"worker": _worker_address(), "device": self.device, "calibration": self.calibration,
                "programs": self.tn.programs, "timed": self.tn.timer is not None, "policy": self.tn.mi.policy}

    def measure(self, items: list[tuple[int, Any]], compiled: dict[Any, Any], deadline: float) -> list[tuple[int, Any]]:
        """Check and time each variant, compiled by its unit's compile task (``compiled``), until ``deadline``."""
        for gi, r in items:
            self.tn.results.append(r)
            self.slot[gi] = len(self.tn.results) - 1
        self.tn.race_ready(block=False)   # torch.compile, once its compile in the background has ended
        stream = ((gi, *compiled[gi]) for gi, _ in items)
        for gi, secs, err in stream:
            if time.time() > deadline:   # the budget ran out: the rest stay untried (compile_s None)
                break
            self.tn.finish(self.slot[gi], secs, err)
        return [(gi, self.tn.results[self.slot[gi]]) for gi, _ in items]

    def final(self, indices: list[int], final_repeats: int, reference: bool, baselines: str | bool) -> dict[str, Any]:
        """The finalists this worker measured timed again; on the reference worker also the program and torch eager."""
        from .autotune import _time
        from .contenders import time_program

        tn = self.tn
        for gi in indices:
            k = tn.kernels.get(self.slot.get(gi, -1))
            if k is not None:
                _time(tn.results[self.slot[gi]], k, tn.mi, final_repeats, tn.timer)
        out: dict[str, Any] = {"results": [(gi, tn.results[self.slot[gi]]) for gi in indices if gi in self.slot]}
        if reference:
            from .contenders import program_lowerings_for

            tn.race_ready(block=True)   # wait for torch.compile's compile, if still running
            have = {p.lowering for p in tn.programs}
            wanted = program_lowerings_for(tn.program, self.spec["program_lowerings"], tn.timer is not None)
            missing = [x for x in wanted if x not in have]
            if missing:   # the designated reference was lost: this worker stands in and races what it lacks
                tn.race_program(missing)
            for p in tn.programs:
                if p.ok and p.timings:
                    time_program(p, tn.timer, tn.mi, final_repeats)
            out["eager"], out["baselines"] = tn.baselines(baselines, final_repeats)
            out["programs"] = tn.programs
        return out

    def close(self) -> None:
        """Nothing to free: the compile pool is the worker's (:func:`_compile_pool`), kept for its next runs."""


_POOL: tuple[int, Any] | None = None   # (size, pool): one per worker process, shared by its runs
_POOL_LOCK = threading.Lock()


def _compile_pool(n: int) -> Any:
    """This worker process's pool of ``n`` compile processes, made once and shared by every run it serves.

    One pool per run put (programs tuned at once) × (cores / GPUs) processes on one worker: 8 programs
    at once on a 64-core, 1-GPU cluster made 512, and the worker then outlived the nanny's 5 s to close."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None or _POOL[0] != n:
            if _POOL is not None:
                _POOL[1].terminate()
            from ..search.lifetime import spawn_pool

            _POOL = (n, spawn_pool(n))
        return _POOL[1]


def _session(run_id: str, spec: dict[str, Any], reference: bool = False) -> _WorkerSession:
    s = _SESSIONS.get(run_id)
    if s is None:
        s = _SESSIONS[run_id] = _WorkerSession(spec, spec["program_lowerings" if reference else "plain_lowerings"])
    return s


FAULT_EXIT_S = 1.0   # after a GPU fault, the worker process exits this long after its task's error went back


def _gpu_task(fn: Callable[..., str]) -> Callable[..., str]:
    """A task that uses the worker's GPU: after a fault that kills the CUDA context (:func:`~.measured.gpu_fault`),
    the worker process exits once its error is sent, and its nanny starts a fresh one, with a working context,
    for this run and the next (a context never recovers in its process)."""
    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> str:
        try:
            return fn(*args, **kwargs)
        except Exception as e:
            if gpu_fault(e):
                t = threading.Timer(FAULT_EXIT_S, os._exit, (75,))
                t.daemon = True
                t.start()
            raise

    return run


@_gpu_task
def _start_task(run_id: str, spec: dict[str, Any], reference: bool) -> str:
    """A GPU worker's first task of a run: calibrate, build the measuring inputs, race the program's lowerings.

    Only the reference worker races every lowering (torch.compile's compile takes tens of seconds of
    CPU); the others race the plain torch lowering, whose error sets the accuracy bar (as on one GPU).
    """
    w0 = time.time()
    info = _session(run_id, spec, reference).info()
    return dumps(encode({**info, "span": [w0, time.time()]}))


@_gpu_task
def _measure_task(run_id: str, spec: dict[str, Any], items_json: str, compiled: dict[Any, Any]) -> str:
    """One unit on a GPU worker: its variants, compiled by its compile task, checked and timed; the results as JSON."""
    w0 = time.time()
    s = _session(run_id, spec)
    out = s.measure(decode(json.loads(items_json)), compiled, s.ready + spec["tune_seconds"])
    # the program's lowerings raced so far (torch.compile joins once built): the stop rule's bar
    return dumps(encode({"worker": _worker_address(), "results": out, "programs": s.tn.programs,
                         "span": [w0, time.time()],
                         "compile_span": compiled.get("span")}))


def _compile_task(items_json: str, cache_dir: str | None) -> dict[Any, Any]:
    """On a ``CPU`` worker (of a GPU host that shares the kernel cache): compile and launch a unit's variants once.

    ``{index: (seconds, error)}``, and ``"span"``: the task's wall-clock start and end (the report's timeline)."""
    from ..runtime.kernel import compile_and_launch

    w0 = time.time()
    stop_worker_profiler()   # numba compiling in this thread made the profiler's frame walk raise (llvmlite)
    out: dict[Any, Any] = {}
    for gi, r in decode(json.loads(items_json)):
        _, secs, err = compile_and_launch((gi, r.variant.graph.to_json(), cache_dir, r.variant.options.astuple()))
        out[gi] = (secs, err)
    out["span"] = [w0, time.time()]
    return out


def _host_compile_task(items_json: str, cache_dir: str | None, compile_workers: int | None,
                       gpus_per_host: int) -> dict[Any, Any]:
    """On a GPU worker, beside its GPU task: a unit's variants compiled in parallel in the worker's pool of processes.

    Sent when the unit is assigned, so it compiles while the GPU measures the units before it. Compiled
    inside the measure task instead, a unit waited for its own compiles with the GPU idle, and only its
    few variants compiled at once: units shrink to spread a short plan over more GPUs (``unit_size``), so
    2 H200s measured 8 programs' first 8 variants no faster than one (2026-11-29 (g))."""
    from ..runtime.paths import simulator_active

    w0 = time.time()
    stop_worker_profiler()
    done = _compile_on_host(decode(json.loads(items_json)), cache_dir, compile_workers, gpus_per_host,
                            simulator_active())
    out: dict[Any, Any] = {gi: (secs, err) for gi, secs, err in done}
    out["span"] = [w0, time.time()]   # as _compile_task's
    return out


def _compile_on_host(items: list[tuple[int, Any]], cache_dir: str | None, compile_workers: int | None,
                     gpus_per_host: int, sim: bool) -> Any:
    """``(index, seconds, error)`` as each of a unit's variants compiles, in this worker process's pool
    (``compile_workers`` processes, default this host's cores / its GPU workers), or here."""
    import multiprocessing as mp

    from ..runtime.kernel import compile_and_launch

    if sim:   # the simulator compiles as it checks (as the one-process tuner does there)
        return ((gi, 0.0, None) for gi, _ in items)
    args = [(gi, r.variant.graph.to_json(), cache_dir, r.variant.options.astuple()) for gi, r in items]
    if len(items) == 1 or mp.current_process().daemon:
        # one variant gains nothing from a pool; a daemonic worker (dask's default) may not start processes
        return (compile_and_launch(a) for a in args)
    n = compile_workers or max(1, usable_cpus() // max(1, gpus_per_host))
    return _compile_pool(n).imap_unordered(compile_and_launch, args)


@_gpu_task
def _final_task(run_id: str, indices: list[int], final_repeats: int, reference: bool, baselines: str | bool) -> str:
    s = _SESSIONS[run_id]
    return dumps(encode(s.final(indices, final_repeats, reference, baselines)))


def _drop_task(run_id: str) -> None:
    s = _SESSIONS.pop(run_id, None)
    if s is not None:
        s.close()


# ----------------------------------------------------------------------------- the caller's side
def cpu_workers(client: Any) -> list[str]:
    """Addresses of the workers that declare the ``CPU`` resource (compile workers)."""
    info = _workers_info(client)
    return sorted(a for a, w in info.items() if w.get("resources", {}).get(CPU_RESOURCE, 0) >= 1)


def still_possible(results: Sequence[VariantResult], program_us: float, stop_margin: float | None) -> set[int]:
    """Plan indices not yet tried that the calibrated cost model still rates as possible winners (:mod:`.stopping`).

    The same rule as the one-process autotuner, over every worker's results: ``program_us`` is the
    fastest program lowering measured; ``stop_margin=None`` keeps every untried variant.
    """
    from .stopping import KIND_SAFETY, lowering_kind, possible_winners, rule_items

    pending = [i for i, r in enumerate(results) if r.compile_s is None]
    if stop_margin is None:
        return set(pending)
    best = min([r.median_us for r in results if r.ok and r.timings] + [program_us])
    return set(possible_winners(rule_items(results), best_us=best, margin=stop_margin, pending=pending,
                                kind=lowering_kind, safety=KIND_SAFETY))


def first_correct_settled(results: Sequence[VariantResult]) -> bool:
    """Untimed (simulator) runs: a correct variant is known and every variant before it in plan order was tried,
    so the one-process rule (the first correct variant in cost-model order) has its answer."""
    for r in results:
        if r.compile_s is None:
            return False
        if r.ok:
            return True
    return False


def best_variant(results: Sequence[VariantResult], timed: bool) -> VariantResult | None:
    """The autotuner's rule: the fastest correct timed variant (ties: the lower estimate, then plan order)."""
    ok = [r for r in results if r.ok and (not timed or r.timings)]
    return min(ok, key=lambda r: (r.median_us, r.estimate.us)) if ok else None


WORKER_WAIT_S = 30.0   # how long a cluster left without GPU workers is given for one to join (or restart)
# Client side: how many runs in flight have each GPU worker as their reference (the worker that compiles and
# times the program's own lowerings, torch.compile's 10-20 s included). Runs tuned at once (several programs of
# a model) spread their references over the workers instead of queueing them all on the first.
_REFERENCES: dict[str, int] = {}
_REFERENCES_LOCK = threading.Lock()


def _take_reference(live: Sequence[str]) -> str:
    """The live worker that is the reference of the fewest runs in flight (the first on a tie); counted."""
    with _REFERENCES_LOCK:
        w = min(live, key=lambda x: _REFERENCES.get(x, 0))
        _REFERENCES[w] = _REFERENCES.get(w, 0) + 1
        return w


def _release_reference(w: str | None) -> None:
    with _REFERENCES_LOCK:
        if w is not None and _REFERENCES.get(w, 0) > 0:
            _REFERENCES[w] -= 1


MAX_MOVES = 3   # a unit that has lost this many workers is the cause, not their victim: it is given up
MAX_GPU_FAULTS = 2 * MAX_MOVES   # GPU faults (each costs a worker restart) after which the run stops


def autotune_on_cluster(program: KernelGraph, candidates: Sequence[KernelGraph], cluster: Any, *,
                        tune_seconds: float = 60.0, workers: int | None = None, inputs: Sequence[Any] | None = None,
                        baselines: str | bool = "eager", on_event: Callable[[Any], None] | None = None,
                        timer: Any = None, calibrate: Callable[[], dict[str, Any] | None] | None = calibrate_gpu,
                        unit_variants: int = 4, depth: int = 2, max_variants: int | None = None,
                        repeats: int = 100, final_repeats: int = 300, finalists: int = 3,
                        stop_margin: float | None = STOP_MARGIN,
                        program_lowerings: Sequence[str] = PROGRAM_LOWERINGS,
                        cache_dir: str | os.PathLike | None = None, poll_s: float = 0.2) -> TuneReport:
    """:func:`~.autotune.autotune` spread over the cluster's GPU workers in small units; one report.

    The planned variants are cut into units of ``unit_variants``; each GPU worker holds up to
    ``depth`` units and asks for more as it finishes (:mod:`.scheduling`), so a faster GPU
    measures more. A worker that leaves gives its units back to the others, and
    ``report.cluster.moved`` says which. Before each unit is sent, variants the cost model no
    longer rates as possible winners (over every worker's results) are dropped, as the
    one-process tuner does; the finalists are timed again on the worker that holds them, and the
    winner is chosen by the autotuner's rule. Every GPU worker first times a calibration pair
    (``calibrate``; ``None`` skips it): a GPU more than 3 % from the median is warned about.

    Compiles run on the cluster's ``CPU`` workers where it has some (they must share the GPU
    hosts' kernel cache), else in a pool of ``workers`` processes on each GPU worker's host, sent
    to the worker when its unit is (it compiles on its other threads while its GPU measures).
    ``timer``: the hook the tests use to give fake timings (a picklable object with the
    :class:`~.contenders.Timer` methods; default CUDA-graph timing on each worker's GPU).

        >>> rep = autotune_on_cluster(program, candidates, "tcp://gpu-host:8786")     # doctest: +SKIP
        >>> rep.cluster.rows(), rep.cluster.moved                                    # doctest: +SKIP
    """
    from concurrent.futures import CancelledError

    from dask.distributed import wait

    from ..runtime.profile import floor_us

    emit = on_event or (lambda ev: None)
    if not candidates:
        raise MirageLabError("autotune: no candidates to tune")
    client = client_for(cluster)
    if not gpu_workers(client):
        cluster_device(client)  # raises, saying how to start GPU workers
    planned = plan_variants(candidates, max_variants=max_variants)
    results = [VariantResult(v, e) for v, e in planned]
    size = unit_size(len(results), len(gpu_workers(client)), size=unit_variants, depth=depth)
    sched = UnitScheduler(make_units(len(results), size=size), depth=depth, max_moves=MAX_MOVES)
    run_id = f"mirage_lab-tune-{uuid.uuid4().hex[:12]}"
    hosts: dict[str, int] = {}
    for w in gpu_workers(client):
        host = w.rsplit(":", 1)[0]
        hosts[host] = hosts.get(host, 0) + 1
    spec = dict(program=program.to_json(), inputs=None if inputs is None else [x.detach().cpu() for x in inputs],
                timer=timer, calibrate=calibrate, cache_dir=None if cache_dir is None else str(cache_dir),
                repeats=repeats, program_lowerings=tuple(program_lowerings), compile_workers=workers,
                plain_lowerings=tuple(x for x in program_lowerings if x == "torch") or tuple(program_lowerings),
                tune_seconds=tune_seconds,
                gpus_per_host=max(hosts.values()))
    # one copy of the spec per GPU worker, under its own key: a broadcast key's copies are thinned to one by
    # dask's active memory manager, and the death of the worker holding it would forget the key and cancel
    # every task of every worker that needs it (the live ones' included)
    spec_of: dict[str, Any] = {}

    def spec_for(w: str) -> Any:
        if w not in spec_of or spec_of[w].status != "finished":
            [spec_of[w]] = client.scatter([spec], workers=[w], hash=False)
        return spec_of[w]

    compilers = cpu_workers(client)
    t0 = time.monotonic()
    emit(TuneStarted(len(results), len(candidates), tune_seconds, len(gpu_workers(client)), "per unit"))
    futs: dict[Any, tuple[str, str, int | None]] = {}     # future -> (kind, worker, unit id)
    records: dict[str, WorkerRecord] = {}
    timeline: list[dict[str, Any]] = []     # every GPU task's span (ClusterRun.timeline)
    warming: dict[str, Any] = {}            # worker -> its torch.compile warm-up (kept: a released future is cancelled)
    infos: dict[str, dict[str, Any]] = {}
    reason = "every planned variant was measured"
    done = 0
    alone_since: float | None = None
    budget_from: float | None = None   # when the first worker was ready (its program lowerings raced)
    designated: str | None = None      # the reference worker: it races every program lowering and times torch eager
    reference: str | None = None       # the designated worker as counted in _REFERENCES (released at the end)

    faults: list[str] = []            # "worker: what faulted" of each GPU fault (that worker's process exited)

    def drop_worker(w: str, why: str) -> None:
        records.setdefault(w, WorkerRecord(w)).lost = True
        sched.lose(w, why)
        for uid in sched.given_up:   # it kills workers: its variants say so instead of killing more
            for i in sched.by_id[uid].variants:
                if results[i].compile_s is None:
                    results[i].error = f"given up: {MAX_MOVES} workers were lost while it was measured"
        gone = [f for f, (_, fw, _) in futs.items() if fw == w]
        for f in gone:
            del futs[f]
        client.cancel(gone)
        spec_of.pop(w, None)

    def faulted(w: str, exc: BaseException) -> None:
        """``w``'s GPU faulted: its CUDA context is dead, so it goes (its process exits, :func:`_gpu_task`, and its
        nanny starts a fresh one) and its unit moves; a unit that faults MAX_MOVES workers is given up as any
        that kills them."""
        faults.append(f"{w}: {fault_summary(exc)}")
        if len(faults) > MAX_GPU_FAULTS:
            raise GpuFaultError(f"{len(faults)} GPU workers faulted in one tuning run (the last: {faults[-1]}); "
                                "stopped") from exc
        drop_worker(w, f"GPU fault: {fault_summary(exc)}")

    compiles: dict[int, Any] = {}     # unit id -> its compile future (cancelled with the unit when it is taken)

    def send(w: str, unit: Any, possible: set[int]) -> None:
        """Compile and measure ``unit`` on ``w`` (dropped untried if no variant in it can still win)."""
        todo = [i for i in unit.variants if i in possible]
        if not todo:
            sched.skip(w, unit.id)
            return
        items = dumps(encode([(i, results[i]) for i in todo]))
        if compilers:
            compiled = client.submit(_compile_task, items, spec["cache_dir"], resources={CPU_RESOURCE: 1},
                                     pure=False, key=f"{run_id}-compile-{unit.id}-{time.time_ns()}")
        else:   # on the worker's host, on another of its threads, while its GPU measures the units before
            compiled = client.submit(_host_compile_task, items, spec["cache_dir"], spec["compile_workers"],
                                     spec["gpus_per_host"], workers=[w], allow_other_workers=False,
                                     pure=False, key=f"{run_id}-hostcompile-{unit.id}-{time.time_ns()}")
        compiles[unit.id] = compiled
        f = client.submit(_measure_task, run_id, spec_for(w), items, compiled, workers=[w],
                          resources={RESOURCE: 1}, pure=False, key=f"{run_id}-unit-{unit.id}-{time.time_ns()}")
        futs[f] = ("unit", w, unit.id)

    def waiting(holder: str, uid: int) -> bool:
        """The unit's results are not back yet (a unit whose results are in is not taken)."""
        return not any(k == "unit" and fw == holder and u == uid and f.done() for f, (k, fw, u) in futs.items())

    def usable(live: list[str]) -> list[str]:
        """Live GPU workers not lost, whose spec is there (one that left while it was sent is noticed next round)."""
        out = []
        for w in live:
            if w in sched.lost:
                continue
            try:
                spec_for(w)
            except Exception:   # it left meanwhile (or the scatter timed out): the next round's live list says which
                continue
            out.append(w)
        return out

    try:
        while True:
            live = gpu_workers(client)
            for w in [w for w in sched.held if w not in live and w not in sched.lost]:
                errors = [f.exception() for f, (_, fw, _) in futs.items() if fw == w and f.status == "error"]
                fault = next((e for e in errors if gpu_fault(e)), None)   # it exited after a fault (_gpu_task)
                if fault is not None:
                    faulted(w, fault)
                else:
                    drop_worker(w, "worker left the cluster")
            live = usable(live)
            if designated is None and live:
                designated = reference = _take_reference(live)
            for w in live:
                if w not in infos and not any(k == "start" and fw == w for k, fw, _ in futs.values()):
                    records.setdefault(w, WorkerRecord(w))
                    if "torch.compile" in spec["program_lowerings"] and w not in warming:
                        # on a thread of its own (no GPU resource): done once per worker process
                        warming[w] = client.submit(_warm_compiler_task, workers=[w], allow_other_workers=False,
                                                   pure=False, key=f"{run_id}-warm-{time.time_ns()}")
                    f = client.submit(_start_task, run_id, spec_for(w), w == designated, workers=[w],
                                      resources={RESOURCE: 1}, pure=False, key=f"{run_id}-start-{time.time_ns()}")
                    futs[f] = ("start", w, None)
            timed = any(i["timed"] for i in infos.values())
            if time.monotonic() - (t0 if budget_from is None else budget_from) > tune_seconds:
                reason = f"tune_seconds ({tune_seconds:g} s) ran out"
                break
            if infos and not timed and first_correct_settled(results):
                reason = "not timed (CUDA simulator): the first correct variant in cost-model order"
                break
            prog_us = min((p.median_us for i in infos.values() for p in i["programs"] if p.ok and p.timings),
                          default=float("inf"))
            possible = still_possible(results, prog_us, stop_margin if timed else None)
            # a started worker with nothing in hand takes a unit waiting behind another's (its tasks there cancelled)
            for victim, w, unit in sched.take_waiting([w for w in live if w in infos], waiting):
                gone = [f for f, (k, fw, u) in futs.items() if k == "unit" and fw == victim and u == unit.id]
                for f in gone:
                    del futs[f]
                client.cancel(gone + [c for c in [compiles.pop(unit.id, None)] if c is not None])
                send(w, unit, possible)
            for w, unit in sched.assign(live):
                send(w, unit, possible)
            if sched.complete and not any(k == "start" for k, _, _ in futs.values()):
                if timed and sched.skipped:
                    reason = (f"the best measured can no longer change: none of the variants left is rated a possible "
                              f"winner (calibrated estimate within {1 + (stop_margin or 0):.2f}× of the best)")
                break
            if live or futs:
                alone_since = None
            elif alone_since is None:
                alone_since = time.monotonic()
            elif time.monotonic() - alone_since > WORKER_WAIT_S:  # none came back (a nanny restarts a dead worker)
                raise MirageLabError("every GPU worker of the cluster was lost: no worker left to measure on "
                                     f"({len(sched.lost)} lost: {', '.join(sched.lost)})")
            if futs and not any(f.done() for f in futs):
                try:
                    wait(list(futs), timeout=poll_s, return_when="FIRST_COMPLETED")
                except (TimeoutError, CancelledError):   # nothing finished, or one was cancelled: look again
                    pass
            elif not futs:
                time.sleep(poll_s)
            for f in [f for f in futs if f.done()]:
                if f not in futs:   # dropped with its lost worker a moment ago
                    continue
                kind, w, uid = futs.pop(f)
                if f.status != "finished":
                    exc = f.exception() if f.status == "error" else None
                    killed = exc is not None and type(exc).__name__ == "KilledWorker"
                    if exc is not None and gpu_fault(exc):
                        if w not in sched.lost:
                            faulted(w, exc)
                        continue
                    if w in gpu_workers(client) and not killed:
                        if exc is not None:
                            raise MirageLabError(f"tuning failed on the GPU worker {w}: {type(exc).__name__}: "
                                                 f"{exc}") from exc
                        # cancelled or released on a live worker (e.g. an input of it was lost with another
                        # worker): the worker is not lost; its unit (or start) is sent again
                        spec_of.pop(w, None)
                        if kind == "unit":
                            sched.retry(w, uid)  # type: ignore[arg-type]
                        continue
                    if w not in sched.lost:   # it left the cluster, or its task killed workers (KilledWorker)
                        drop_worker(w, f"worker lost ({type(exc).__name__ if exc else 'left the cluster'})")
                    continue
                payload = decode(json.loads(f.result()))
                if kind == "start":
                    infos[w] = payload
                    if budget_from is None:   # as on one GPU, torch.compile's own compile is not in the budget
                        budget_from = time.monotonic()
                    records[w].device, records[w].calibration = payload["device"], payload["calibration"]
                    timeline.append({"kind": "start", "worker": w, "span": payload.get("span")})
                    continue
                sched.done(w, uid)  # type: ignore[arg-type]
                compiles.pop(uid, None)
                records[w].units += 1
                timeline.append({"kind": "unit", "unit": uid, "worker": w, "span": payload.get("span"),
                                 "compile_span": payload.get("compile_span")})
                if w in infos and payload.get("programs"):
                    infos[w]["programs"] = payload["programs"]
                for gi, r in payload["results"]:
                    results[gi] = r
                    if r.compile_s is not None:
                        done += 1
                        records[w].variants += 1
                        emit(VariantDone(r, done, len(results), time.monotonic() - t0))
        for f in futs:
            f.cancel()
        futs.clear()
        sched.drop_pending()
        report = _finish(program, results, sched, records, infos, client, run_id, designated, reason=reason, t0=t0,
                         tune_seconds=tune_seconds, finalists=finalists, final_repeats=final_repeats,
                         baselines=baselines, unit_variants=unit_variants, compiled_on=(
                             f"{len(compilers)} CPU workers" if compilers else "each GPU worker's host"),
                         floor=floor_us(program))
        report.cluster.timeline = timeline
        report.cluster.compiler_warmup = {w: json.loads(f.result()) for w, f in warming.items() if f.status == "finished"}
    finally:
        _release_reference(reference)
        client.cancel(list(futs))
        try:
            client.run(_drop_task, run_id, workers=gpu_workers(client))
        except Exception:  # a worker gone meanwhile has nothing left to drop
            pass
    emit(TuneFinished(report))
    return report


def _finish(program: KernelGraph, results: list[VariantResult], sched: UnitScheduler,
            records: dict[str, WorkerRecord], infos: dict[str, dict[str, Any]], client: Any, run_id: str,
            designated: str | None, *,
            reason: str, t0: float, tune_seconds: float, finalists: int, final_repeats: int,
            baselines: str | bool, unit_variants: int, compiled_on: str, floor: float) -> TuneReport:
    """The finalists timed again where their kernels are, the reference worker's baselines; the merged report."""
    # a lost worker may still be listed (a faulted one is restarting): a task sent there would wait forever
    live = set(gpu_workers(client)) - set(sched.lost)
    started = [w for w in infos if w in live] or list(infos)
    if not started:
        raise MirageLabError("no GPU worker of the cluster started the tuning (each was lost first)")
    devices = {infos[w]["device"] for w in infos}
    if len(devices) > 1:
        raise MirageLabError(f"workers timed on different devices ({sorted(devices)}): their timings cannot be compared")
    ref = designated if designated in started else started[0]
    timed = infos[ref]["timed"]
    programs, eager, base = infos[ref]["programs"], None, {}
    if timed:
        ok = sorted((i for i, r in enumerate(results) if r.ok and r.timings), key=lambda i: results[i].median_us)
        by_worker: dict[str, list[int]] = {ref: []} if ref in live else {}   # else: its first timings stay
        for i in ok[:finalists]:
            w = sched.worker_of(i)
            if w in live:   # a finalist whose worker was lost keeps its first timing
                by_worker.setdefault(w, []).append(i)   # type: ignore[arg-type]
        futs = {client.submit(_final_task, run_id, idx, final_repeats, w == ref, baselines, workers=[w],
                              resources={RESOURCE: 1}, pure=False, key=f"{run_id}-final-{w}"): w
                for w, idx in by_worker.items()}
        for f, w in futs.items():
            try:
                out = decode(json.loads(f.result()))
            except Exception as e:  # a worker lost now: its finalists keep their first timings
                reason += f"; the final round on {w} was lost ({type(e).__name__})"
                continue
            for gi, r in out["results"]:
                results[gi] = r
            if w == ref:
                programs, eager, base = out["programs"], out["eager"], out["baselines"]
    table = {w: r.calibration for w, r in records.items()}
    warned = calibration_outliers(table)
    for line in warned:
        warnings.warn(f"GPU timings may not be comparable: {line}", stacklevel=3)
    took_part = [r for a, r in records.items() if a in infos or r.lost or r.units]   # not one that joined at the end
    run = ClusterRun(workers=took_part, moved=list(sched.moves), unit_variants=unit_variants,
                     calibration_warnings=warned, compiled_on=compiled_on, reference=ref)
    untried = sum(r.compile_s is None for r in results)
    if untried and "ran out" in reason:
        reason += f" with {untried} of {len(results)} variants not measured"
    lost_moves = [m for m in sched.moves if m.reason != TAKEN]
    if lost_moves:
        # measured by another: where it went, or by an idle worker that took it from there
        again = sum(sched.finished.get(m.unit) not in (None, m.from_worker) for m in lost_moves)
        reason += f"; {len(lost_moves)} unit(s) given back by lost workers, {again} measured by another"
    if len(lost_moves) < len(sched.moves):
        reason += f"; {len(sched.moves) - len(lost_moves)} unit(s) taken by idle workers from busy ones"
    return TuneReport(results, best_variant(results, timed), base, floor, infos[ref]["policy"],
                      time.monotonic() - t0, tune_seconds, untried, infos[ref]["device"], timed=timed,
                      programs=programs, eager=eager, stop_reason=reason, cluster=run)

def merge_reports(reports: Sequence[TuneReport], *, seconds: float) -> TuneReport:
    """One report from the workers' reports (the first one's baselines; the fastest correct variant of all wins)."""
    devices = {r.device for r in reports}
    if len(devices) > 1:
        raise MirageLabError(f"workers timed on different devices ({sorted(devices)}): their timings cannot be compared")
    results = [x for r in reports for x in r.results]
    bests = [r.best for r in reports if r.best is not None]
    best = min(bests, key=lambda x: (x.median_us, x.estimate.us)) if bests else None
    first = reports[0]
    policies = {r.input_policy for r in reports}
    # every worker raced the program's own lowerings too: the fastest correct of each lowering is kept
    programs: dict[str, Any] = {}
    for r in reports:
        for p in r.programs:
            have = programs.get(p.lowering)
            if have is None or (p.ok and (not have.ok or p.median_us < have.median_us)):
                programs[p.lowering] = p
    eagers = [r.eager for r in reports if r.eager is not None]
    return TuneReport(results=results, best=best, baselines=first.baselines, floor_us=first.floor_us,
                      input_policy=" / ".join(sorted(policies)), seconds=seconds, budget_s=first.budget_s,
                      untried=sum(r.untried for r in reports), device=first.device,
                      timed=all(r.timed for r in reports), programs=list(programs.values()),
                      eager=min(eagers, key=lambda t: t.median_us) if eagers else None,
                      stop_reason="; ".join(sorted({r.stop_reason for r in reports if r.stop_reason})))


__all__ = ["autotune_on_cluster", "merge_reports", "cluster_device", "gpu_workers", "cpu_workers", "client_for",
           "local_gpu_cluster", "kill_worker", "ClusterRun", "WorkerRecord", "still_possible", "best_variant", "RESOURCE", "CPU_RESOURCE"]


def _exit_soon(code: int) -> None:
    import threading

    threading.Timer(0.05, os._exit, (code,)).start()   # after the reply, so the caller's run() returns


def kill_worker(client: Any, address: str, code: int = 1) -> None:
    """End a worker's process as a crash would (``os._exit``): the fault the tests and the benchmark inject.

        >>> kill_worker(client, gpu_workers(client)[-1])                  # doctest: +SKIP
    """
    client.run(_exit_soon, code, workers=[address])


def local_gpu_cluster(gpus: int | Sequence[int] | None = None, *, per_gpu: int = 1, cpu_workers: int = 0,
                      env: dict[str, str] | None = None, silence_logs: int | bool = 30) -> Any:
    """A Dask cluster on this machine for :func:`autotune_on_cluster`: one worker process per GPU, pinned to it.

    Each GPU worker has ``GPU_WORKER_THREADS`` threads (one runs its GPU tasks, the resource allows no second; the
    others wait on compiles in its pool), the resource ``GPU=1`` and ``CUDA_VISIBLE_DEVICES`` set to its card
    (``gpus``: a count, the device numbers, or every visible GPU); ``per_gpu`` workers share each
    card (to check the protocol on one GPU); ``cpu_workers`` adds compile workers (``CPU=1``);
    ``env``: more environment for every worker process (e.g. ``MIRAGE_LAB_CACHE``).
    Worker processes are started non-daemonic so each can start its pool of compile processes.

        >>> with local_gpu_cluster() as lc, Client(lc) as client:                    # doctest: +SKIP
        ...     rep = autotune_on_cluster(program, candidates, client)
    """
    import dask
    from distributed import Nanny, Scheduler, SpecCluster

    if gpus is None:
        import torch

        gpus = torch.cuda.device_count()
        if not gpus:
            raise MirageLabError("local_gpu_cluster: this machine has no CUDA GPU; pass gpus= to name devices")
    ids = list(range(gpus)) if isinstance(gpus, int) else list(gpus)
    if not ids or per_gpu < 1 or cpu_workers < 0:
        raise MirageLabError(f"local_gpu_cluster needs at least one GPU and per_gpu >= 1 (got gpus={gpus!r}, "
                             f"per_gpu={per_gpu}, cpu_workers={cpu_workers})")
    # a daemonic process may not have children (its compile pool); set for good: the nanny reads it at each restart
    dask.config.set({"distributed.worker.daemon": False})
    # dask's statistical profiler walks the task thread's frames from the worker's event loop every 10 ms:
    # with numba compiling in that thread it raised from llvmlite, and under load a worker's loop stopped
    # answering (units pending for minutes: the CPython 3.11 deadlock in stop_worker_profiler's docstring,
    # which every cluster's tuning tasks now avoid); the tuning does not use the profiles
    dask.config.set({"distributed.worker.profile.enabled": False})

    class PatientNanny(Nanny):
        # dask gives a worker 5 s to exit (4 s, then SIGKILL and a 1 s join) and raises TimeoutError out of
        # the cluster's close past that; a GPU worker's exit (CUDA context teardown, its compile pool) can
        # take longer on a loaded host: seen on 4 H200s, where the error lost the benchmark's results
        async def close(self, timeout: float = 20, reason: str = "nanny-close") -> Any:
            return await super().close(timeout=timeout, reason=reason)

    workers: dict[str, Any] = {
        f"gpu{d}-{k}": {"cls": PatientNanny, "options": {"nthreads": GPU_WORKER_THREADS, "resources": {RESOURCE: 1},
                                                  "env": {**(env or {}), "CUDA_VISIBLE_DEVICES": str(d)}}}
        for d in ids for k in range(per_gpu)}
    workers.update({f"cpu{k}": {"cls": PatientNanny, "options": {"nthreads": 1, "resources": {CPU_RESOURCE: 1},
                                                          "env": dict(env or {})}}
                    for k in range(cpu_workers)})
    return SpecCluster(workers=workers, scheduler={"cls": Scheduler, "options": {"dashboard_address": ":0"}},
                       silence_logs=silence_logs)
