"""A/B of the verifier's random draws at full shape (Mistral-7B GQA decode b64): torch's CPU sampler and numpy's
PCG64 integers (before) against the SFC64 chunked draws (after), each in a new process; RESULTS.md 2026-12-07 (e).

    python benchmarks/probes/draws_ab.py old; python benchmarks/probes/draws_ab.py new
"""
import sys, time
from pathlib import Path
sys.path[:0] = [str(Path(__file__).resolve().parents[2]), str(Path(__file__).resolve().parents[1])]
import numpy as np, torch
torch.set_num_threads(1)
from suite import by_name
from mirage_lab.verify import float_check, fingerprint
from mirage_lab.verify.field import PQ, FP_DTYPE
g = by_name("gqa_decode_mistral7b_b64_kv1024").build()
def old_draws(graph, seed):
    gen = torch.Generator().manual_seed(int(seed) & 0x7FFF_FFFF_FFFF_FFFF)
    for lo, hi in ((-1.0, 1.0), (-(2.0 ** -8), 2.0 ** -8), (0.5, 1.5)):
        yield [torch.empty(t.dims, dtype=torch.float64).uniform_(lo, hi, generator=gen) for t in graph.inputs]
def old_field(graph, tests, seed):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, PQ, size=(tests,) + tuple(t.dims), dtype=FP_DTYPE) for t in graph.inputs]
which = sys.argv[1]
dr = old_draws if which == "old" else float_check._draws
fi = old_field if which == "old" else (lambda gg, tests, seed: fingerprint.random_inputs(gg, tests, seed))
out = []
for k in range(2):
    t0 = time.perf_counter()
    for xs in dr(g, 3): pass
    t1 = time.perf_counter(); xs = fi(g, 2, 3); t2 = time.perf_counter(); del xs
    out.append((round(t1 - t0, 2), round(t2 - t1, 2)))
print(which, "float draws (3 sets) / field inputs (2 tests), pass 1 and 2:", out)
