"""Where one call's time goes: host pieces, device time, wall time of a synchronous call,
and what a plain read of the weights costs (Triton), on the GPU machine.

    python benchmarks/call_path_bench.py [--programs rmsnorm,gqa,decode] [--json out.json]

Device times: ``runtime.profile.time_calls`` (CUDA events around each call, launches queued
behind a sleep, inputs rotated over copies larger than 2 x L2), medians of 300. Host times:
``time.perf_counter`` over 300 calls queued behind a long ``torch.cuda._sleep`` (the GPU never
throttles the host). Wall per synchronous call: median of ``call(); torch.cuda.synchronize()``.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import mirage_lab as mi  # noqa: E402
from mirage_lab.codegen import CodegenOptions  # noqa: E402
from mirage_lab.examples import rms_norm_linear_fused  # noqa: E402
from mirage_lab.pipeline import measuring_inputs, with_block_dim  # noqa: E402
from mirage_lab.runtime.profile import make_copies, relative_error, rotation_copies, time_calls  # noqa: E402

FOUND = Path(__file__).resolve().parent / "found"


def programs() -> dict:
    """name -> (μGraph with its block size, options): the lowerings the e2e runs chose."""
    return {
        "rmsnorm": (with_block_dim(rms_norm_linear_fused(16, 4096, 4096, grid=128, forloop_range=16), 512),
                    CodegenOptions(mma=True, pipeline_words=64)),
        "gqa": (with_block_dim(mi.load(str(FOUND / "gqa_2x256x64x4096__searched_cand0.json")), 256),
                CodegenOptions(mma=True)),
        "decode": (with_block_dim(mi.load(str(FOUND / "gqa_decode_64x1x128x4096__searched_cand0.json")), 128),
                   CodegenOptions()),
    }


def host_us(fn, n: int = 300) -> float:
    """Host µs per ``fn()`` with the GPU busy (nothing the host does waits for it)."""
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    torch.cuda._sleep(60_000 * n)  # ~35 µs of GPU time per call queued first: the host never waits
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    dt = (time.perf_counter() - t0) / n * 1e6
    torch.cuda.synchronize()
    return dt


def wall_sync_us(fn, n: int = 300) -> float:
    """Median wall µs of ``fn(); torch.cuda.synchronize()``."""
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        ts.append((time.perf_counter() - t0) * 1e6)
    return statistics.median(ts)


def bench_program(name: str, g, opts) -> dict:
    print(f"== {name}: {opts.tag()}", flush=True)
    t0 = time.perf_counter()
    k = mi.runtime.compile(g, options=opts)
    mi_in = measuring_inputs(g, seed=0)
    xs = list(mi_in.inputs)
    k(inputs=xs)
    torch.cuda.synchronize()
    print(f"   compiled + first call {time.perf_counter() - t0:.1f} s; inputs {mi_in.policy}", flush=True)
    ref = mi_in.reference[0].cpu()
    res: dict = {"program": name, "options": opts.tag(), "kernels": len(k.kernels)}
    mod = k.module
    sets = make_copies(xs, rotation_copies(xs))
    out = k(inputs=xs, poison=True)[0]
    torch.cuda.synchronize()
    res["rel_err"] = relative_error(out.cpu(), ref)
    res["call_us"] = time_calls([lambda s=s: k(inputs=s) for s in sets], repeats=300).median_us
    graphs = [k.capture(s) for s in sets]
    res["graph_us"] = time_calls([gk.replay for gk in graphs], repeats=300).median_us
    res["wall_sync_us"] = wall_sync_us(lambda: k(inputs=xs))
    res["wall_sync_graph_us"] = wall_sync_us(graphs[0].replay)
    outs = [k(inputs=xs)[0] for _ in range(3)]
    res["fresh_outputs"] = len({o.data_ptr() for o in outs}) == 3 and all(torch.equal(o, outs[0]) for o in outs)
    print(f"   rel err {res['rel_err']:.1e}, call {res['call_us']:.2f} µs, graph {res['graph_us']:.2f}, wall/sync "
          f"{res['wall_sync_us']:.1f} (graph {res['wall_sync_graph_us']:.1f}); launch "
          f"{[getattr(getattr(mod, n).go, '__qualname__', '?') for n in dir(mod) if n.startswith('_launch_k')]}; "
          f"three calls give three equal, distinct outputs: {res['fresh_outputs']}", flush=True)
    del graphs
    dev = xs[0].device
    sp = mod._stream_ptr(dev)
    temps, outs = mod._BUFS.take(dev, sp, True)
    pieces = {
        "check_inputs (remembered set)": lambda: k.check_inputs(xs),
        "check_inputs (full check)": lambda: k._check_inputs_slow(xs),
        "torch.empty(out)": lambda: torch.empty(tuple(g.outputs[0].dims), dtype=xs[0].dtype, device=dev),
        "_stream_ptr": lambda: mod._stream_ptr(dev),
        "is_current_stream_capturing": torch.cuda.is_current_stream_capturing,
        "_BUFS.take + refill": lambda: mod._BUFS.refill(dev, 0, mod._BUFS.take(dev, 0, False)),
        "module.run (launches)": lambda: mod.run(xs),
        "one launch (_launch_kernel_0.go)": (lambda: mod._launch_kernel_0.go(sp, (*xs, *outs, *temps)))
        if len(k.kernels) == 1 else (lambda: None),
        "kernel(inputs)": lambda: k(inputs=xs),
        "graph replay": k.capture(xs).replay,
        "torch tiny op (x.add_(0))": lambda: xs[0].add_(0),
    }
    res["host_us"] = {p: host_us(fn) for p, fn in pieces.items()}
    res["idle_sync_us"] = wall_sync_us(lambda: None)
    res["torch_tiny_op_wall_sync_us"] = wall_sync_us(lambda: xs[0].add_(0))
    for p, v in res["host_us"].items():
        print(f"   host {p}: {v:.2f} µs", flush=True)
    print(f"   idle sync {res['idle_sync_us']:.1f} µs; tiny torch op + sync {res['torch_tiny_op_wall_sync_us']:.1f} µs",
          flush=True)
    return res


def triton_read_rates(mib_list=(32, 64)) -> list[dict]:
    """Device µs of plain reads of ``mib`` MiB (XOR-reduced per program) at several launch shapes."""
    import triton
    import triton.language as tl

    @triton.jit
    def read_xor(x_ptr, out_ptr, n, BLOCK: tl.constexpr, ITERS: tl.constexpr):
        pid = tl.program_id(0)
        acc = tl.zeros([BLOCK], dtype=tl.int32)
        for i in tl.static_range(ITERS):
            offs = (pid * ITERS + i) * BLOCK + tl.arange(0, BLOCK)
            acc ^= tl.load(x_ptr + offs, mask=offs < n, other=0, eviction_policy="evict_first")
        tl.store(out_ptr + pid, tl.xor_sum(acc, 0))

    rows = []
    for mib in mib_list:
        n = mib * 2**20 // 4
        l2 = torch.cuda.get_device_properties(0).L2_cache_size
        copies = max(2, -(-2 * l2 // (n * 4)) + 1)
        bufs = [torch.randint(-2**31, 2**31 - 1, (n,), dtype=torch.int32, device="cuda") for _ in range(copies)]
        best = None
        for block in (1024, 2048, 4096, 8192):
            for iters in (1, 2, 4):
                for warps in (4, 8, 16):
                    grid = triton.cdiv(n, block * iters)
                    out = torch.empty(grid, dtype=torch.int32, device="cuda")
                    calls = [lambda b=b, o=out, gr=grid, bl=block, it=iters, w=warps:
                             read_xor[(gr,)](b, o, n, BLOCK=bl, ITERS=it, num_warps=w) for b in bufs]
                    us = time_calls(calls, repeats=200).median_us
                    r = {"MiB": mib, "block": block, "iters": iters, "warps": warps, "us": us,
                         "TBps": n * 4 / us / 1e6}
                    rows.append(r)
                    if best is None or us < best["us"]:
                        best = r
        tsum = time_calls([lambda b=b: torch.bitwise_xor(b[: n // 2], b[n // 2:]).sum() for b in bufs[:1]],
                          repeats=50).median_us
        print(f"== read {mib} MiB: best Triton {best['us']:.2f} µs ({best['TBps']:.2f} TB/s) at block {best['block']} "
              f"x{best['iters']} w{best['warps']}", flush=True)
        rows.append({"MiB": mib, "best": best, "torch_xor_sum_us_L2warm": tsum})
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--programs", default="rmsnorm,gqa,decode")
    ap.add_argument("--json", default="")
    ap.add_argument("--no-read", action="store_true")
    a = ap.parse_args()
    print(torch.cuda.get_device_name(), flush=True)
    progs = programs()
    out = {"device": torch.cuda.get_device_name(), "programs": [], "reads": []}
    for name in a.programs.split(","):
        if name:
            out["programs"].append(bench_program(name, *progs[name]))
    if not a.no_read:
        out["reads"] = triton_read_rates()
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1))
    print("| program | kernels | call µs | graph µs | wall/sync | wall/sync graph | host kernel(inputs) | idle sync |")
    print("|---|---|---|---|---|---|---|---|")
    for r in out["programs"]:
        print(f"| {r['program']} | {r['kernels']} | {r['call_us']:.2f} | {r['graph_us']:.2f} | {r['wall_sync_us']:.1f} | "
              f"{r['wall_sync_graph_us']:.1f} | {r['host_us']['kernel(inputs)']:.1f} | {r['idle_sync_us']:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
