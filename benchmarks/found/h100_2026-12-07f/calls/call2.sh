#!/usr/bin/env bash
cd "$(dirname "$0")/.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl $(ls .whl/extra/*.whl) 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 MIRAGE_LAB_CACHE=/tmp/mlc2
for v in TORCHINDUCTOR_CACHE_DIR TRITON_CACHE_DIR NUMBA_CACHE_DIR; do export $v=$(mktemp -d /tmp/c_$v.XXXX); done
git log --oneline | head -1; nvidia-smi --query-gpu=name --format=csv,noheader
SPLIT_LO=0.45 TUNE=${TUNE:-90} timeout 560 python3 devjobs/allvariants.py residual_rmsnorm_linear_llama3_8b_qkv_b16 mqa_decode_falcon7b_b8_kv2048 gated_mlp_silu_qwen25_0_5b_b64 l2norm_linear_ngpt_4096_qkv_b32 2>&1 | grep -v Warning
