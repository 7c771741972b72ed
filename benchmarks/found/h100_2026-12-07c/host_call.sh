#!/usr/bin/env bash
# device call (2026-12-07, eleventh session): suite programs on the user's path, searches on the host (16 cores) from an empty cache
# usage: PROGS="a b c" bash devjobs/suite_call.sh ; stops starting programs after BUDGET seconds
cd "$(dirname "$0")/.."
T0=$(date +%s)
exec > >(tee $OUT/log.txt) 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl .whl/extra/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 PATH=$PATH:/usr/local/cuda/bin
for v in TORCHINDUCTOR_CACHE_DIR TRITON_CACHE_DIR NUMBA_CACHE_DIR; do export $v=$(mktemp -d /tmp/c_$v.XXXX); done
git log --oneline | head -1; git status --short | grep -v devjobs | head; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
export MIRAGE_LAB_CACHE=/tmp/mlcache_host; mkdir -p $MIRAGE_LAB_CACHE
mkdir -p $OUT/dumps
run_one() {  # $1 program, $2 suite_bench.py of the tree to run
  local p=$1
  echo "-- $p $(date +%T) ($2)"
  timeout ${PT:-100} python3 $2 --only "$p" --search-cap 60 --tune-seconds 30 --skip-max-autotune \
    --dump $OUT/dumps --resume $OUT/suite.jsonl --out $OUT/suite.md >> $OUT/suite_log.txt 2>&1
}
if [ -n "$README" ]; then
  echo "== README example from scratch, then from the cache (bytecode kept) $(date +%T)"
  (unset MIRAGE_LAB_CACHE; timeout 150 benchmarks/with_bytecode.sh python3 benchmarks/cache_hit_bench.py --defaults --runs 2 2>&1 | grep "^{\|bytecode" | tail -4)
fi
for p in ${PROGS}; do
  if [ $(( $(date +%s) - T0 )) -gt ${BUDGET:-480} ]; then echo "-- budget spent, not started: $p"; continue; fi
  run_one $p benchmarks/suite_bench.py
  python3 - "$p" <<'PY'
import json, os, sys
for l in open(os.environ["OUT"] + "/suite.jsonl"):
    r = json.loads(l)
    if r.get("program") == sys.argv[1] and "returned_us" in r:
        print({k: (round(v, 2) if isinstance(v, float) else v) for k, v in r.items() if k in ("returned_us", "tuned_us", "compile_us", "eager_us", "library_us", "copy_floor_us", "winner", "chosen", "rel_err", "superoptimize_s", "search_s", "candidates", "vs_compile")})
PY
done
echo "== done $(date +%T)"
tar czf $OUT/dumps.tgz -C $OUT dumps && rm -rf $OUT/dumps
