"""Helpers for runtime tests (a unique module name: test folders share one import namespace)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_py(code: str, tmp: Path, *, simulator: bool = True, timeout: int = 600) -> dict:
    """Run ``code`` in a fresh interpreter; it prints one line ``RESULTS <json>``."""
    env = dict(os.environ)
    env["MIRAGE_LAB_CACHE"] = str(tmp / "cache")
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    if simulator:
        env["NUMBA_ENABLE_CUDASIM"] = "1"
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=timeout,
                       cwd=str(tmp))
    for line in r.stdout.splitlines():
        if line.startswith("RESULTS "):
            return json.loads(line[len("RESULTS "):])
    raise AssertionError(f"subprocess failed (exit {r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-5000:]}")
