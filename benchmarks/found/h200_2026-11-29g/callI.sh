#!/usr/bin/env bash
# device call I (2026-11-29 g, nvidia-h200): where the one-GPU tuner's host time per variant goes (about 1.7 s a variant in
# the cluster's GPU tasks, call H): py-spy of the README example's superoptimize, main process, every thread
cd "$(dirname "$0")/.."
exec > >(tee $OUT/log.txt) 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl .whl/extra/*.whl .whl/tools/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 PATH=$PATH:/tmp/site/bin
for v in MIRAGE_LAB_CACHE TORCHINDUCTOR_CACHE_DIR TRITON_CACHE_DIR NUMBA_CACHE_DIR; do export $v=$(mktemp -d /tmp/c_$v.XXXX); done
echo "== py-spy of the README example from scratch $(date +%T)"
timeout 110 py-spy record --threads --idle -r 50 -f raw -o $OUT/readme_raw.txt -- python3 benchmarks/cache_hit_bench.py --defaults --runs 1 2>&1 | grep -v "^py-spy> Sampling\|Collected" | tail -5
gzip -f $OUT/readme_raw.txt
echo "== done $(date +%T)"
