"""Run a test script in a subprocess (with or without the CUDA simulator) and read its RESULTS line."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def run_script(script: Path, args: list[str], tmp: Path, *, simulator: bool, timeout: int = 900) -> dict:
    env = dict(os.environ)
    env["MIRAGE_LAB_CACHE"] = str(tmp / "cache")
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    if simulator:
        env["NUMBA_ENABLE_CUDASIM"] = "1"
    else:
        env.pop("NUMBA_ENABLE_CUDASIM", None)
    r = subprocess.run([sys.executable, str(script), *args], env=env, capture_output=True, text=True,
                       timeout=timeout, cwd=str(ROOT))
    for line in r.stdout.splitlines():
        if line.startswith("RESULTS "):
            return json.loads(line[len("RESULTS "):])
    raise AssertionError(f"{script.name} failed (exit {r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-5000:]}")
