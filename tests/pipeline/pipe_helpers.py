"""Helpers for pipeline tests (a unique module name: test folders share one import namespace)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# the search settings that keep a superoptimize of a small RMSNorm + Linear to seconds
SMALL_SEARCH = dict(workers=1, max_kernel_ops=4, max_block_ops=5, griddims=[(4, 1, 1)], franges=[4])


def run_sim(code: str, tmp: Path, timeout: int = 900) -> dict:
    """Run ``code`` in a fresh interpreter under the CUDA simulator; it prints ``RESULTS <json>``."""
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", MIRAGE_LAB_CACHE=str(tmp / "cache"))
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=timeout,
                       cwd=str(tmp))
    for line in r.stdout.splitlines():
        if line.startswith("RESULTS "):
            return json.loads(line[len("RESULTS "):])
    raise AssertionError(f"subprocess failed (exit {r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-5000:]}")
