"""``superoptimize`` from the persistent cache in a new process, and where its seconds go.

Runs the same script in fresh interpreters against one cache folder: the first run fills it
(from scratch), the next ones are cache hits. Each run prints the seconds of ``import
mirage_lab``, of ``import torch`` (which a user's script pays anyway to make its inputs; it
is timed apart and first so that ``superoptimize`` is not charged for it), of the
``superoptimize`` call, of the first call of the result on the program's inputs (GPU only:
it compiles or loads the kernel where the cache hit did not), the process's wall time, and
which heavy modules were loaded. With ``--no-tune`` torch is not imported by the script.

    python benchmarks/cache_hit_bench.py                        # README example, tuned on a GPU
    python benchmarks/cache_hit_bench.py --shape 4x64x64 --no-tune --runs 3   # a CPU box
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_RUN = r"""
import json, sys, time
t0 = time.perf_counter()
import mirage_lab as mi
from mirage_lab import examples as ex
t1 = time.perf_counter()
if TUNE is not False:   # tuning is timed on torch tensors; a CPU user choosing by cost model needs no torch
    import torch
t2 = time.perf_counter()
g = ex.rms_norm_linear_program(*SHAPE)
best = mi.superoptimize(g, tune=TUNE, progress=False, **SECONDS)
t3 = time.perf_counter()
first = None
if TUNE is not False and torch.cuda.is_available():
    xs = [torch.randn(t.dims, device="cuda").to(t.dtype.torch) for t in g.inputs]
    torch.cuda.synchronize()
    t4 = time.perf_counter()
    best(xs)
    torch.cuda.synchronize()
    first = round(time.perf_counter() - t4, 3)
heavy = [m for m in ("torch", "numba", "numba.cuda", "z3", "plotly", "graphviz", "ipywidgets", "tqdm") if m in sys.modules]
print("RESULT " + json.dumps({"import_mirage_lab_s": round(t1 - t0, 3), "import_torch_s": round(t2 - t1, 3),
                              "superoptimize_s": round(t3 - t2, 3), "first_call_s": first,
                              "from_cache": getattr(best, "from_cache", None) is not None, "loaded": heavy}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", default="16x4096x4096", help="RMSNorm+Linear batch x hidden x out (the README's)")
    ap.add_argument("--no-tune", action="store_true", help="superoptimize(tune=False): the cost model picks")
    ap.add_argument("--search-seconds", type=float, default=30.0)
    ap.add_argument("--tune-seconds", type=float, default=30.0)
    ap.add_argument("--defaults", action="store_true",
                    help="pass neither seconds: the README's own `graph.superoptimize()` call")
    ap.add_argument("--runs", type=int, default=3, help="processes in all: the first from scratch, then hits")
    ap.add_argument("--cache", type=Path, default=None, help="cache folder (default: a new temporary one)")
    args = ap.parse_args()
    cache = args.cache or Path(tempfile.mkdtemp(prefix="mirage_lab_cache_"))
    code = (_RUN.replace("SHAPE", repr(tuple(int(v) for v in args.shape.split("x"))))
            .replace("SECONDS", "{}" if args.defaults else
                     repr({"search_seconds": args.search_seconds, "tune_seconds": args.tune_seconds}))
            .replace("TUNE", "False" if args.no_tune else "None"))
    env = dict(os.environ, MIRAGE_LAB_CACHE=str(cache), PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    for i in range(args.runs):
        t0 = time.perf_counter()
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        line = next((ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")), None)
        if line is None:
            sys.exit(f"run {i} failed (exit {r.returncode}):\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}")
        res = json.loads(line[len("RESULT "):])
        print(json.dumps({"run": i, "process_wall_s": round(wall, 2), **res}), flush=True)
    print(json.dumps({"cache": str(cache)}))


if __name__ == "__main__":
    main()
