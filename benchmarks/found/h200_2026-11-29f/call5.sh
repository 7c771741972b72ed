#!/usr/bin/env bash
# device call 5 (2026-11-29 f): register-prefetch depth of streamed W (pipeline_depth_probe) on the dumps of calls 3-4
cd "$(dirname "$0")/.."
exec > >(tee $OUT/log.txt) 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl .whl/extra/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
for v in MIRAGE_LAB_CACHE TORCHINDUCTOR_CACHE_DIR TRITON_CACHE_DIR NUMBA_CACHE_DIR; do export $v=$(mktemp -d /tmp/c_$v.XXXX); done
D3=devjobs/out_call3/dumps D4=devjobs/out_call4/dumps
echo "== 1. depth probe $(date +%T)"
timeout 120 python3 benchmarks/probes/pipeline_depth_probe.py --top 2 --depths 0x1,64x1,64x2,128x3,128x4 --dumps $D3/rmsnormw_linear_llama3_70b_qkv_b8.json
timeout 150 python3 benchmarks/probes/pipeline_depth_probe.py --top 1 --depths 0x1,64x1,64x2,128x3,128x4 \
  --dumps $D4/gated_mlp_silu_llama3_8b_b1.json,$D4/rmsnormw_linear_llama3_8b_gateup_b16.json,$D4/gated_mlp_relu_relullama_7b_b16.json
echo "== done $(date +%T)"
