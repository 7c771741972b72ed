"""Compiled μGraphs callable on torch tensors.

``compile(graph)`` generates the program's module (:mod:`mirage_lab.codegen`), writes it
to ``<cache_dir>/mirage_<hash>.py`` (``~/.cache/mirage_lab/kernels`` unless
``MIRAGE_LAB_CACHE`` or ``XDG_CACHE_HOME`` says otherwise) and imports it. The file is rewritten only when its
text changes, so numba's own ``cache=True`` (which needs a real file) keeps the compiled
kernels between processes.

    >>> import torch, mirage_lab as mi
    >>> from mirage_lab.examples import rms_norm_linear_fused
    >>> k = mi.runtime.compile(rms_norm_linear_fused(16, 4096, 4096))        # doctest: +SKIP
    >>> X = torch.randn(16, 4096, device="cuda", dtype=torch.float16)        # doctest: +SKIP
    >>> W = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)      # doctest: +SKIP
    >>> (O,) = k(inputs=[X, W])                                              # doctest: +SKIP
    >>> O2 = k(inputs=[X, W], graph=True)[0]   # replays a captured CUDA graph  # doctest: +SKIP
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import threading
import weakref
from pathlib import Path
from types import ModuleType
from typing import Any, Sequence

import torch

from ..cpus import usable_cpus
from ..codegen import CODEGEN_VERSION, DEFAULT_OPTIONS, CodegenOptions, GeneratedModule, KernelInfo, generate_module
from ..errors import KernelInputError, MirageLabError
from ..ir.kernel_graph import KernelGraph
from ..bounded import LRUDict
from ..ir.shapes import fmt
from .program import GRAPHS_PER_KERNEL  # CUDA graphs kept per kernel (why 16: there)
from .paths import cache_root, default_cache_dir, simulator_active  # noqa: F401  (their old home)

_LOCK = threading.Lock()
# Bounded: a tuning run compiles hundreds of variants; one compiled kernel holds its module.
_COMPILED: "LRUDict" = LRUDict(256)


def _numpy_hint(x: Any) -> str:
    return " (convert it with torch.from_numpy(x), then .cuda())" if type(x).__module__ == "numpy" else ""


def _import_file(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:  # pragma: no cover
        raise MirageLabError(f"cannot import generated module {path}")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # numba's cache locator looks the module up by name
    spec.loader.exec_module(mod)
    return mod


class CompiledKernel:
    """A μGraph compiled to Numba-CUDA kernels plus torch ops; call it on torch tensors.

    ``kernel(inputs=[...])`` launches on torch's current stream and returns new output
    tensors. ``kernel(inputs=[...], graph=True)`` captures the launch sequence in a CUDA
    graph the first time it sees these input tensors (by address) and replays it after:
    the returned outputs are the graph's static buffers, overwritten by the next replay.
    """

    def __init__(self, graph: KernelGraph, generated: GeneratedModule, module: ModuleType, path: Path | None,
                 graph_hash: str, options: CodegenOptions = DEFAULT_OPTIONS) -> None:
        self.graph = graph
        self.options = options
        self.generated = generated
        self.module = module
        self.path = path
        self.hash = graph_hash
        self.simulator = simulator_active()
        self._graphs: LRUDict = LRUDict(GRAPHS_PER_KERNEL)   # by input data pointers
        self._specs = [(torch.Size(t.dims), t.dtype.torch) for t in graph.inputs]
        self._memo: tuple[list[tuple[Any, int, int]], list[torch.Tensor]] | None = None  # the last valid input set
        self._run = module.run

    @property
    def source(self) -> str:
        """The generated module's Python source."""
        return self.generated.source

    @property
    def kernels(self) -> list[KernelInfo]:
        return self.generated.kernels

    # ------------------------------------------------------------------ inputs
    def check_inputs(self, inputs: Any) -> list[torch.Tensor]:
        """Validate ``inputs`` (count, shape, dtype, device); return them contiguous and 16-byte aligned.

        Checked once per input set: the tensors last found valid as they are (no copy needed)
        are remembered by identity, version counter and data pointer, so calling again on
        them costs three reads per tensor; anything done to a tensor in place (a write,
        ``t_()``, ``resize_()``, ``set_()``) bumps its version and brings the full check back.
        """
        memo = self._memo
        if memo is not None and type(inputs) in (list, tuple) and len(inputs) == len(memo[0]):
            for x, (ref, version, ptr) in zip(inputs, memo[0]):
                if ref() is not x or x._version != version or x.data_ptr() != ptr:
                    break
            else:
                return memo[1]
        # the common case (plain CUDA tensors, right shapes, contiguous, aligned, one device) in a
        # few attribute reads per tensor, remembered as it goes; anything else takes the path
        # that says what is wrong or fixes it (a copy for non-contiguous or misaligned tensors)
        if not self.simulator and type(inputs) in (list, tuple) and len(inputs) == len(self._specs):
            dev = -2
            seen = []
            for x, (dims, dt) in zip(inputs, self._specs):
                if type(x) is not torch.Tensor or x.dtype is not dt or x.shape != dims or not x.is_cuda:
                    break
                ptr = x.data_ptr()
                d = x.get_device()
                if ptr & 15 or not x.is_contiguous() or (dev != d and dev != -2):
                    break
                dev = d
                seen.append((weakref.ref(x), x._version, ptr))
            else:
                xs = list(inputs)
                self._memo = (seen, xs)
                return xs
        return self._check_inputs_slow(inputs)

    def _check_inputs_slow(self, inputs: Any) -> list[torch.Tensor]:
        g = self.graph
        if inputs is None:
            raise KernelInputError(f"this μGraph takes {len(g.inputs)} inputs: call it as kernel(inputs=[...])")
        if isinstance(inputs, torch.Tensor) or not isinstance(inputs, (list, tuple)):
            raise KernelInputError(f"inputs must be a list of torch tensors, got {type(inputs).__name__}"
                                   f"{_numpy_hint(inputs)}; call it as kernel(inputs=[x, ...])")
        if len(inputs) != len(g.inputs):
            decl = ", ".join(f"{t.dtype.name}{fmt(t.dims)}" for t in g.inputs)
            raise KernelInputError(f"this μGraph takes {len(g.inputs)} inputs ({decl}) but got {len(inputs)}")
        for i, x in enumerate(inputs):
            if not isinstance(x, torch.Tensor):
                raise KernelInputError(f"input {i} must be a torch.Tensor, got {type(x).__name__}{_numpy_hint(x)}")
        for i, (x, t) in enumerate(zip(inputs, g.inputs)):
            if tuple(x.shape) != t.dims:
                raise KernelInputError(f"input {i} has shape {fmt(tuple(x.shape))} but the μGraph declares {fmt(t.dims)}")
            if x.dtype != t.dtype.torch:
                raise KernelInputError(f"input {i} has dtype {x.dtype} but the μGraph declares {t.dtype.torch}")
        out = []
        dev = None
        for i, x in enumerate(inputs):
            if self.simulator:
                if x.device.type != "cpu":
                    raise KernelInputError(f"input {i} is on {x.device}; under the CUDA simulator inputs live on the CPU")
            elif x.device.type != "cuda":
                raise KernelInputError(
                    f"input {i} is on {x.device}; compiled μGraphs run on CUDA tensors (move it with .cuda())")
            if dev is None:
                dev = x.device
            elif x.device != dev:
                raise KernelInputError(f"inputs are on different devices ({dev} and {x.device})")
            if not x.is_contiguous():
                x = x.contiguous()
            if x.data_ptr() % 16:
                x = x.clone()  # 16-byte vector loads need aligned rows
            out.append(x)
        return out

    # ------------------------------------------------------------------ calls
    def __call__(self, inputs: Sequence[torch.Tensor] | None = None, *, graph: bool = False,
                 poison: bool = False) -> list[torch.Tensor]:
        """Run on ``inputs``; ``poison=True`` NaN-fills outputs first (to catch unwritten elements)."""
        xs = self.check_inputs(inputs)
        if graph and not self.simulator:
            key = tuple([x.data_ptr() for x in xs])  # shapes and dtypes are fixed by the check
            gk = self._graphs.get(key)
            if gk is None:
                gk = self._graphs[key] = GraphedKernel(self, xs)
            return gk.replay()
        return self._run(xs, poison)

    def run_unchecked(self, inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """Launch without validation (inputs already checked): the profiler's eager path."""
        return self.module.run(inputs)

    def capture(self, inputs: Sequence[torch.Tensor]) -> "GraphedKernel":
        """Capture the launch sequence on these exact input tensors (update them in place, then replay)."""
        return GraphedKernel(self, self.check_inputs(inputs))

    def resource_report(self) -> list[dict[str, Any]]:
        """Registers, shared memory and local memory per generated kernel (real GPU only)."""
        rows = []
        for info in self.kernels:
            kern = getattr(self.module, info.name)
            row: dict[str, Any] = {"kernel": info.name, "grid": info.grid, "threads": info.threads,
                                   "smem_pool_bytes": 4 * info.pool_floats,
                                   "scratch_bytes": 4 * info.scratch_floats, "streamed_inputs": info.streamed_inputs}
            if not self.simulator:
                ovs = list(getattr(kern, "overloads", {}).values())
                if not ovs:
                    row["error"] = "not launched yet: call the kernel once first"
                else:
                    ov = ovs[0]  # numba _Kernel: what ptxas and the driver report
                    row["regs_per_thread"] = ov.regs_per_thread
                    row["local_bytes_per_thread"] = ov.local_mem_per_thread
                    row["shared_bytes"] = ov.shared_mem_per_block
                    row["max_threads_per_block"] = ov.max_threads_per_block
            rows.append(row)
        return rows

    def __repr__(self) -> str:
        return (f"CompiledKernel({len(self.kernels)} generated kernel(s), hash {self.hash[:12]}, "
                f"{'simulator' if self.simulator else 'cuda'}, {self.path})")


class GraphedKernel:
    """A compiled μGraph's launches captured in a torch CUDA graph on static input tensors."""

    def __init__(self, kernel: CompiledKernel, inputs: list[torch.Tensor]) -> None:
        if kernel.simulator:
            raise MirageLabError("CUDA graphs need a real GPU; the CUDA simulator cannot capture them")
        self.kernel = kernel
        self.inputs = inputs
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm up: loads the modules outside the capture
            for _ in range(2):
                kernel.module.run(inputs)
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.outputs = kernel.module.run(inputs)
        torch.cuda.synchronize()

    def replay(self) -> list[torch.Tensor]:
        self.graph.replay()
        return self.outputs


def compile(graph: KernelGraph, *, cache_dir: str | os.PathLike | None = None,  # noqa: A001
            options: CodegenOptions | None = None) -> CompiledKernel:
    """Generate, cache on disk and import the kernels of ``graph``.

    >>> from mirage_lab.examples import rms_norm_linear_fused
    >>> k = compile(rms_norm_linear_fused(4, 256, 256, grid=8, forloop_range=4))   # doctest: +SKIP
    >>> k.kernels[0].grid                                                        # doctest: +SKIP
    (8, 1, 1)
    """
    if not isinstance(graph, KernelGraph):
        raise MirageLabError(f"runtime.compile: expected a KernelGraph, got {type(graph).__name__}")
    opts = options or DEFAULT_OPTIONS
    h = graph.content_hash()
    sim = simulator_active()
    key = f"{h}:{sim}:{cache_dir}:{opts.tag()}"
    with _LOCK:
        if key in _COMPILED:
            return _COMPILED[key]
        gen = generate_module(graph, options=opts)
        d = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        d.mkdir(parents=True, exist_ok=True)
        tag = hashlib.sha256(f"{h}:{CODEGEN_VERSION}:{opts.tag()}".encode()).hexdigest()[:20]
        path = d / f"mirage_{tag}.py"
        if not path.exists() or path.read_text() != gen.source:
            tmp = path.with_suffix(f".tmp{os.getpid()}")
            tmp.write_text(gen.source)
            os.replace(tmp, path)  # atomic: a concurrent process never imports half a file
        mod = _import_file(path, f"mirage_lab_kernels_{tag}")
        ck = CompiledKernel(graph, gen, mod, path, h, opts)
        _COMPILED[key] = ck
        return ck


_BY_GRAPH: "weakref.WeakKeyDictionary[KernelGraph, dict[tuple, CompiledKernel]]" = weakref.WeakKeyDictionary()


def run_graph(graph: KernelGraph, inputs: Sequence[torch.Tensor] | None = None, /, *,
              options: CodegenOptions | None = None, **kw: Any) -> list[torch.Tensor]:
    """``graph(inputs=[...])``: compile (once per process, graph and options) and call.

    Keyword arguments are the compiled kernel's (``graph=True`` replays a CUDA graph,
    ``poison=True``). The compiled kernel is remembered per graph object and options, so
    repeated calls skip hashing the graph; a graph that gained ops or outputs since is
    compiled again.

    >>> run_graph(g, [X, W], graph=True)        # doctest: +SKIP
    """
    opts = options or DEFAULT_OPTIONS
    key = (len(graph.ops), len(graph.outputs), opts, simulator_active())
    per = _BY_GRAPH.get(graph)
    if per is None:
        per = _BY_GRAPH[graph] = {}
    k = per.get(key)
    if k is None:
        k = per[key] = compile(graph, options=opts)
    return k(inputs, **kw)


def compile_and_launch(args: tuple[Any, str, str | None, tuple]) -> tuple[Any, float, str | None]:
    """In a fresh process: load a μGraph from JSON, compile it and launch it once on small random inputs.

    ``args`` = ``(key, graph_json, cache_dir, options_tuple)``; returns ``(key, seconds,
    error_or_None)``. The launch makes numba compile every kernel for the exact argument
    types the runtime uses and write them to its on-disk cache, where the parent process
    then finds them (:func:`precompile`, the pipeline's autotuner).
    """
    import time as _time

    from ..ir.serialize import from_json

    key, text, cache_dir, opts = args
    t0 = _time.perf_counter()
    try:
        g = from_json(text)
        k = compile(g, cache_dir=cache_dir, options=CodegenOptions(*opts))
        dev = "cpu" if k.simulator else "cuda"
        xs = [(torch.randn(t.dims, device=dev) * 0.05).to(t.dtype.torch) for t in g.inputs]
        k(inputs=xs)
        if dev == "cuda":
            torch.cuda.synchronize()
        return key, _time.perf_counter() - t0, None
    except Exception as e:  # reported to the caller, who decides
        return key, _time.perf_counter() - t0, f"{type(e).__name__}: {e}"[:1000]


def precompile(graphs: Sequence[KernelGraph | tuple[KernelGraph, CodegenOptions]], *, workers: int | None = None,
               cache_dir: str | os.PathLike | None = None) -> list[tuple[str, float, str | None]]:
    """Compile many μGraphs' kernels in parallel processes into the on-disk cache.

    numba compiles one large generated kernel in tens of seconds, single-threaded; a pool
    of processes fills the cache so that later ``compile(graph)`` calls load instead.
    Returns ``(content_hash, seconds, error_or_None)`` per graph.

    >>> precompile([g1, g2], workers=8)        # doctest: +SKIP
    """
    jobs = []
    for item in graphs:
        g, o = item if isinstance(item, tuple) else (item, DEFAULT_OPTIONS)
        jobs.append((g.content_hash(), g.to_json(), None if cache_dir is None else str(cache_dir), o.astuple()))
    if not jobs:
        return []
    n = workers or min(len(jobs), usable_cpus())
    if n <= 1:
        return [compile_and_launch(j) for j in jobs]
    from ..search.lifetime import spawn_pool

    with spawn_pool(n) as pool:
        return pool.map(compile_and_launch, jobs, chunksize=1)
