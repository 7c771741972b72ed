"""Issue 20: a second ``superoptimize`` of the same program in a new process, from the persistent cache.

Runs the same script twice in fresh interpreters sharing one ``MIRAGE_LAB_CACHE``: the first fills
the cache (search and tuning), the second must return the measured winner "in about a second".
The second prints where its time goes: the interpreter's import of mirage_lab (and torch), the
``superoptimize`` call, and that call's cProfile (top entries by cumulative time), so a slow hit
names its cause.

    python benchmarks/cache_hit_bench.py                       # small RMSNorm+Linear (seconds to fill)
    python benchmarks/cache_hit_bench.py --readme --cache /tmp/c   # the README example (minutes to fill)
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = r'''
import time, sys
t0 = time.perf_counter()
import mirage_lab as mi
t_import = time.perf_counter() - t0
import cProfile, io, json, pstats
g = mi.new_kernel_graph()
X = g.new_input(dims=SHAPE_X, dtype=mi.float16)
W = g.new_input(dims=SHAPE_W, dtype=mi.float16)
g.mark_output(g.matmul(g.rms_norm(X), W))
prof = cProfile.Profile() if PROFILE else None
t1 = time.perf_counter()
if prof: prof.enable()
best = g.superoptimize(**SETTINGS)
if prof: prof.disable()
t_call = time.perf_counter() - t1
top = ""
if prof:
    s = io.StringIO(); pstats.Stats(prof, stream=s).sort_stats("cumulative").print_stats(25); top = s.getvalue()
print(top)
print("RESULTS " + json.dumps({"import_s": t_import, "superoptimize_s": t_call, "total_s": time.perf_counter() - t0,
      "from_cache": best.from_cache, "winner": best.winner, "latency_us": best.latency_us}))
'''


def run(code: str, cache: Path) -> dict:
    env = dict(os.environ, MIRAGE_LAB_CACHE=str(cache), PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=1800)
    res = None
    for line in r.stdout.splitlines():
        if line.startswith("RESULTS "):
            res = json.loads(line[len("RESULTS "):])
    if res is None:
        raise SystemExit(f"the run failed (exit {r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    res["stdout"] = r.stdout
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--readme", action="store_true", help="the README example (16x4096 @ 4096x4096) instead of a small one")
    ap.add_argument("--cache", type=Path, default=None, help="cache folder (default: a fresh temporary one)")
    a = ap.parse_args(argv)
    cache = a.cache or Path(tempfile.mkdtemp(prefix="cache_hit_"))
    if a.readme:
        shapes, settings = ((16, 4096), (4096, 4096)), dict(search_seconds=30, tune_seconds=30)
    else:
        shapes = ((16, 256), (256, 512))
        settings = dict(workers=2, max_kernel_ops=4, max_block_ops=5, griddims=[(16, 1, 1), (32, 1, 1)], franges=[4],
                        tune_seconds=60, max_candidates=2)
    base = SCRIPT.replace("SHAPE_X", repr(shapes[0])).replace("SHAPE_W", repr(shapes[1])).replace("SETTINGS", repr(settings))
    first = run(base.replace("PROFILE", "False"), cache)
    print(f"first (fills the cache): import {first['import_s']:.2f} s, superoptimize {first['superoptimize_s']:.1f} s, "
          f"winner {first['winner']} {first['latency_us']}", flush=True)
    second = run(base.replace("PROFILE", "True"), cache)
    print(second["stdout"].split("RESULTS ")[0][-6000:])
    print(f"second (from the cache: {second['from_cache']}): import {second['import_s']:.2f} s, superoptimize "
          f"{second['superoptimize_s']:.2f} s, process {second['total_s']:.2f} s, winner {second['winner']} "
          f"{second['latency_us']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
