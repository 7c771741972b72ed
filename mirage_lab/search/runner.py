"""Running a search: tasks on an executor, events streamed back, checkpoints, cancel.

    >>> for ev in mi.search.search(g, workers=2):                 # doctest: +SKIP
    ...     print(ev)

The search splits into the root's first choices (:class:`~.generator.Task`), each an
independent, deterministic subtree. They run on a ``concurrent.futures`` executor (a
local process pool by default, in-process with ``workers=1``) or on a Dask cluster
(``executor=`` a ``distributed.Client`` or a scheduler address). Workers stream progress
and candidates through a queue while they run; the caller gets typed events
(:mod:`.events`). A checkpoint file records finished tasks and every candidate as it is
found, so a killed search resumes where it stopped.
"""
from __future__ import annotations

import json
import os
import queue as queue_mod
import sys
import tempfile
import threading
import time
from concurrent.futures import Executor, ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from ..errors import MirageLabError
from ..ir.kernel_graph import KernelGraph
from ..ir.serialize import from_json
from .config import SearchConfig
from .events import CandidateFound, Finished, Progress, SearchError, SearchStats

CHECKPOINT_FORMAT = "mirage_lab.search_checkpoint"
CHECKPOINT_VERSION = 1


class SearchInputError(MirageLabError, ValueError):
    """The program cannot be searched as given."""


class CheckpointError(MirageLabError, ValueError):
    """A checkpoint file is corrupt or belongs to another program or configuration."""


# --------------------------------------------------------------------------- worker side
_WORKER_CACHE: dict[tuple[str, str], Any] = {}


def _generator_for(graph_json: str, cfg: SearchConfig) -> Any:
    """One Generator (target fingerprints, z3 oracle and its cache) per worker process."""
    from .generator import Generator, Target

    key = (graph_json, cfg.fingerprint(), cfg.fingerprint_backend, os.getpid())   # not one inherited by fork
    gen = _WORKER_CACHE.get(key)
    if gen is None:
        graph = from_json(graph_json)
        gen = Generator(Target(graph, cfg), cfg)
        _WORKER_CACHE.clear()
        _WORKER_CACHE[key] = gen
    return gen


def _confirm(gen: Any, hit: Any) -> tuple[str, dict] | None:
    """Build the hit's graph and confirm it with fresh random tests; returns (json, info)."""
    from ..verify import equivalent
    from .build import build_graph
    from .cost import static_cost

    target = gen.t.graph
    g = build_graph(target, hit.ops, hit.leaves, hit.output_perm, gen.cfg.block_dim, gen.cfg.reduction_dimx)
    res = equivalent(target, g, tests=gen.cfg.verify_tests, seed=gen.cfg.seed + 1,
                     backend="cuda" if gen.arrays.name == "cuda" else "numpy")
    if not res:
        return None
    cost = static_cost(g)
    return g.to_json(), {"kernels": cost.kernels, "bytes": cost.bytes, "hash": g.content_hash()}


def run_tasks(graph_json: str, cfg: SearchConfig, task_indices: list[int], channel: Any = None,
              cancel_path: str | None = None) -> list[dict[str, Any]]:
    """Explore some tasks, one after another (runs in a worker). One result dict per task run."""
    gen = _generator_for(graph_json, cfg)
    from .events import SearchStats
    from .generator import Cancelled

    def put(msg: tuple) -> None:
        if channel is not None:
            try:
                channel.put(msg)
            except Exception:  # a closed channel (caller gone) must not kill the worker
                pass

    stop = (lambda: os.path.exists(cancel_path)) if cancel_path else (lambda: False)
    tasks = gen.all_tasks()
    results = []
    for ti in task_indices:
        if stop():
            break
        gen.stats = SearchStats()
        found: list[tuple[str, dict]] = []

        def on_hit(hit: Any, ti: int = ti, found: list = found) -> None:
            c = _confirm(gen, hit)
            if c is None:
                gen.stats.candidates -= 1  # a one-test collision the confirmation rejected
                return
            found.append(c)
            put(("hit", ti, c[0], c[1], gen.stats.as_dict()))

        gen.on_hit = on_hit
        gen.on_progress = lambda s, ti=ti: put(("progress", ti, s.as_dict()))
        gen.should_stop = stop
        t0 = time.monotonic()
        cancelled = False
        try:
            gen.run_task(tasks[ti])
        except Cancelled:
            cancelled = True
        stats = gen.stats.as_dict()
        stats["elapsed"] = time.monotonic() - t0
        res = {"task": ti, "candidates": found, "stats": stats, "cancelled": cancelled, "backend": gen.arrays.name}
        results.append(res)
        put(("done", ti, res))
        if cancelled:
            break
    return results


# --------------------------------------------------------------------------- checkpoint
@dataclass
class Checkpoint:
    path: Path
    done: dict[int, dict] = field(default_factory=dict)
    candidates: list[tuple[str, dict]] = field(default_factory=list)

    @classmethod
    def open(cls, path: str | os.PathLike, program_hash: str, cfg_hash: str, n_tasks: int) -> "Checkpoint":
        p = Path(path)
        cp = cls(p)
        header = {"format": CHECKPOINT_FORMAT, "version": CHECKPOINT_VERSION, "program": program_hash,
                  "config": cfg_hash, "tasks": n_tasks}
        if not p.exists() or p.stat().st_size == 0:
            with open(p, "w") as f:
                f.write(json.dumps(header) + "\n")
                f.flush()
                os.fsync(f.fileno())
            return cp
        lines = p.read_text().split("\n")
        try:
            head = json.loads(lines[0])
        except json.JSONDecodeError as e:
            raise CheckpointError(f"{p} is not a mirage_lab search checkpoint (first line is not JSON)") from e
        if not isinstance(head, dict) or head.get("format") != CHECKPOINT_FORMAT:
            raise CheckpointError(f"{p} is not a mirage_lab search checkpoint")
        if head.get("version", 0) > CHECKPOINT_VERSION:
            raise CheckpointError(f"{p} was written by a newer mirage_lab (version {head.get('version')})")
        if head.get("program") != program_hash:
            raise CheckpointError(
                f"{p} belongs to another program (hash {str(head.get('program'))[:12]}…, this one is "
                f"{program_hash[:12]}…); use another checkpoint path or delete the file"
            )
        if head.get("config") != cfg_hash or head.get("tasks") != n_tasks:
            raise CheckpointError(
                f"{p} was written by a search with other settings; resume with the same settings, "
                "or use another checkpoint path"
            )
        body = [ln for ln in lines[1:]]
        # A search killed mid-write leaves at most a partial last line; anything else is corruption.
        while body and body[-1] == "":
            body.pop()
        for i, ln in enumerate(body):
            try:
                rec = json.loads(ln)
            except json.JSONDecodeError as e:
                if i == len(body) - 1:
                    break
                raise CheckpointError(f"{p}: line {i + 2} is corrupt ({e}); the checkpoint cannot be trusted") from e
            if "done" in rec:
                cp.done[int(rec["done"])] = rec.get("stats", {})
            elif "candidate" in rec:
                cp.candidates.append((rec["candidate"], rec.get("info", {})))
            else:
                raise CheckpointError(f"{p}: line {i + 2} is not a checkpoint record")
        # Re-write without a torn tail so that later appends stay line-aligned.
        if lines and not p.read_text().endswith("\n"):
            with open(p, "a") as f:
                f.write("\n")
        return cp

    def _append(self, rec: dict) -> None:
        with open(self.path, "a") as f:
            f.write(json.dumps(rec) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def add_candidate(self, task: int, graph_json: str, info: dict) -> None:
        self._append({"task": task, "candidate": graph_json, "info": info})

    def mark_done(self, task: int, stats: dict) -> None:
        self.done[task] = stats
        self._append({"done": task, "stats": stats})


# --------------------------------------------------------------------------- executors
class _Inline:
    """Runs tasks one after another in a background thread (``workers=1``)."""

    def __init__(self) -> None:
        self._q: queue_mod.Queue = queue_mod.Queue()
        self._thread: threading.Thread | None = None

    def make_channel(self) -> Any:
        return queue_mod.Queue()

    def submit_all(self, calls: list[tuple]) -> list[Any]:
        futs = [_ThreadFuture() for _ in calls]

        def work() -> None:
            for fut, args in zip(futs, calls):
                if fut.cancelled():
                    continue
                try:
                    fut.set(run_tasks(*args))
                except BaseException as e:  # surfaced to the caller as an error event
                    fut.set_error(e)

        self._thread = threading.Thread(target=work, daemon=True, name="mirage_lab-search")
        self._thread.start()
        return futs

    def shutdown(self) -> None:
        pass


class _ThreadFuture:
    def __init__(self) -> None:
        self._done = threading.Event()
        self._res: Any = None
        self._err: BaseException | None = None
        self._cancelled = False

    def set(self, r: Any) -> None:
        self._res = r
        self._done.set()

    def set_error(self, e: BaseException) -> None:
        self._err = e
        self._done.set()

    def done(self) -> bool:
        return self._done.is_set()

    def cancelled(self) -> bool:
        return self._cancelled

    def cancel(self) -> bool:
        if self._done.is_set():
            return False
        self._cancelled = True
        return True

    def result(self) -> Any:
        if self._err is not None:
            raise self._err
        return self._res


def _parent_holds_cuda() -> bool:
    torch = sys.modules.get("torch")
    try:
        return bool(torch is not None and torch.cuda.is_initialized())
    except Exception:  # a CPU build or a broken driver: no context to lose
        return False


class _Pool:
    """A ``concurrent.futures`` executor (ours or the caller's) with a Manager queue for progress."""

    def __init__(self, executor: Executor | None, workers: int) -> None:
        import multiprocessing as mp

        self._own = executor is None
        # fork works from notebooks and from scripts without a __main__ guard (spawn and
        # forkserver re-import the caller's script); workers build their own z3 contexts.
        # A forked child cannot use a CUDA context its parent holds, so a caller that has
        # already used the GPU (a notebook that made CUDA tensors, a second superoptimize)
        # gets spawned workers, which keep GPU fingerprints (4-5x faster searches).
        ctx = mp.get_context("fork" if sys.platform.startswith("linux") and not _parent_holds_cuda() else "spawn")
        self.executor = executor or ProcessPoolExecutor(max_workers=workers, mp_context=ctx)
        self._manager = ctx.Manager()

    def make_channel(self) -> Any:
        return self._manager.Queue()

    def submit_all(self, calls: list[tuple]) -> list[Any]:
        return [self.executor.submit(run_tasks, *args) for args in calls]

    def shutdown(self) -> None:
        if self._own:
            self.executor.shutdown(wait=False, cancel_futures=True)
        self._manager.shutdown()


class _Dask:
    """A Dask ``distributed`` client; progress through a ``distributed.Queue``."""

    def __init__(self, client_or_address: Any) -> None:
        from distributed import Client

        self._own = isinstance(client_or_address, str)
        self.client = Client(client_or_address) if self._own else client_or_address

    def make_channel(self) -> Any:
        from distributed import Queue

        return Queue(client=self.client)

    def submit_all(self, calls: list[tuple]) -> list[Any]:
        return [self.client.submit(run_tasks, *args, pure=False) for args in calls]

    def shutdown(self) -> None:
        if self._own:
            self.client.close()


def _make_executor(executor: Any, workers: int | None) -> Any:
    if executor is None:
        n = workers if workers is not None else (os.cpu_count() or 1)
        if n <= 1:
            return _Inline()
        return _Pool(None, n)
    if isinstance(executor, str) and executor == "inline":
        return _Inline()
    if isinstance(executor, str):
        return _Dask(executor)
    if isinstance(executor, Executor):
        return _Pool(executor, workers or 1)
    mod = type(executor).__module__
    if mod.startswith("distributed"):
        return _Dask(executor)
    raise SearchInputError(
        f"executor={executor!r}: use None (a local process pool), 'inline', a concurrent.futures.Executor, "
        "a dask distributed.Client or a scheduler address like 'tcp://host:8786'"
    )


def _drain(channel: Any) -> list[tuple]:
    out = []
    while True:
        try:
            if hasattr(channel, "get_nowait"):
                out.append(channel.get_nowait())
            else:  # distributed.Queue
                if channel.qsize() == 0:
                    break
                out.append(channel.get(timeout=0.05))
        except (queue_mod.Empty, TimeoutError):
            break
        except Exception:
            break
    return out


# --------------------------------------------------------------------------- the public iterator
class CancelToken:
    """Set from any thread (a Stop button) to end a running search within a second."""

    def __init__(self) -> None:
        self._ev = threading.Event()

    def cancel(self) -> None:
        self._ev.set()

    def is_set(self) -> bool:
        return self._ev.is_set()


def check_searchable(graph: KernelGraph) -> None:
    if not isinstance(graph, KernelGraph):
        raise SearchInputError(f"search: expected a KernelGraph, got {type(graph).__name__}")
    if not graph.outputs:
        raise SearchInputError("search: the program has no outputs; call graph.mark_output(t) first")
    if not graph.inputs:
        raise SearchInputError("search: the program has no inputs")
    if len({t.dtype for t in graph.inputs}) > 1:
        raise SearchInputError("search: all inputs must have one dtype")
    if any(op.op_type == "customized" for op in graph.ops):
        raise SearchInputError("search: the program already contains customized ops; search a plain kernel graph")


def search(graph: KernelGraph, config: str | None = None, *, workers: int | None = None, executor: Any = None,
           checkpoint: str | os.PathLike | None = None, cancel: CancelToken | None = None,
           progress_interval: float = 0.25, **settings: Any) -> Iterator[Any]:
    """Search for μGraphs equivalent to ``graph``; yields events as the search runs.

    ``config`` is a preset (``"attention"``, ``"mlp"``, ``"lora"``); ``settings`` are
    Mirage's overrides (``griddims``, ``imaps``, ``omaps``, ``fmaps``, ``franges``) and
    limits (``max_kernel_ops``, ``max_block_ops``, ...; see :class:`SearchConfig`).
    Events: :class:`Progress`, :class:`CandidateFound`, :class:`Finished`, :class:`SearchError`.

        >>> for ev in search(g, workers=1):                # doctest: +SKIP
        ...     if isinstance(ev, CandidateFound): print(ev.graph)
    """
    check_searchable(graph)
    cfg = settings.pop("search_config", None) or SearchConfig.from_args(config, **settings)
    cancel = cancel or CancelToken()
    from .generator import Generator, Target

    t0 = time.monotonic()
    stats = SearchStats()
    try:
        # The caller's process only lists the tasks; it keeps off the GPU so that forked
        # workers can still use it.
        gen = Generator(Target(graph, cfg), cfg, fingerprint_backend="numpy")
        tasks = gen.all_tasks()
    except MirageLabError as e:
        yield SearchError(str(e), stats)
        return
    graph_json = graph.to_json()
    stats.subtrees_total = len(tasks)
    cp = Checkpoint.open(checkpoint, graph.content_hash(), cfg.fingerprint(), len(tasks)) if checkpoint else None
    found: dict[str, int] = {}
    candidates: list[KernelGraph] = []
    backends: set[str] = set()
    worker_errors = 0

    def emit_candidate(gjson: str, info: dict) -> CandidateFound | None:
        h = info.get("hash") or from_json(gjson).content_hash()
        if h in found:
            return None
        g = from_json(gjson)
        found[h] = len(candidates)
        candidates.append(g)
        stats.candidates = len(candidates)
        return CandidateFound(len(candidates) - 1, g, _copy(stats), dict(info))

    resumed = 0
    if cp is not None:
        for gjson, info in cp.candidates:
            ev = emit_candidate(gjson, {**info, "resumed": True})
            if ev:
                yield ev
        for st in cp.done.values():
            stats.add(SearchStats(**{k: v for k, v in st.items() if k in SearchStats.__dataclass_fields__}))
        resumed = len(cp.done)
        stats.subtrees_done = resumed
    todo = [t.index for t in tasks if cp is None or t.index not in cp.done]
    ex = _make_executor(executor, workers)
    n_workers = workers or os.cpu_count() or 1
    # Chunks amortise per-future overhead; enough of them keep every worker busy to the end.
    # Each chunk takes every n-th task, so the first tasks (the most promising, see
    # Generator.tasks) start at once on different workers instead of queueing in one chunk.
    size = max(1, min(64, len(todo) // max(1, n_workers * 8)))
    n_chunks = -(-len(todo) // size)
    chunks = [todo[c::n_chunks] for c in range(n_chunks)]
    channel = ex.make_channel()
    cancel_dir = tempfile.mkdtemp(prefix="mirage_lab_cancel_")
    cancel_path = os.path.join(cancel_dir, "cancel")
    futs = ex.submit_all([(graph_json, cfg, ch, channel, cancel_path) for ch in chunks])
    live: dict[int, dict] = {}        # task -> latest stats of a running task
    processed: set[int] = set()
    base = _copy(stats)
    pending = list(futs)
    last_emit = 0.0
    cancelled = False
    cancel_at = 0.0

    def finish_task(res: dict) -> Iterator[Any]:
        ti = res["task"]
        if ti in processed:
            return
        processed.add(ti)
        live.pop(ti, None)
        backends.add(res.get("backend", "numpy"))
        for gjson, info in res["candidates"]:
            if cp is not None and info.get("hash") not in found:
                cp.add_candidate(ti, gjson, info)
            ev = emit_candidate(gjson, info)
            if ev:
                yield ev
        st = SearchStats(**{k: v for k, v in res["stats"].items() if k in SearchStats.__dataclass_fields__})
        st.candidates = 0
        st.subtrees_done = 0 if res["cancelled"] else 1
        base.add(st)
        if not res["cancelled"] and cp is not None:
            cp.mark_done(ti, res["stats"])

    try:
        while pending:
            if cancel.is_set() and not cancelled:
                cancelled = True
                cancel_at = time.monotonic()
                Path(cancel_path).touch()
                for f in pending:
                    f.cancel()
            for msg in _drain(channel):
                if msg[0] == "progress":
                    if msg[1] not in processed:
                        live[msg[1]] = msg[2]
                elif msg[0] == "hit":
                    live[msg[1]] = msg[4]
                    if cp is not None and msg[3].get("hash") not in found:
                        cp.add_candidate(msg[1], msg[2], msg[3])
                    ev = emit_candidate(msg[2], msg[3])
                    if ev:
                        yield ev
                elif msg[0] == "done":
                    yield from finish_task(msg[2])
            still = []
            for f in pending:
                if _is_cancelled(f):
                    continue
                if not f.done():
                    still.append(f)
                    continue
                try:
                    results = f.result()
                except Exception as e:  # a worker crash: report it, keep the other tasks going
                    worker_errors += 1
                    yield SearchError(f"a search worker failed: {type(e).__name__}: {e}", _copy(stats))
                    continue
                for res in results:
                    yield from finish_task(res)
            pending = still
            now = time.monotonic()
            if now - last_emit >= progress_interval:
                last_emit = now
                yield Progress(_merged(base, live, stats, t0))
            if cancelled and now - cancel_at > 1.0:
                break  # workers that ignore the flag (remote Dask) are left to finish on their own
            time.sleep(0.02)
    finally:
        if pending and not cancelled:
            Path(cancel_path).touch()  # the caller stopped iterating: stop the workers too
        ex.shutdown()
    final = _merged(base, {} if not cancelled else live, stats, t0)
    yield Finished(final, list(candidates), cancelled=cancelled, resumed_subtrees=resumed,
                   fingerprint_backends=sorted(backends), worker_errors=worker_errors)


def _is_cancelled(f: Any) -> bool:
    try:
        return bool(f.cancelled())
    except Exception:
        return False


def _copy(s: SearchStats) -> SearchStats:
    return SearchStats(**s.as_dict())


def _merged(base: SearchStats, live: dict[int, dict], stats: SearchStats, t0: float) -> SearchStats:
    out = _copy(base)
    for st in live.values():
        out.add(SearchStats(**{k: v for k, v in st.items() if k in SearchStats.__dataclass_fields__ and k != "subtrees_done"}))
    out.candidates = stats.candidates
    out.subtrees_total = stats.subtrees_total
    out.elapsed = time.monotonic() - t0
    return out
