#!/usr/bin/env bash
# device call 6 (2026-11-29 f): the final tree on the user's path (README from scratch + cache); LLaMA-3 70B's grid-320 candidate at prefetch depths; one suite program with the H200 cost model
cd "$(dirname "$0")/.."
exec > >(tee $OUT/log.txt) 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl .whl/extra/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
for v in MIRAGE_LAB_CACHE TORCHINDUCTOR_CACHE_DIR TRITON_CACHE_DIR NUMBA_CACHE_DIR; do export $v=$(mktemp -d /tmp/c_$v.XXXX); done
sha1sum mirage_lab/pipeline/cost_model.py mirage_lab/pipeline/variants.py | cut -c1-12
echo "== 1. README example from scratch, then a cache hit (bytecode kept) $(date +%T)"
timeout 90 benchmarks/with_bytecode.sh python3 benchmarks/cache_hit_bench.py --defaults --runs 2
echo "== 2. depth probe, LLaMA-3 70B grid 320 $(date +%T)"
timeout 45 python3 benchmarks/probes/pipeline_depth_probe.py --top 30 --variants 6:128,6:256 --depths 0x1,64x1,64x2 \
  --dumps devjobs/out_call3/dumps/rmsnormw_linear_llama3_70b_qkv_b8.json 2>&1 | grep -v Warning
echo "== 3. suite $(date +%T)"
p=gated_mlp_gelu_gemma_2b_b8
timeout 100 python3 benchmarks/suite_bench.py --only "$p" --search-cap 60 --tune-seconds 30 --skip-max-autotune \
  --resume $OUT/suite.jsonl --out $OUT/suite.md >> $OUT/suite_log.txt 2>&1
python3 - "$p" <<'PY'
import json, os, sys
for l in open(os.environ["OUT"] + "/suite.jsonl"):
    r = json.loads(l)
    if r.get("program") == sys.argv[1] and "returned_us" in r:
        print({k: (round(v, 2) if isinstance(v, float) else v) for k, v in r.items() if k in ("program", "returned_us", "tuned_us", "compile_us", "eager_us", "winner", "chosen", "rel_err", "superoptimize_s", "rho")})
PY
echo "== done $(date +%T)"
