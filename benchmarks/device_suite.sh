#!/usr/bin/env bash
# The suite on the lent GPU machine, one program per process (suite_bench.py, the user's path), in parts that fit
# a device call: it stops starting programs after BUDGET seconds and resumes from $OUT/suite.jsonl.
#
#   PROGS="gated_mlp_silu_llama3_8b_b1 mqa_decode_falcon7b_b8_kv2048" README=1 bash benchmarks/device_suite.sh
#
# PROGS     suite program names (benchmarks/suite_bench.py --list)
# BUDGET    seconds after which no new program starts (default 480); PT: seconds one program may take (default 150)
# CACHE     the persistent cache (MIRAGE_LAB_CACHE): default an empty one on the host, so that every search runs
#           there as a user's would; a folder carried to the machine (searches made elsewhere) saves device time,
#           and RESULTS.md must then say so
# README=1  first the README example from scratch and from the cache, bytecode kept (cache_hit_bench.py --defaults)
# OUT       where the log, suite.jsonl / suite.md and the tuner dumps (dumps.tgz) go (the device tool sets it)
# The wheels the machine lacks (z3-solver, graphviz, dask, plotly, ...) are read from .whl/ and .whl/extra/.
cd "$(dirname "$0")/.."
T0=$(date +%s)
OUT=${OUT:?set OUT to a folder for the results}
exec > >(tee "$OUT/log.txt") 2>&1
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    .whl/*.whl $(ls .whl/extra/*.whl 2>/dev/null)
fi
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 PATH=$PATH:/usr/local/cuda/bin
for v in TORCHINDUCTOR_CACHE_DIR TRITON_CACHE_DIR NUMBA_CACHE_DIR; do export $v=$(mktemp -d /tmp/c_$v.XXXX); done
git log --oneline | head -1; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
export MIRAGE_LAB_CACHE=${CACHE:-/tmp/mlcache_host}; mkdir -p "$MIRAGE_LAB_CACHE"
mkdir -p "$OUT/dumps"
if [ -n "$README" ]; then
  echo "== README example from scratch, then from the cache (bytecode kept) $(date +%T)"
  (unset MIRAGE_LAB_CACHE; timeout 150 benchmarks/with_bytecode.sh python3 benchmarks/cache_hit_bench.py --defaults \
    --runs 2 2>&1 | grep "^{\|bytecode" | tail -4)
fi
for p in ${PROGS}; do
  if [ $(( $(date +%s) - T0 )) -gt "${BUDGET:-480}" ]; then echo "-- budget spent, not started: $p"; continue; fi
  echo "-- $p $(date +%T)"
  timeout "${PT:-150}" python3 benchmarks/suite_bench.py --only "$p" --search-cap 60 --tune-seconds 30 \
    --skip-max-autotune --dump "$OUT/dumps" --resume "$OUT/suite.jsonl" --out "$OUT/suite.md" >> "$OUT/suite_log.txt" 2>&1
  python3 - "$p" <<'PY'
import json, os, sys
keys = ("returned_us", "tuned_us", "compile_us", "eager_us", "library_us", "copy_floor_us", "winner", "chosen",
        "rel_err", "superoptimize_s", "search_s", "first_candidate_s", "candidates", "vs_compile")
for line in open(os.environ["OUT"] + "/suite.jsonl"):
    r = json.loads(line)
    if r.get("program") == sys.argv[1] and "returned_us" in r:
        print({k: (round(v, 2) if isinstance(v, float) else v) for k, v in r.items() if k in keys})
PY
done
echo "== done $(date +%T)"
tar czf "$OUT/dumps.tgz" -C "$OUT" dumps && rm -rf "$OUT/dumps"
