"""The worker side of a search: run some tasks, confirm each hit, stream messages back.

:func:`run_tasks` runs in a worker process (or the caller's thread with ``workers=1``). It
sends ``("progress", task, stats)``, ``("confirming", task)`` as a hit's confirmation starts (at full
shapes it takes seconds), then ``("hit", task, graph json, info, stats)`` or ``("rejected", task)``,
and ``("done", task, result)`` through the channel while it runs, and returns the results too,
so that nothing is lost when the channel is not there or breaks.
"""
from __future__ import annotations

import os
import time
from typing import Any

from ..ir.serialize import from_json
from .config import SearchConfig
from .events import SearchStats

_WORKER_CACHE: dict[tuple[str, str], Any] = {}
#: The caller's own generator (numpy fingerprints, made to list the tasks), for workers that share
#: its memory: ``workers=1`` runs in the caller's process and a forked worker inherits it. Making
#: another repeats the target's fingerprints, the first kernel ops' and the z3 answers behind the
#: task list: seconds at full shapes before the first state (GQA decode: 3.4 s of 13.5 s to the
#: first candidate with one worker). The same program and settings give the same generator.
_SHARED: dict[tuple[str, str], Any] = {}


def share_generator(graph_json: str, cfg: SearchConfig, gen: Any) -> None:
    """Offer ``gen`` (numpy fingerprints) to the workers of this search that can share it."""
    _SHARED.clear()
    _SHARED[(graph_json, cfg.fingerprint())] = gen


# Where the generator itself cannot be shared (a worker with the CUDA backend): what the caller
# already computed for the search it runs, the target's fingerprint arrays (host arrays) and the
# task list. Workers in the caller's process, and those forked from it, reuse them instead of
# computing them again (seconds each at a layer's full size); spawned workers compute their own.
_PRIMED: dict[tuple[str, str], tuple] = {}


def prime(graph_json: str, cfg: SearchConfig, gen: Any) -> None:
    """Offer the caller's generator's target fingerprints and tasks to the workers of this search."""
    _PRIMED.clear()
    _PRIMED[(graph_json, cfg.fingerprint())] = (gen.t.inputs_fp, gen.t.outputs_fp, gen.all_tasks())


def _generator_for(graph_json: str, cfg: SearchConfig) -> Any:
    """One Generator (target fingerprints, z3 oracle and its cache) per worker process."""
    from ..verify.backends import resolve_backend
    from .generator import Generator, Target   # here, not above: `import mirage_lab` stays light

    key = (graph_json, cfg.fingerprint(), cfg.fingerprint_backend, os.getpid())   # not one inherited by fork
    gen = _WORKER_CACHE.get(key)
    if gen is None:
        shared = _SHARED.get((graph_json, cfg.fingerprint()))
        # A CUDA backend is never inherited (a forked child cannot use its parent's context).
        if shared is not None and shared.arrays.name == "numpy" and resolve_backend(cfg.fingerprint_backend) == "numpy":
            gen = shared
        else:
            graph = from_json(graph_json)
            primed = _PRIMED.get((graph_json, cfg.fingerprint()))
            gen = Generator(Target(graph, cfg, fingerprints=primed[:2] if primed else None), cfg)
            if primed:
                gen._tasks = primed[2]
        _WORKER_CACHE.clear()
        _WORKER_CACHE[key] = gen
    return gen


def _confirm(gen: Any, hit: Any) -> tuple[str, dict] | None:
    """Build the hit's graph and confirm it with fresh random tests; returns (json, info).

    What ``mi.verify.equivalent(target, g, tests=verify_tests, seed=seed + 1)`` decides (the same
    rule, :func:`mirage_lab.verify.equivalence.decide`, float64 second check included), with the
    target's random inputs and fingerprints computed once per generator instead of once per hit
    (at full shapes drawing and evaluating them took most of a confirmation).
    """
    from ..verify.backends import get_ops
    from ..verify.equivalence import decide
    from ..verify.fingerprint import fingerprint_graph, random_inputs
    from .build import build_graph
    from .cost import static_cost
    from .confirm_ops import TileLayoutOps

    target = gen.t.graph
    g = build_graph(target, hit.ops, hit.leaves, hit.output_perm, gen.cfg.block_dim, gen.cfg.reduction_dimx)
    if gen.arrays.name == "cuda":
        ops = get_ops("cuda")
    else:   # the numpy ops, compiled, on the search's tile layout and product memo (one per generator)
        ops = getattr(gen, "_confirm_ops", None)
        if ops is None:
            ops = gen._confirm_ops = TileLayoutOps()
    ref = getattr(gen, "_confirm_ref", None)
    if ref is None or ref[0] is not ops:
        xs = random_inputs(target, gen.cfg.verify_tests, gen.cfg.seed + 1)
        ref = gen._confirm_ref = (ops, xs, fingerprint_graph(target, xs, ops=ops))
    _, xs, want = ref
    if sorted(t.dims for t in g.outputs) != sorted(t.dims for t in target.outputs):
        return None
    verdict = decide(target, g, want, fingerprint_graph(g, xs, ops=ops), gen.cfg.seed + 1)
    if verdict is None or verdict[0] is None:
        return None
    cost = static_cost(g)
    return g.to_json(), {"kernels": cost.kernels, "bytes": cost.bytes, "hash": g.content_hash()}


#: The file, in the search's temporary folder (beside its cancel flag), where workers share z3 answers.
ANSWERS_FILE = "oracle_answers"


def _share_answers(gen: Any, cancel_path: str | None) -> None:
    """Have ``gen``'s oracle read and append z3 answers in this search's shared file
    (:mod:`mirage_lab.expr.shared_answers`); without a folder on this machine, it goes on alone."""
    from ..expr.shared_answers import SharedAnswers

    oracle = getattr(getattr(gen, "t", None), "oracle", None)
    if oracle is None or not cancel_path:
        return
    path = os.path.join(os.path.dirname(cancel_path), ANSWERS_FILE)
    cur = oracle.shared
    if cur is not None and cur.path == path:
        return
    try:
        shared = SharedAnswers(path)
    except OSError:   # a Dask worker on another machine: no such folder there
        shared = None
    if cur is not None:
        cur.close()
    oracle.shared = shared


def run_tasks(graph_json: str, cfg: SearchConfig, task_indices: list[int], channel: Any = None,
              cancel_path: str | None = None) -> list[dict[str, Any]]:
    """Explore some tasks, one after another (runs in a worker). One result dict per task run."""
    from .generator import Cancelled

    gen = _generator_for(graph_json, cfg)
    _share_answers(gen, cancel_path)
    channel_errors: list[str] = []

    def put(msg: tuple) -> None:
        if channel is None:
            return
        try:
            channel.put(msg)
        except (OSError, EOFError) as e:
            # The channel's other end is gone: the caller's Manager shut down (the caller
            # stopped iterating) or the connection broke. The worker goes on: what it found
            # also travels back in its return value, which says what broke.
            channel_errors.append(f"{type(e).__name__}: {e}")

    stop = (lambda: os.path.exists(cancel_path)) if cancel_path else (lambda: False)
    tasks = gen.all_tasks()
    results = []
    for ti in task_indices:
        if stop():
            break
        gen.stats = SearchStats()
        found: list[tuple[str, dict]] = []

        def on_hit(hit: Any, ti: int = ti, found: list = found) -> None:
            put(("confirming", ti))   # a search stopped meanwhile waits for it while it has no candidate
            c = _confirm(gen, hit)
            if c is None:
                gen.stats.candidates -= 1  # a one-test collision the confirmation rejected
                put(("rejected", ti))
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
        res = {"task": ti, "candidates": found, "stats": stats, "cancelled": cancelled, "backend": gen.arrays.name,
               "channel_error": channel_errors[0] if channel_errors else None}
        results.append(res)
        put(("done", ti, res))
        if cancelled:
            break
    return results
