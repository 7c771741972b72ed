#!/usr/bin/env bash
# Run a benchmark the way a pip-installed machine runs it: with Python's bytecode kept.
#
# The lent GPU host sets PYTHONDONTWRITEBYTECODE=1 and its torch ships no __pycache__, so every new
# process compiles torch's sources again: torch and torch.compile's modules took 13.2 s to import there
# against 4.5 s with bytecode (benchmarks/RESULTS.md, "2026-11-29 (b)"). pip writes bytecode at install,
# so a user's machine imports like the latter. This writes the bytecode once, under PYTHONPYCACHEPREFIX
# (default /tmp/pyc; the installed packages may be read-only), by importing what superoptimize imports,
# then runs the command with the same settings. Report numbers from both configurations.
#
#   benchmarks/with_bytecode.sh python3 benchmarks/cache_hit_bench.py --defaults --runs 2
set -euo pipefail
unset PYTHONDONTWRITEBYTECODE
export PYTHONPYCACHEPREFIX="${PYTHONPYCACHEPREFIX:-/tmp/pyc}"
PY="${PYTHON:-python3}"
export PYTHONPATH="$(cd "$(dirname "$0")/.." && pwd)${PYTHONPATH:+:$PYTHONPATH}"   # this checkout's mirage_lab
SECONDS=0
"$PY" - <<'PYEOF'
import importlib
from mirage_lab.pipeline.contenders import COMPILER_MODULES   # what superoptimize preloads for torch.compile
mods = ["torch", *COMPILER_MODULES, "numba.cuda", "z3", "mirage_lab.runtime.kernel", "mirage_lab.search.generator",
        "mirage_lab.pipeline.autotune"]
for m in mods:
    try:
        importlib.import_module(m)
    except Exception as e:  # a CPU-only box has no Triton: its bytecode is not needed there
        print(f"with_bytecode: {m} not imported ({type(e).__name__})")
PYEOF
echo "with_bytecode: bytecode under $PYTHONPYCACHEPREFIX written in ${SECONDS} s" >&2
exec "$@"
