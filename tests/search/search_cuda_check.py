"""The search's CUDA array backend against its numpy backend, bit for bit.

Run by test_arrays.py: under the CUDA simulator in a subprocess (``python
search_cuda_check.py tiny`` with ``NUMBA_ENABLE_CUDASIM=1``), and in-process on a GPU
(``small``). Prints one line per failed check and ``CHECKS <n> FAILED <m>`` at the end.
"""
from __future__ import annotations

import sys
import time

import numpy as np


def run_checks(size: str = "tiny") -> tuple[int, list[str]]:
    from mirage_lab import examples as ex
    from mirage_lab.search import generator as G
    from mirage_lab.search.arrays import get_arrays
    from mirage_lab.search.config import SearchConfig
    from mirage_lab.verify.field import PQ

    cu, npa = get_arrays("cuda"), get_arrays("numpy")
    rng = np.random.default_rng(3)
    fails: list[str] = []
    n = 0

    def same(name: str, a, b) -> None:
        nonlocal n
        n += 1
        a, b = np.asarray(npa.to_numpy(a)), cu.to_numpy(b)
        if a.shape != b.shape or not np.array_equal(a, b):
            fails.append(f"{name}: numpy {a.shape} vs cuda {b.shape}")

    x = rng.integers(0, PQ, size=(1, 8, 16, 32), dtype=np.uint16)
    xd = cu.put(x)
    for grid, imap, fmap, fr in [((2, 4, 1), (0, 1, -1), 2, 4), ((8, 1, 1), (0, -1, -1), -1, 1),
                                 ((4, 2, 2), (1, 0, 2), 2, 2), ((2, 1, 1), (-1, -1, -1), 1, 8)]:
        tn, tc = npa.load_view(x, grid, imap, fmap, fr), cu.load_view(xd, grid, imap, fmap, fr)
        same(f"load_view {grid} {imap} {fmap} {fr}", tn, tc)
        post_n = npa.accum("sum", tn, 4, fr, tn.shape[-1], 8)
        post_c = cu.accum("sum", tc, 4, fr, tn.shape[-1], 8)
        same(f"accum sum {grid}", post_n, post_c)
        for omap in [(0, 1, 2), (1, 0, 2), (2, 1, 0)]:
            om = tuple(-1 if grid[a] == 1 else omap[a] for a in range(3))
            out_dims = list(post_n.shape[4:])
            if any(om[a] >= len(out_dims) for a in range(3)):
                continue
            for a in range(3):
                if om[a] >= 0:
                    out_dims[om[a]] *= grid[a]
            same(f"save_full {grid} {om}", npa.save_full(post_n, grid, om, out_dims),
                 cu.save_full(post_c, grid, om, out_dims))
    # a tile shared by every block (size-1 grid axes) saves as a broadcast
    t = rng.integers(0, PQ, size=(1, 1, 1, 1, 4, 8), dtype=np.uint16)
    same("save_full broadcast", npa.save_full(t, (2, 3, 1), (0, 1, -1), (8, 24)), cu.save_full(cu.put(t), (2, 3, 1), (0, 1, -1), (8, 24)))
    a = rng.integers(0, PQ, size=(1, 2, 1, 1, 4, 3, 5), dtype=np.uint16)
    b = rng.integers(0, PQ, size=(1, 1, 3, 1, 1, 5, 6), dtype=np.uint16)
    same("matmul broadcast batch", npa.matmul(a, b), cu.matmul(cu.put(a), cu.put(b)))
    # digests: equal contents, equal digests; one changed value, another digest
    n += 1
    y = x.copy()
    y[0, 7, 15, 31] = (int(y[0, 7, 15, 31]) + 1) % PQ
    if cu.digest(cu.put(x)) != cu.digest(cu.put(x.copy())) or cu.digest(cu.put(x)) == cu.digest(cu.put(y)):
        fails.append("digest")
    # whole subtrees of the search: the same candidates either way
    g = ex.rms_norm_linear_program(2, 32, 32) if size == "tiny" else ex.rms_norm_linear_program(4, 256, 256)
    hits = {}
    for be in ("numpy", "cuda"):
        cfg = SearchConfig.from_args(fingerprint_backend=be, **({"max_block_ops": 6} if size == "tiny" else {}))
        gen = G.Generator(G.Target(g, cfg), cfg)
        tasks = gen.all_tasks()[:1] if size == "tiny" else gen.all_tasks()[:40]
        t0 = time.time()
        hits[be] = [(t.index, repr(h.ops), h.output_perm) for t in tasks for h in gen.run_task(t)]
        print(be, len(hits[be]), "hits", f"{time.time() - t0:.1f}s", flush=True)
    n += 1
    if hits["numpy"] != hits["cuda"] or not hits["numpy"]:
        fails.append(f"search hits differ or are empty: numpy {len(hits['numpy'])}, cuda {len(hits['cuda'])}")
    return n, fails


if __name__ == "__main__":
    n, fails = run_checks(sys.argv[1] if len(sys.argv) > 1 else "tiny")
    for f in fails:
        print("FAIL", f)
    print(f"CHECKS {n} FAILED {len(fails)}")
    sys.exit(1 if fails else 0)
