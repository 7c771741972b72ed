"""Tuning spread over a Dask cluster: each GPU worker tunes a share of the candidates, the best of all wins.

Every worker that declares the resource ``GPU`` (one worker per GPU: ``dask worker ...
--nthreads 1 --resources GPU=1`` with ``CUDA_VISIBLE_DEVICES`` set to its card) takes a share of
the shortlisted candidates, round robin, and runs :func:`~.autotune.autotune` on it there: its
variants compiled by a pool of that host's CPU cores, checked and timed on its GPU. The reports
come back as JSON (:mod:`.codec`) and are merged; the caller's process compiles only the winner.
Timings are comparable only on one GPU model, so a cluster of mixed models is refused. The
merged result goes to the caller's cache like any other (``docs/scaling.md``: one cache for a team).

    >>> from dask.distributed import Client                          # doctest: +SKIP
    >>> best = graph.superoptimize(cluster=Client("tcp://gpu-host:8786"))   # doctest: +SKIP
"""
from __future__ import annotations

import json
import time
from typing import Any, Callable, Sequence

from ..errors import MirageLabError
from ..ir.kernel_graph import KernelGraph
from .autotune import TuneFinished, TuneReport, TuneStarted, VariantDone, plan_variants
from .codec import decode, dumps, encode

RESOURCE = "GPU"   # the worker resource that marks one GPU
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


def gpu_workers(client: Any) -> list[str]:
    """Addresses of the workers that declare the ``GPU`` resource."""
    info = client.scheduler_info()["workers"]
    return sorted(a for a, w in info.items() if w.get("resources", {}).get(RESOURCE, 0) >= 1)


def cluster_device(client: Any) -> dict[str, Any]:
    """The GPU the cluster's timings come from (:func:`~.cache.device_info` on its GPU workers); refuses mixed models."""
    workers = gpu_workers(client)
    if not workers:
        raise MirageLabError(f"the cluster has no worker with the resource {RESOURCE!r}: start one per GPU with "
                             f"`dask worker <scheduler> --nthreads 1 --resources {RESOURCE}=1`")
    infos = client.run(_device_json, workers=workers)
    kinds = {v for v in infos.values()}
    if len(kinds) > 1:
        raise MirageLabError("the cluster's GPU workers differ (" + "; ".join(sorted(kinds)) + "): timings on "
                             "different GPUs cannot be compared; give superoptimize a cluster of one GPU model")
    return json.loads(kinds.pop())


def _device_json() -> str:
    from .cache import device_info

    return json.dumps(device_info(), sort_keys=True)


def _tune_share(program_json: str, candidate_jsons: list[str], kwargs: dict[str, Any]) -> str:
    """On a GPU worker: autotune these candidates; the report as JSON."""
    from ..ir.serialize import from_json
    from .autotune import autotune

    inputs = kwargs.pop("inputs", None)
    if inputs is not None:
        import torch

        from ..runtime.kernel import simulator_active

        if torch.cuda.is_available() and not simulator_active():
            inputs = [x.to("cuda") for x in inputs]
    report = autotune(from_json(program_json), [from_json(c) for c in candidate_jsons], inputs=inputs, **kwargs)
    return dumps(encode(report))


def autotune_on_cluster(program: KernelGraph, candidates: Sequence[KernelGraph], cluster: Any, *,
                        tune_seconds: float = 60.0, workers: int | None = None, inputs: Sequence[Any] | None = None,
                        baselines: str | bool = "eager",
                        on_event: Callable[[Any], None] | None = None) -> TuneReport:
    """:func:`~.autotune.autotune` with the candidates shared among the cluster's GPU workers; one merged report.

    ``workers``: compile processes per GPU worker. Events: :class:`TuneStarted` (every variant
    planned), a :class:`VariantDone` per variant as each worker's share comes back, :class:`TuneFinished`.
    """
    emit = on_event or (lambda ev: None)
    if not candidates:
        raise MirageLabError("autotune: no candidates to tune")
    client = client_for(cluster)
    gpus = gpu_workers(client)
    if not gpus:
        cluster_device(client)  # raises, saying how to start GPU workers
    shares = [list(range(len(candidates)))[i::len(gpus)] for i in range(min(len(gpus), len(candidates)))]
    planned = len(plan_variants(candidates))
    t0 = time.monotonic()
    emit(TuneStarted(planned, len(candidates), tune_seconds, len(shares), "per worker"))
    futures = []
    for w, share in enumerate(shares):
        kw = dict(tune_seconds=tune_seconds, workers=workers, baselines=baselines if w == 0 else False,
                  inputs=None if inputs is None else [x.detach().cpu() for x in inputs])
        futures.append(client.submit(_tune_share, program.to_json(), [candidates[i].to_json() for i in share], kw,
                                     resources={RESOURCE: 1}, pure=False, key=f"mirage_lab-tune-{w}-{time.time_ns()}"))
    reports: list[tuple[int, TuneReport]] = []
    done = 0
    from dask.distributed import as_completed

    for fut in as_completed(futures):
        w = futures.index(fut)
        rep = decode(json.loads(fut.result()))
        for r in rep.results:          # number the candidates as the caller did
            r.variant.candidate = shares[w][r.variant.candidate]
            if r.compile_s is not None:  # tried (a variant left when the budget ran out was not)
                done += 1
                emit(VariantDone(r, done, planned, time.monotonic() - t0))
        reports.append((w, rep))
    report = merge_reports([rep for _, rep in sorted(reports, key=lambda p: p[0])], seconds=time.monotonic() - t0)
    emit(TuneFinished(report))
    return report


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


__all__ = ["autotune_on_cluster", "merge_reports", "cluster_device", "gpu_workers", "client_for", "RESOURCE"]
