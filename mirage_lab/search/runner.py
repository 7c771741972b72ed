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

The pieces: :mod:`.worker` (what runs in a worker), :mod:`.executors` (where it runs),
:mod:`.checkpoint`, :mod:`.cancel`; this module is the caller's loop that joins them.
"""
from __future__ import annotations

import os
import sys
import time
from typing import Any, Iterator

from ..cpus import usable_cpus
from ..errors import MirageLabError
from ..ir.kernel_graph import KernelGraph
from ..ir.serialize import from_json
from .cancel import CancelFlag, CancelToken
from .checkpoint import Checkpoint, CheckpointError
from .config import SearchConfig
from .events import CandidateFound, Finished, Progress, SearchError, SearchStats
from .executors import check_workers, drain, make_executor
from .inputs import SearchInputError, check_searchable
from .settings_check import validate_search_settings
from .lifetime import remove_orphaned_temp
from .worker import prime, share_generator

# Also imported from here by other modules (mirage_lab.search, the widgets).
__all__ = ["search", "CancelToken", "CheckpointError", "SearchInputError", "check_searchable"]

#: Seconds a stopped search still waits for the confirmations under way, while it has no candidate. At full
#: shapes a worker's first confirmation draws and evaluates the program on inputs of the real size: 15 s of one
#: core for Mistral-7B GQA decode at batch 64 (two 67M-element KV inputs), about twice that on a loaded
#: 16-core host, where a 30 s search stopped with every hit still being confirmed and returned none.
CONFIRM_GRACE_S = 45.0


def search(graph: KernelGraph, config: str | None = None, *, workers: int | None = None, executor: Any = None,
           checkpoint: str | os.PathLike | None = None, cancel: CancelToken | None = None,
           progress_interval: float = 0.25, **settings: Any) -> Iterator[Any]:
    """Search for μGraphs equivalent to ``graph``; yields events as the search runs.

    ``config`` is a preset (``"attention"``, ``"mlp"``, ``"lora"``); ``settings`` are
    Mirage's overrides (``griddims``, ``imaps``, ``omaps``, ``fmaps``, ``franges``) and
    limits (``max_kernel_ops``, ``max_block_ops``, ...; see :class:`SearchConfig`).
    Events: :class:`Progress`, :class:`CandidateFound`, :class:`Finished`, :class:`SearchError`.
    Bad settings raise here, in the caller, before the iterator is returned.

        >>> for ev in search(g, workers=1):                # doctest: +SKIP
        ...     if isinstance(ev, CandidateFound): print(ev.graph)
    """
    # Checked here, when search() is called (not at the first event), so that a bad argument
    # raises in the caller's frame, before any worker or thread starts.
    check_searchable(graph)
    validate_search_settings(config, {"workers": workers, "checkpoint": checkpoint, **settings}, graph)
    check_workers(workers)
    if checkpoint is not None and not isinstance(checkpoint, (str, os.PathLike)):
        raise CheckpointError(f"checkpoint={checkpoint!r}: pass a file path (a str or pathlib.Path) such as "
                              "'search.ckpt'")
    if isinstance(progress_interval, bool) or not isinstance(progress_interval, (int, float)) or \
            not 0 <= progress_interval < float("inf"):
        raise SearchInputError(f"progress_interval={progress_interval!r}: pass seconds between progress "
                               "events, a number >= 0 such as 0.25")
    cfg = settings.pop("search_config", None) or SearchConfig.from_args(config, **settings)
    cfg = cfg.with_program_ops(graph)  # ops outside the default lists, where this program uses them
    return _events(graph, cfg, workers, executor, checkpoint, cancel or CancelToken(), progress_interval)


def task_chunks(todo: list[int], n_workers: int) -> list[list[int]]:
    """The tasks in chunks handed to workers in order: chunks amortise per-future overhead, and
    enough of them keep every worker busy to the end.

    The tasks come most promising first (:meth:`Generator.tasks`), and the chunks keep that order: a
    window of ``n_workers`` chunks covers the next ``n_workers x size`` tasks, dealt one to each
    chunk in turn, so the first tasks start at once on different workers and a task never waits
    behind tasks far down the list. (Chunks that each took every n-th task of the whole list put the
    first 180 tasks of nTrans 4096 in 180 chunks of 64 spread over all 11,469: with two workers its
    candidate, state 108,310 in order, was not reached in 400,000.)

        >>> task_chunks(list(range(40)), 2)[:4]
        [[0, 2], [1, 3], [4, 6], [5, 7]]
    """
    size = max(1, min(64, len(todo) // max(1, n_workers * 8)))
    window = size * max(1, n_workers)
    chunks = []
    for w0 in range(0, len(todo), window):
        part = todo[w0:w0 + window]
        k = min(max(1, n_workers), len(part))
        chunks += [part[c::k] for c in range(k)]
    return chunks


def _events(graph: KernelGraph, cfg: SearchConfig, workers: int | None, executor: Any,
            checkpoint: str | os.PathLike | None, cancel: CancelToken, progress_interval: float) -> Iterator[Any]:
    """The search itself, as a generator of events (see :func:`search`)."""
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
    share_generator(graph_json, cfg, gen)   # workers in this process, or forked from it, start from it
    prime(graph_json, cfg, gen)   # before the pool forks: workers reuse the fingerprints and tasks
    stats.subtrees_total = len(tasks)
    cp = Checkpoint.open(checkpoint, graph.content_hash(), cfg.fingerprint(), len(tasks)) if checkpoint else None
    found: dict[str, int] = {}
    candidates: list[KernelGraph] = []
    backends: set[str] = set()
    worker_errors = 0

    def emit_candidate(gjson: str, info: dict, g: KernelGraph | None = None) -> CandidateFound | None:
        h = info.get("hash") or from_json(gjson).content_hash()
        if h in found:
            return None
        g = g or from_json(gjson)
        found[h] = len(candidates)
        candidates.append(g)
        stats.candidates = len(candidates)
        return CandidateFound(len(candidates) - 1, g, _copy(stats), dict(info))

    resumed = 0
    if cp is not None:
        for line, gjson, info in cp.candidates:
            # A checkpoint is a file anyone can edit: its candidates are checked again, as the
            # worker checked them, before they are reported.
            g, why = _reverify(graph, gjson, cfg)
            if g is None:
                yield SearchError(f"checkpoint {cp.path}: line {line}: {why}; it is not reported", _copy(stats))
                continue
            ev = emit_candidate(gjson, {**info, "hash": g.content_hash(), "resumed": True}, g)
            if ev:
                yield ev
        for st in cp.done.values():
            stats.add(SearchStats(**{k: v for k, v in st.items() if k in SearchStats.__dataclass_fields__}))
        resumed = len(cp.done)
        stats.subtrees_done = resumed
    todo = [t.index for t in tasks if cp is None or t.index not in cp.done]
    ex = make_executor(executor, workers)
    n_workers = workers or usable_cpus()
    chunks = task_chunks(todo, n_workers)
    live: dict[int, dict] = {}        # task -> latest stats of a running task
    confirming: set[int] = set()      # tasks whose worker is confirming a hit
    waiting = last_pass = False       # a stopped search waits for them (waiting_for_confirmation)
    processed: set[int] = set()
    base = _copy(stats)
    pending: list[Any] = []
    last_emit = 0.0
    cancelled = False
    cancel_at = 0.0
    channel_ok = True                 # False once the progress channel broke (reported once)
    flag: CancelFlag | None = None

    def finish_task(res: dict) -> Iterator[Any]:
        ti = res["task"]
        if ti in processed:
            return
        processed.add(ti)
        live.pop(ti, None)
        confirming.discard(ti)
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
        if res.get("channel_error") and channel_ok:
            yield channel_broke(f"a worker could not send messages ({res['channel_error']})")

    def waiting_for_confirmation(now: float) -> bool:
        """A search stopped by a budget (``CancelToken.cancel(finish_confirmations=True)``) with no candidate yet
        waits, a while, for the hits being confirmed: it would lose them
        (a running task reads as cancelled in a thread, and is left behind in a pool). Once no worker runs, one
        more pass reads what the last one sent."""
        nonlocal last_pass
        if not cancel.finish_confirmations or not confirming or candidates or now - cancel_at >= CONFIRM_GRACE_S \
                or last_pass:
            return False
        last_pass = ex.idle()
        return True

    def channel_broke(why: str) -> SearchError:
        nonlocal channel_ok
        channel_ok = False
        return SearchError(f"search: {why}; progress may lag, but candidates and counts still arrive "
                           "with each finished chunk of subtrees", _copy(stats))

    try:
        remove_orphaned_temp()   # folders of searches that were killed before they could clean up
        channel = ex.make_channel()
        flag = CancelFlag()
        if cancel.is_set():  # cancelled before it started: no worker begins a subtree (a warm worker finds
            flag.set()       # a candidate within its first states, before its next look at the flag)
        pending = list(ex.submit_all([(graph_json, cfg, ch, channel, flag.path) for ch in chunks]))
        while pending or waiting:
            if cancel.is_set() and not cancelled:
                cancelled = True
                cancel_at = time.monotonic()
                flag.set()
                for f in pending:
                    f.cancel()
            msgs, broken = drain(channel) if channel_ok else ([], None)
            if broken is not None:
                yield channel_broke(f"the progress channel broke ({type(broken).__name__}: {broken})")
            for msg in msgs:
                if msg[0] == "progress":
                    if msg[1] not in processed:
                        live[msg[1]] = msg[2]
                elif msg[0] == "confirming":
                    confirming.add(msg[1])
                elif msg[0] == "rejected":
                    confirming.discard(msg[1])
                elif msg[0] == "hit":
                    confirming.discard(msg[1])
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
                if f.cancelled():
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
            waiting = cancelled and waiting_for_confirmation(now)
            if now - last_emit >= progress_interval:
                last_emit = now
                snap = _merged(base, live, stats, t0)
                snap.confirming = len(confirming) if waiting else 0
                yield Progress(snap)
            if cancelled and now - cancel_at > 1.0 and not waiting:
                break  # workers that ignore the flag (remote Dask) are left to finish on their own
            time.sleep(0.02)
    except KeyboardInterrupt:
        # One line instead of tracebacks: the workers ignore Ctrl-C and stop through the flag below.
        print(f"mirage_lab: search interrupted; its workers are stopping ({len(candidates)} candidates found "
              f"so far, {base.subtrees_done} of {len(tasks)} subtrees "
              f"{'saved in ' + str(cp.path) if cp is not None else 'done'})", file=sys.stderr)
        raise
    finally:
        try:
            if pending and not cancelled and flag is not None:
                flag.set()  # the caller stopped iterating: stop the workers too
            ex.shutdown()
        finally:
            if flag is not None:
                flag.remove_when(ex.idle)   # once no worker can still be polling it
    final = _merged(base, {} if not cancelled else live, stats, t0)
    yield Finished(final, list(candidates), cancelled=cancelled, resumed_subtrees=resumed,
                   fingerprint_backends=sorted(backends), worker_errors=worker_errors)


def _reverify(target: KernelGraph, gjson: str, cfg: SearchConfig) -> tuple[KernelGraph | None, str]:
    """The candidate of a checkpoint line, confirmed equivalent to ``target``; or None and why not."""
    from ..verify import equivalent

    try:
        g = from_json(gjson)
        ok = equivalent(target, g, tests=cfg.verify_tests, seed=cfg.seed + 1, backend="numpy")
    except MirageLabError as e:
        return None, f"the candidate cannot be checked ({e})"
    return (g, "") if ok else (None, "the candidate is not equivalent to the program")


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
