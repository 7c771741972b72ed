#!/usr/bin/env bash
# device call 2 (2026-11-29 f): SASS/registers of staged vs ring lowerings as compiled on the device; suite with ldmatrix option sets (f497496)
cd "$(dirname "$0")/.."
exec > >(tee $OUT/log.txt) 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl .whl/extra/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 PATH=$PATH:/usr/local/cuda/bin
for v in MIRAGE_LAB_CACHE TORCHINDUCTOR_CACHE_DIR TRITON_CACHE_DIR NUMBA_CACHE_DIR; do export $v=$(mktemp -d /tmp/c_$v.XXXX); done
git log --oneline -1 | cut -c1-80; which cuobjdump nvdisasm
echo "== 1. SASS probe $(date +%T)"
timeout 70 python3 devjobs/sass_probe.py
echo "== 2. suite (dumps kept) $(date +%T)"
mkdir -p $OUT/dumps
for p in gated_mlp_silu_phi3_mini_b32 gated_mlp_gelu_gemma_2b_b8 rmsnormw_linear_llama3_70b_qkv_b8 residual_rmsnorm_linear_llama3_8b_qkv_b16; do
  echo "-- $p $(date +%T)"
  timeout 120 python3 benchmarks/suite_bench.py --only "$p" --search-cap 60 --tune-seconds 30 --skip-max-autotune \
    --dump $OUT/dumps --resume $OUT/suite.jsonl --out $OUT/suite.md >> $OUT/suite_log.txt 2>&1
  python3 - "$p" <<'PY'
import json, os, sys
for l in open(os.environ["OUT"] + "/suite.jsonl"):
    r = json.loads(l)
    if r.get("program") == sys.argv[1] and "returned_us" in r:
        print({k: (round(v, 2) if isinstance(v, float) else v) for k, v in r.items() if k in ("program", "returned_us", "tuned_us", "compile_us", "eager_us", "winner", "chosen", "rel_err", "superoptimize_s")})
PY
done
echo "== done $(date +%T)"
