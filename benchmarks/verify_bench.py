"""Verifier benchmark: fingerprint time for the full-size seed programs and their fused
μGraphs (numpy CPU path, and the Numba-CUDA path when a GPU is present), and z3
subexpression-oracle throughput, cold and cached.

    python benchmarks/verify_bench.py            # CPU, plus GPU if one is present
    python benchmarks/verify_bench.py --gpu      # insist on the GPU part
    python benchmarks/verify_bench.py --no-cpu --gpu

Timing: wall clock (time.perf_counter) around ``fingerprint_graph`` with random inputs
already generated (on the device for the GPU path, and copied back to the host at the end,
which synchronises); median of ``--repeat`` runs after one warm-up run (which also pays the
CUDA JIT compile, reported separately as "first run"). ``tests=2`` as the verifier's
default. z3 numbers are skipped when z3-solver is not installed (the GPU machine).
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

# BLAS threads must be fixed before numpy loads. On a shared, busy 2-core box multi-threaded
# BLAS spins against other processes and runs 3-10x slower than one thread: default to 1.
if "--threads" in sys.argv:
    _n = sys.argv[sys.argv.index("--threads") + 1]
    for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[_v] = _n

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import mirage_lab as mi  # noqa: E402
from mirage_lab import examples  # noqa: E402
from mirage_lab.verify import fingerprint_graph, get_ops, random_inputs  # noqa: E402


def cases():
    return [
        ("RMSNorm+Linear X[16,4096]·W[4096,4096]", examples.rms_norm_linear_program(16, 4096, 4096),
         examples.rms_norm_linear_fused(16, 4096, 4096)),
        ("GQA Q[2,256,64] K[2,64,4096] V[2,4096,64]", examples.gqa_program(2, 256, 64, 4096),
         examples.gqa_flashdecoding(2, 256, 64, 4096)),
    ]


def _time(fn, repeat: int) -> tuple[float, float]:
    t0 = time.perf_counter()
    fn()
    first = time.perf_counter() - t0
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return first, statistics.median(ts)


def bench_fingerprints(backend: str, repeat: int, tests: int) -> None:
    ops = get_ops(backend)
    print(f"\n## fingerprints, backend={ops.name}, tests={tests}, median of {repeat} after 1 warm-up")
    print("| case | graph | first run (ms) | median (ms) |")
    print("|---|---|---|---|")
    for name, prog, fused in cases():
        t0 = time.perf_counter()
        xs = [ops.asarray(x) for x in random_inputs(prog, tests=tests, seed=0)]
        tin = time.perf_counter() - t0
        outs = {}
        for label, g in (("program", prog), ("fused μGraph", fused)):
            first, med = _time(lambda g=g, label=label: outs.__setitem__(label, fingerprint_graph(g, xs, ops=ops)),
                               repeat)
            print(f"| {name} | {label} | {first * 1e3:.2f} | {med * 1e3:.2f} |")
        same = all((a == b).all() for a, b in zip(outs["program"], outs["fused μGraph"]))
        print(f"|  | (inputs: {tin * 1e3:.1f} ms; program == fused: {same}) | | |")
        assert same, f"{name}: fused μGraph does not fingerprint equal to its program"


def _candidates():
    from mirage_lab.expr import terms as T

    x, w = T.var(0), T.var(1)
    base = [x, w, T.red(128, T.mul(x, w)), T.rms(4096, x), T.red(4096, T.mul(x, w))]
    un = [T.exp, T.square, T.sqrt, T.silu, lambda e: T.red(32, e), lambda e: T.red(4096, e), lambda e: T.rms(4096, e),
          lambda e: T.rms(128, e)]
    bi = [T.add, T.mul, T.div]
    out = set(base)
    for a in base:
        for f in un:
            out.add(f(a))
        for b in base:
            for f in bi:
                out.add(f(a, b))
    return sorted(out, key=str)


def bench_z3() -> None:
    print("\n## z3 subexpression oracle (target: rms_norm(X)@W, 4096 hidden)")
    try:
        import z3  # noqa: F401
    except ImportError:
        print("z3-solver is not installed here: skipped")
        return
    from mirage_lab.expr import SubexprOracle, abstract

    target = abstract(examples.rms_norm_linear_program(16, 4096, 4096).outputs[0])
    cands = _candidates()
    o = SubexprOracle([target])
    t0 = time.perf_counter()
    o.check(cands[0])
    o._ensure_solver()
    build = time.perf_counter() - t0
    t0 = time.perf_counter()
    yes = sum(o.check(e) for e in cands)
    cold = time.perf_counter() - t0
    t0 = time.perf_counter()
    rounds = 20
    for _ in range(rounds):
        for e in cands:
            o.check(e)
    cached = time.perf_counter() - t0
    st = o.stats()
    print(f"- solver build (axioms + target, first query): {build:.3f} s")
    print(f"- cold: {len(cands)} distinct candidates ({yes} pass) in {cold:.3f} s = {len(cands) / cold:.0f} queries/s; "
          f"{st['z3_calls']} reached z3 ({st['z3_unknown']} resource-limit 'unknown' = no), "
          f"z3 time {st['z3_time']:.3f} s = {st['z3_calls'] / max(st['z3_time'], 1e-9):.1f} z3 queries/s")
    print(f"- cached: {rounds * len(cands)} lookups in {cached:.4f} s = {rounds * len(cands) / cached:,.0f} queries/s")


def main() -> None:
    from mirage_lab.gpu.numba_compat import quiet_occupancy_warnings

    quiet_occupancy_warnings()
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpu", action="store_true", help="run the GPU part (fails if no GPU)")
    ap.add_argument("--no-cpu", action="store_true", help="skip the numpy part")
    ap.add_argument("--no-z3", action="store_true")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--tests", type=int, default=2)
    ap.add_argument("--threads", type=int, default=None, help="BLAS/OpenMP threads (set before numpy loads)")
    args = ap.parse_args()
    from mirage_lab.gpu.numba_compat import cuda, gpu_available

    import numpy as np

    print(f"# verify_bench: {platform.node()}, {os.cpu_count()} CPUs, python {platform.python_version()}, "
          f"numpy {np.__version__}, OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}, "
          f"load average {os.getloadavg()[0]:.1f}")
    gpu = gpu_available()
    if gpu:
        name = cuda.get_current_device().name
        print(f"GPU: {name.decode() if isinstance(name, bytes) else name}")
    if not args.no_cpu:
        bench_fingerprints("numpy", args.repeat, args.tests)
    if args.gpu or gpu:
        if not gpu:
            sys.exit("--gpu: no CUDA GPU is usable here")
        bench_fingerprints("cuda", args.repeat, args.tests)
    if not args.no_z3:
        bench_z3()


if __name__ == "__main__":
    main()
