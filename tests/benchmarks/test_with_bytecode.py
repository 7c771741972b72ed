"""benchmarks/with_bytecode.sh: a benchmark run as on a pip-installed machine, with Python's bytecode kept."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "with_bytecode.sh"


def test_it_writes_bytecode_once_and_runs_the_command_with_it_kept(tmp_path):
    prefix = tmp_path / "pyc"
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", PYTHONPYCACHEPREFIX=str(prefix), PYTHON=sys.executable)
    code = "import os, sys; print('RUN', sys.dont_write_bytecode, os.environ['PYTHONPYCACHEPREFIX'])"
    r = subprocess.run([str(SCRIPT), sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert f"RUN False {prefix}" in r.stdout                  # the host's "no bytecode" is lifted for the command
    assert "written in" in r.stderr
    written = list(prefix.rglob("*.pyc"))
    assert any("mirage_lab" in str(p) for p in written) and any("numpy" in str(p) for p in written)
