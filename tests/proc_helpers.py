"""Run Python in a fresh interpreter and read back the one ``RESULTS <json>`` line it prints.

The one subprocess helper of the test suite (pipeline, runtime, codegen and widget tests): a
fresh interpreter is how a test gets the CUDA simulator (numba reads ``NUMBA_ENABLE_CUDASIM``
once, at import), a private kernel cache, or a process without what other tests imported.
``tests/`` is on ``sys.path`` (its conftest is not in a package), so any test imports it:

    from proc_helpers import run_python
    res = run_python("import json; print('RESULTS ' + json.dumps({'ok': True}))", tmp_path)
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Sequence

ROOT = Path(__file__).resolve().parents[1]


def run_python(code: str | Path, tmp: Path, *, args: Sequence[str] = (), simulator: bool = True,
               timeout: int = 600, cwd: Path | None = None) -> dict:
    """Run ``code`` (source text, or a script's ``Path``) with ``args``; return its ``RESULTS`` JSON.

    ``simulator``: under the CUDA simulator, or explicitly not (an inherited
    ``NUMBA_ENABLE_CUDASIM`` is dropped). Kernels are cached under ``tmp/cache``; the
    interpreter runs in ``cwd`` (default ``tmp``) with this checkout first on ``PYTHONPATH``.
    Raises ``AssertionError`` with the output's tail when no ``RESULTS`` line comes.
    """
    env = dict(os.environ, MIRAGE_LAB_CACHE=str(tmp / "cache"))
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    if simulator:
        env["NUMBA_ENABLE_CUDASIM"] = "1"
    else:
        env.pop("NUMBA_ENABLE_CUDASIM", None)
    argv = [str(code)] if isinstance(code, Path) else ["-c", code]
    r = subprocess.run([sys.executable, *argv, *args], env=env, capture_output=True, text=True, timeout=timeout,
                       cwd=str(cwd or tmp))
    for line in r.stdout.splitlines():
        if line.startswith("RESULTS "):
            return json.loads(line[len("RESULTS "):])
    what = code.name if isinstance(code, Path) else "subprocess"
    raise AssertionError(f"{what} failed (exit {r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-5000:]}")
