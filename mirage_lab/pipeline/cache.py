"""The persistent cache of ``superoptimize``: a search or a tuning is done once per program, settings and GPU.

Two layers, each a JSON file under ``<cache root>/results/`` (``$MIRAGE_LAB_CACHE``, else
``$XDG_CACHE_HOME/mirage_lab``, else ``~/.cache/mirage_lab``):

* ``search/``: the search's candidates (μGraph JSON), costs and stats, keyed by the
  program's content hash, its input shapes and dtypes, every search setting that changes
  the result, ``search_seconds``, and mirage_lab's version. No GPU in the key: a search
  result is reused on any machine.
* ``tuning/``: the winner and how it was chosen (the whole :class:`~.autotune.TuneReport`,
  or the cost model's pick without a GPU), keyed by the search key, the tuning settings,
  the GPU's model, driver, CUDA and numba versions, ``CODEGEN_VERSION`` and the library
  kernels that race (:mod:`.library`). Another GPU
  or driver reuses the search and tunes again.

An entry is trusted only if it parses, names this format and exactly the key asked for,
and its payload matches its SHA-256; otherwise it is ignored with a :class:`CacheWarning`
and rebuilt. Writes are atomic (a temporary file, then ``os.replace``) and serialised by
a file lock, so processes sharing one cache never see half an entry.

    >>> import mirage_lab as mi
    >>> mi.cache.info()                                   # doctest: +SKIP
    CacheInfo(/home/me/.cache/mirage_lab: 2 search, 3 tuning entries, 1.2 MB; 14 kernel modules)
    >>> mi.cache.clear()                                  # doctest: +SKIP
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import shutil
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from ..errors import MirageLabError
from ..ir.kernel_graph import KernelGraph
from .codec import CodecError, decode, dumps, encode

FORMAT = 1
LAYERS = ("search", "tuning")
# search keywords that change how the search runs, never what it finds
RUN_ONLY = frozenset({"workers", "executor", "checkpoint", "cancel", "progress_interval", "fingerprint_backend"})


class CacheWarning(UserWarning):
    """A cache entry was unusable (corrupt, foreign, unwritable) and was ignored."""


@dataclass
class CacheHit:
    """Event sent to ``on_event`` when ``superoptimize`` takes a layer from the cache."""

    layer: str        # "search" or "tuning"
    path: str
    created: float    # time.time() when the entry was written


def root() -> Path:
    """The cache folder (its ``results/`` holds this module's entries, ``kernels/`` the compiled modules)."""
    from ..runtime.paths import cache_root

    return cache_root()


def results_dir() -> Path:
    return root() / "results"


# ----------------------------------------------------------------------------- what keys are made of
@functools.lru_cache(maxsize=1)
def _device_info() -> dict[str, Any]:
    import torch

    from ..runtime.paths import simulator_active

    info: dict[str, Any] = {"torch": torch.__version__, "cuda": torch.version.cuda}
    try:
        import numba

        info["numba"] = numba.__version__
        from importlib.metadata import version

        info["numba_cuda"] = version("numba-cuda")
    except Exception:  # pragma: no cover - numba is a dependency; a missing dist name is not fatal
        pass
    if simulator_active():
        return {**info, "gpu": "CUDA simulator"}
    if not torch.cuda.is_available():
        return {**info, "gpu": None}
    p = torch.cuda.get_device_properties(torch.cuda.current_device())
    info.update(gpu=p.name, capability=f"{p.major}.{p.minor}", sms=p.multi_processor_count,
                memory=p.total_memory, driver=_driver_version())
    return info


def device_info() -> dict[str, Any]:
    """What a measurement depends on besides the code: GPU model, driver, CUDA, torch and numba versions.

    (Tests replace this function to pretend another GPU.)
    """
    return dict(_device_info())


def _driver_version() -> str | None:
    try:  # Linux: "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  ..."
        text = Path("/proc/driver/nvidia/version").read_text()
        for tok in text.split():
            if tok.count(".") >= 1 and tok.replace(".", "").isdigit():
                return tok
    except OSError:
        pass
    try:
        from numba import cuda

        return "cuda driver API " + ".".join(map(str, cuda.cudadrv.driver.driver.get_version()))
    except Exception:
        return None


# sources that cannot change what the search finds: code generation, running and timing kernels, drawing,
# widgets and the command line. A change there re-tunes (the tuning key has every source) but reuses searches.
_NOT_SEARCH = ("codegen/", "runtime/", "viz/", "widgets/", "labextension/", "cli.py", "report.py", "lab.py")


def _version(scope: str = "all") -> str:
    """mirage_lab's version and a digest of its sources: a checkout changed under the same version number
    (a new search space, a verifier fix) must not be served the results of the old code.

    ``scope="search"`` digests only the sources the search's result depends on (not ``_NOT_SEARCH``).
    """
    if scope not in _VERSIONS:
        from importlib.metadata import PackageNotFoundError, version

        import mirage_lab

        try:
            v = version("mirage-lab")
        except PackageNotFoundError:  # a checkout on PYTHONPATH
            v = getattr(mirage_lab, "__version__", "0")
        root = Path(mirage_lab.__file__).parent
        h = hashlib.sha256()
        for p in sorted(root.rglob("*.py")):
            rel = p.relative_to(root).as_posix()
            if scope == "search" and rel.startswith(_NOT_SEARCH):
                continue
            h.update(rel.encode() + b"\0" + p.read_bytes() + b"\0")
        _VERSIONS[scope] = f"{v}+src.{h.hexdigest()[:12]}"
    return _VERSIONS[scope]


_VERSIONS: dict[str, str] = {}


def search_key(graph: KernelGraph, config: str | None, settings: dict[str, Any],
               search_seconds: float | None, stop_when_quiet: bool | None = None) -> dict[str, Any]:
    """The search layer's key: program, shapes, dtypes, result-changing settings, versions.

    ``stop_when_quiet`` enters the key only where it differs from what came with ``search_seconds``
    before it was a setting (the quiet rule ran exactly when a ceiling was given): those keys stay as they were.

    Raises the search's own ``SearchConfigError`` for a bad setting, as the search would.
    """
    from ..search import SearchConfig

    cfg = settings.get("search_config") or SearchConfig.from_args(
        config, **{k: v for k, v in settings.items() if k not in RUN_ONLY and k != "search_config"})
    cfg = cfg.with_program_ops(graph).resolved(graph)
    fields = dataclasses.asdict(cfg)
    for k in ("extra", "fingerprint_backend"):
        fields.pop(k, None)
    return {"layer": "search", "program": graph.content_hash(),
            "inputs": [[list(t.dims), t.dtype.name] for t in graph.inputs],
            "settings": json.loads(json.dumps(fields, sort_keys=True, default=str)),
            "search_seconds": search_seconds, "mirage_lab": _version("search"),
            **({} if stop_when_quiet is None or stop_when_quiet == (search_seconds is not None)
               else {"stop_when_quiet": stop_when_quiet})}


def tuning_key(search: dict[str, Any], *, tune: bool, max_candidates: int, tune_seconds: float,
               baselines: str | bool, inputs: Sequence[Any] | None,
               device: dict[str, Any] | None = None) -> dict[str, Any]:
    """The tuning layer's key: the search key, the tuning settings, codegen and (when tuning) the device.

    ``device``: where the timing happens (a cluster's GPU workers); default :func:`device_info` here.
    """
    from ..codegen import CODEGEN_VERSION

    key: dict[str, Any] = {"layer": "tuning", "search": _digest(search), "tune": bool(tune),
                           "max_candidates": max_candidates, "codegen": CODEGEN_VERSION, "mirage_lab": _version()}
    if tune:
        from .library import LIBRARIES

        # the library kernels that race (pipeline.library): a tuning stored before one was added did not race it
        key.update(tune_seconds=tune_seconds, baselines=baselines, device=device or device_info(),
                   inputs=None if inputs is None else _tensors_digest(inputs), libraries=sorted(LIBRARIES))
    return key


def _tensors_digest(xs: Sequence[Any]) -> str:
    h = hashlib.sha256()
    for x in xs:
        t = x.detach().contiguous().cpu()
        h.update(f"{tuple(t.shape)}:{t.dtype};".encode())
        h.update(t.view(-1).view(__import__("torch").uint8).numpy().tobytes())
    return h.hexdigest()


def _digest(data: Any) -> str:
    return hashlib.sha256(dumps(data).encode()).hexdigest()


# ----------------------------------------------------------------------------- entries on disk
def _path(key: dict[str, Any]) -> Path:
    return results_dir() / key["layer"] / f"{_digest(key)[:32]}.json"


def load(key: dict[str, Any]) -> tuple[Any, Path, float] | None:
    """``(payload, path, created)`` stored under ``key``, or None (missing; unusable: warned and ignored)."""
    path = _path(key)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as e:
        return _unusable(path, f"unreadable ({e})")
    try:
        entry = json.loads(text)
    except ValueError as e:
        return _unusable(path, f"not JSON ({e})")
    if not isinstance(entry, dict) or entry.get("format") != FORMAT:
        return _unusable(path, f"not a format-{FORMAT} mirage_lab cache entry")
    if entry.get("key") != json.loads(dumps(key)):
        return _unusable(path, "its key is not the one asked for")
    payload = entry.get("payload")
    if _digest(payload) != entry.get("payload_sha256"):
        return _unusable(path, "its payload does not match its checksum")
    try:
        return decode(payload), path, float(entry.get("created", 0.0))
    except (CodecError, MirageLabError, ValueError, TypeError, KeyError) as e:
        return _unusable(path, f"its records do not rebuild ({e})")


def store(key: dict[str, Any], obj: Any) -> Path | None:
    """Write ``obj`` under ``key`` (atomically, under the entry's lock); None if it cannot be stored (warned)."""
    from filelock import FileLock, Timeout

    path = _path(key)
    try:
        payload = encode(obj)
    except CodecError as e:
        warnings.warn(f"mirage_lab cache: result not stored: {e}", CacheWarning, stacklevel=3)
        return None
    entry = {"format": FORMAT, "key": key, "created": time.time(), "payload": payload,
             "payload_sha256": _digest(payload)}
    text = json.dumps(entry)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(path) + ".lock", timeout=60):
            tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
            tmp.write_text(text, encoding="utf-8")
            os.replace(tmp, path)  # readers see the old entry or the new one, never a part
    except (OSError, Timeout) as e:
        warnings.warn(f"mirage_lab cache: cannot write {path}: {e}", CacheWarning, stacklevel=3)
        return None
    return path


def _unusable(path: Path, why: str) -> None:
    warnings.warn(f"mirage_lab cache: ignoring {path}: {why}; it will be rebuilt", CacheWarning, stacklevel=4)
    return None


# ----------------------------------------------------------------------------- superoptimize's use
class Lookup:
    """One ``superoptimize`` call's view of the cache: its two keys, what it found, what it stores.

    ``enabled=False`` (``superoptimize(cache=False)``) finds nothing and stores nothing.
    ``say`` prints the one line that tells where a cached result came from.
    """

    def __init__(self, graph: KernelGraph, config: str | None, settings: dict[str, Any], *,
                 search_seconds: float | None, enabled: bool = True, say: Any = None,
                 on_event: Any = None, stop_when_quiet: bool | None = None) -> None:
        self.graph = graph
        self.enabled = enabled
        self.say = say or (lambda line: None)
        self.emit = on_event or (lambda ev: None)
        self.search_seconds = search_seconds
        self.skey = None
        if enabled:
            from ..search import SearchConfigError

            try:
                self.skey = search_key(graph, config, settings, search_seconds, stop_when_quiet)
            except SearchConfigError:
                raise
            except Exception:  # a program the search refuses: its own error, from the search, says why
                self.enabled = False
        self.tkey: dict[str, Any] | None = None

    # the search layer
    def search(self) -> Any:
        """The stored :class:`~mirage_lab.search.SearchResult` for this program and settings, or None."""
        from ..search import SearchResult

        hit = load(self.skey) if self.enabled else None
        if hit is None:
            return None
        fields, path, created = hit
        try:
            res = SearchResult(program=self.graph, **fields)
        except TypeError as e:
            return _unusable(path, f"its search result does not rebuild ({e})")
        self.emit(CacheHit("search", str(path), created))
        self._search_hit = (path, created)
        return res

    def save_search(self, res: Any, quiet_stopped: bool = False) -> None:
        """Store a finished search (one cut short by ``search_seconds`` or the quiet rule too, both in the key,
        if it found any)."""
        if not self.enabled or res.errors or (res.cancelled and not quiet_stopped
                                              and (self.search_seconds is None or not res.candidates)):
            return  # lost subtrees, a cancel by the caller, or nothing found in time (a faster run may): not reused
        store(self.skey, {f.name: getattr(res, f.name) for f in dataclasses.fields(res)
                          if f.name not in ("program", "measurements")})

    # the tuning layer
    def tuned(self, res: Any, **tuning: Any) -> Any:
        """The stored winner (an :class:`~.result.OptimizedGraph`, compiled if it was) for ``res``, or None."""
        from .result import OptimizedGraph

        if not self.enabled:
            return None
        self.tkey = tuning_key(self.skey, **tuning)
        hit = load(self.tkey)
        if hit is None:
            s = getattr(self, "_search_hit", None)
            if s is not None:
                again = "tuning again" if tuning.get("tune") else "choosing the lowering again"
                self.say(f"mirage_lab: search result from the cache ({s[0]}, {_when(s[1])}); {again}")
            return None
        payload, path, created = hit
        try:
            best = OptimizedGraph.__new__(OptimizedGraph)
            best.__dict__.update(payload["state"])
            best.program, best.search_result, best._kernel, best._fast = self.graph, res, None, None
            report = best.__dict__.get("report")
            if report is not None:
                res.measurements = report.latency_rows(payload["picks"])
            from ..runtime.paths import simulator_active
            from . import gpu_available

            if payload["compiled"] and (gpu_available() or simulator_active()):  # (a cluster's caller may have none: compiled on first call)
                best._set_kernel(best._build_kernel())  # numba's disk cache (or the program's lowering): seconds at most
        except (KeyError, TypeError, AttributeError) as e:
            return _unusable(path, f"its tuning result does not rebuild ({e})")
        self.emit(CacheHit("tuning", str(path), created))
        where = f" on {report.device}" if report is not None else ""
        what = "measured winner" if report is not None and report.timed else "result"
        later = ("; torch.compile compiles it at the first call (inductor's own cache makes that seconds)"
                 if getattr(best, "_lowering", None) == "torch.compile" else "")
        self.say(f"mirage_lab: {what} from the cache ({path}, {_when(created)}{where}){later}; "
                 "superoptimize(..., cache=False) to redo it")
        best.from_cache = str(path)
        return best

    def save_tuned(self, best: Any, picks: Sequence[int]) -> None:
        """Store the winner; a tuning in which every variant failed is not stored (it may be transient)."""
        report = getattr(best, "report", None)
        if not self.enabled or self.tkey is None or (self.tkey["tune"] and getattr(report, "best", None) is None):
            return
        state = {k: v for k, v in vars(best).items()
                 if k not in ("program", "search_result", "_kernel", "_fast", "from_cache")}
        store(self.tkey, {"picks": list(picks), "compiled": best._kernel is not None, "state": state})


def _when(created: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(created))


# ----------------------------------------------------------------------------- inspect and empty
@dataclass
class CacheInfo:
    """What the cache holds: where, how many entries per layer, bytes, compiled kernel modules."""

    path: str
    entries: dict[str, int]
    bytes: int
    kernels: int

    def __repr__(self) -> str:
        layers = ", ".join(f"{n} {k}" for k, n in self.entries.items())
        return (f"CacheInfo({self.path}: {layers} entries, {self.bytes / 1e6:.1f} MB; "
                f"{self.kernels} kernel modules)")


def info() -> CacheInfo:
    """Where the cache lives and what it holds.

        >>> mi.cache.info().entries                      # doctest: +SKIP
        {'search': 2, 'tuning': 3}
    """
    r = root()
    entries = {layer: len(list((r / "results" / layer).glob("*.json"))) for layer in LAYERS}
    total = sum(p.stat().st_size for p in r.rglob("*") if p.is_file()) if r.exists() else 0
    kernels = len(list((r / "kernels").glob("mirage_*.py")))
    return CacheInfo(str(r), entries, total, kernels)


def clear(*, kernels: bool = False) -> int:
    """Delete every stored search and tuning result (and, with ``kernels=True``, the compiled modules).

    Returns the number of entries deleted. The next ``superoptimize`` searches and tunes afresh.

        >>> mi.cache.clear()                             # doctest: +SKIP
        5
    """
    r = root()
    n = sum(len(list((r / "results" / layer).glob("*.json"))) for layer in LAYERS)
    for d in [r / "results"] + ([r / "kernels"] if kernels else []):
        shutil.rmtree(d, ignore_errors=True)
    return n


__all__ = ["info", "clear", "Lookup", "CacheInfo", "CacheHit", "CacheWarning", "device_info", "search_key", "tuning_key",
           "load", "store", "root"]
