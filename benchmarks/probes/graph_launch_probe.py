"""Probe: a module's launches as one instantiated CUDA graph whose kernel-node arguments are
updated every call (cuGraphExecKernelNodeSetParams) and launched once (cuGraphLaunch), against
one cuLaunchKernel per kernel. Host µs per call and wall per synchronous call, on the GPU machine.

    python benchmarks/probes/graph_launch_probe.py
"""
from __future__ import annotations

import ctypes
import sys
from pathlib import Path

import torch
from cuda.bindings import driver as drv

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository (mirage_lab)

import mirage_lab as mi  # noqa: E402
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: call_path_bench
from call_path_bench import host_us, programs, wall_sync_us  # noqa: E402
from mirage_lab.pipeline import measuring_inputs  # noqa: E402


def ok(res, what):
    err = res[0] if isinstance(res, tuple) else res
    if err != drv.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"{what}: {err}")
    return res[1] if isinstance(res, tuple) and len(res) == 2 else res


def graph_launcher(mod, kernel_names, raw: bool):
    """One graph with a kernel node per launcher (in order); returns go(sptr, [tensors per kernel])."""
    graph = ok(drv.cuGraphCreate(0), "cuGraphCreate")
    nodes, structs, slots = [], [], []
    prev = []
    for name in kernel_names:
        vals, params, args = getattr(mod, name).go.keep
        p = drv.CUDA_KERNEL_NODE_PARAMS()
        # numba-cuda loads modules as libraries: its handle may be a CUkernel, which cuLaunchKernel
        # takes as it is but a graph node wants as its CUfunction in the current context
        err, fn = drv.cuKernelGetFunction(drv.CUkernel(args[0].value))
        p.func = fn if err == drv.CUresult.CUDA_SUCCESS else drv.CUfunction(args[0].value)
        p.gridDimX, p.gridDimY, p.gridDimZ, p.blockDimX, p.blockDimY, p.blockDimZ, p.sharedMemBytes = \
            (a.value for a in args[1:8])
        p.kernelParams = ctypes.addressof(params)
        node = ok(drv.cuGraphAddKernelNode(graph, prev, len(prev), p), f"cuGraphAddKernelNode ({err})")
        nodes.append(node)
        structs.append(p)
        slots.append((vals, range(4, len(vals), 7)))
        prev = [node]
    exe = ok(drv.cuGraphInstantiate(graph, 0), "cuGraphInstantiate")
    streams = {}
    if raw:  # the per-call driver calls through ctypes on the same structs
        lib = ctypes.CDLL("libcuda.so.1")
        setp = lib["cuGraphExecKernelNodeSetParams_v2"]
        launch = lib["cuGraphLaunch"]
        cexe = ctypes.c_void_p(int(exe))
        refs = [(ctypes.c_void_p(p.getPtr()), ctypes.c_void_p(int(n))) for p, n in zip(structs, nodes)]

        def go(sptr, tensor_lists):
            for (vals, sl), ts, (pp, node) in zip(slots, tensor_lists, refs):
                for j, t in zip(sl, ts):
                    vals[j] = t.data_ptr()
                r = setp(cexe, node, pp)
                if r:
                    raise RuntimeError(f"SetParams: {r}")
            s = streams.get(sptr)
            if s is None:
                s = streams[sptr] = ctypes.c_void_p(sptr)
            r = launch(cexe, s)
            if r:
                raise RuntimeError(f"cuGraphLaunch: {r}")
    else:
        def go(sptr, tensor_lists):
            for (vals, sl), ts, p, node in zip(slots, tensor_lists, structs, nodes):
                for j, t in zip(sl, ts):
                    vals[j] = t.data_ptr()
                ok(drv.cuGraphExecKernelNodeSetParams(exe, node, p), "SetParams")
            s = streams.get(sptr)
            if s is None:
                s = streams[sptr] = drv.CUstream(sptr)
            ok(drv.cuGraphLaunch(exe, s), "cuGraphLaunch")

    go.keep = (graph, exe, structs, nodes)
    return go


def main() -> int:
    for name, (g, opts) in programs().items():
        k = mi.runtime.compile(g, options=opts)
        xs = list(measuring_inputs(g, seed=0).inputs)
        (ref,) = k(inputs=xs)
        mod = k.module
        names = [f"_launch_kernel_{i}" for i in range(len(k.kernels))]
        sp = mod._stream_ptr(xs[0].device)
        temps, outs = mod._BUFS.take(xs[0].device, sp, True)
        if len(names) == 1:  # the arguments of each kernel, as the generated run() passes them
            lists = [(*xs, *outs, temps[0])]
        else:  # the two-kernel attention modules: (q, k, v, t3, t4, s0), (t3, t4, out, s1)
            lists = [(*xs, temps[0], temps[1], temps[2]), (temps[0], temps[1], outs[0], temps[3])]
        plain = lambda: [getattr(mod, n).go(sp, a) for n, a in zip(names, lists)]  # noqa: E731
        row = [f"{name}: {len(names)} kernel(s)"]
        for raw in (False, True):
            try:
                gl = graph_launcher(mod, names, raw)
            except Exception as e:
                row.append(f"graph launcher (raw={raw}) failed: {e}")
                continue
            outs[0].fill_(float("nan"))
            gl(sp, lists)
            torch.cuda.synchronize()
            row.append(f"raw={raw}: equal {torch.equal(outs[0], ref)}, host {host_us(lambda: gl(sp, lists)):.1f}, "
                       f"wall/sync {wall_sync_us(lambda: gl(sp, lists)):.1f}")
        outs[0].fill_(float("nan"))
        plain()
        torch.cuda.synchronize()
        row.append(f"plain: equal {torch.equal(outs[0], ref)}, host {host_us(plain):.1f}, wall/sync {wall_sync_us(plain):.1f}")
        print(" | ".join(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
