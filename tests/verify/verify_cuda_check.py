"""Backend agreement checks: the Numba-CUDA ops against the numpy ops, bit for bit.

Run by test_cuda.py: under the CUDA simulator in a subprocess (``python
verify_cuda_check.py tiny`` with ``NUMBA_ENABLE_CUDASIM=1``), and in-process on a real GPU.
Prints one line per failed check and ``CHECKS <n> FAILED <m>`` at the end.
"""
from __future__ import annotations

import sys
import time

import numpy as np


def run_checks(size: str = "tiny", verbose: bool = False) -> tuple[int, list[str]]:
    from mirage_lab.verify import fingerprint_graph, get_ops, match_outputs, random_inputs
    from mirage_lab.verify.field import ACCUM_KINDS, PQ

    import verify_graphs as vg

    cu, npo = get_ops("cuda"), get_ops("numpy")
    rng = np.random.default_rng(5)
    failures: list[str] = []
    n = 0

    def same(name: str, f) -> None:
        nonlocal n
        n += 1
        a = npo.to_numpy(f(npo))
        b = cu.to_numpy(f(cu))
        if a.shape != b.shape or not np.array_equal(a, b):
            failures.append(f"{name}: numpy {a.shape} vs cuda {b.shape}, equal={a.shape == b.shape and np.array_equal(a, b)}")

    def r(*shape):
        return rng.integers(0, PQ, size=shape, dtype=np.uint16)

    x, y = r(2, 3, 4, 8), r(2, 1, 4, 1)
    for op in ("exp", "silu", "gelu", "relu", "sqrt", "square", "inv"):
        same(f"unary {op}", lambda o, op=op: o.unary(op, x))
    same("clamp", lambda o: o.unary("clamp", x, {"lo": -1.0, "hi": 2.0}))
    same("copy_view", lambda o: o.copy_view(o.asarray(x), [4, 2, 3], [1, 0, 8]))
    same("mul_scalar", lambda o: o.unary("mul_scalar", x, {"scalar": 0.125}))
    for op in ("add", "sub", "mul", "div", "pow"):
        same(f"binary {op} (broadcast)", lambda o, op=op: o.binary(op, x, y))
        same(f"binary {op} (broadcast, swapped)", lambda o, op=op: o.binary(op, y, x))
    # Operands are drawn once, outside the lambdas: both backends must see the same data.
    m1, m2, m3, m4 = r(2, 3, 4, 16), r(2, 1, 16, 5), r(1, 2, 700), r(1, 700, 3)
    same("matmul batched+broadcast", lambda o: o.matmul(m1, m2))
    same("matmul long K", lambda o: o.matmul(m3, m4))
    for ax in (-1, -2, 1):
        same(f"reduce_sum axis {ax}", lambda o, ax=ax: o.reduce_sum(x, ax))
    same("rms_norm", lambda o: o.rms_norm(x))
    c1, a1, a2 = r(2, 1, 4, 3), r(2, 3, 4, 2, 8), r(2, 1, 1, 2, 8)
    same("concat", lambda o: o.concat(x, c1, -1))
    for kind in ACCUM_KINDS:
        same(f"accum {kind}", lambda o, kind=kind: o.accum(kind, a1, frange=4, dimx=4))
        same(f"accum {kind} replicated", lambda o, kind=kind: o.accum(kind, a2, frange=4, dimx=4))
    for dims, grid, imap, fmap, fr in [((8, 16), (4, 1, 1), (1, -1, -1), 0, 2), ((8, 16), (4, 1, 1), (-1, -1, -1), 1, 4),
                                       ((4, 8, 16), (2, 4, 1), (0, 2, -1), 2, 2), ((2, 8, 8), (2, 2, 2), (0, -1, 1), -1, 1)]:
        src = r(2, *dims)
        same(f"gather {dims} {grid} {imap} {fmap}", lambda o, src=src, a=(grid, imap, fmap, fr): o.gather_tiles(src, *a))
    s1, s2 = r(2, 8, 2, 4, 4), r(2, 1, 2, 4)
    same("scatter", lambda o: o.scatter_tiles(s1, (2, 2, 2), (0, 1, 2), (4, 8, 8)))
    same("scatter replicated", lambda o: o.scatter_tiles(s2, (4, 1, 1), (1, -1, -1), (2, 16)))
    same("broadcast_to", lambda o: o.broadcast_to(y, (2, 3, 4, 8)))

    for name, (mp, mf) in vg.pairs(size).items():
        t0 = time.perf_counter()
        xs = random_inputs(mp(), tests=2, seed=n)
        on_cuda = []
        for g in (mp(), mf()):
            n += 1
            a = fingerprint_graph(g, xs, backend="numpy")
            b = fingerprint_graph(g, xs, backend="cuda")
            on_cuda.append(b)
            if not all(u.shape == v.shape and np.array_equal(u, v) for u, v in zip(a, b)):
                failures.append(f"graph {name}: backends differ")
        n += 1
        if match_outputs(on_cuda[0], on_cuda[1]) is None:  # no false negative on the GPU path either
            failures.append(f"graph {name}: program and fused μGraph differ on the cuda backend")
        if verbose:
            print(f"{name}: {time.perf_counter() - t0:.2f}s", flush=True)
    return n, failures


if __name__ == "__main__":
    n, fails = run_checks(sys.argv[1] if len(sys.argv) > 1 else "tiny", verbose="-v" in sys.argv)
    for f in fails:
        print("FAIL", f)
    print(f"CHECKS {n} FAILED {len(fails)}")
    sys.exit(1 if fails else 0)
