#!/usr/bin/env bash
# device call B (2026-11-29 h, nvidia-h200): split-K across blocks, finer splits and block sizes on tuned μGraphs
cd "$(dirname "$0")/.."
exec > >(tee $OUT/log.txt) 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl .whl/extra/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 PATH=$PATH:/usr/local/cuda/bin
for v in MIRAGE_LAB_CACHE TORCHINDUCTOR_CACHE_DIR TRITON_CACHE_DIR NUMBA_CACHE_DIR; do export $v=$(mktemp -d /tmp/c_$v.XXXX); done
P=benchmarks/probes/split_ab_probe.py
echo "== 70B $(date +%T)"
timeout 200 python3 $P --top 1 --threads 128,256 --splits 1,4,8,16 devjobs/dumps/rmsnormw_linear_llama3_70b_qkv_b8.json 2>&1 | grep -v Warn
echo "== gate/up, relu $(date +%T)"
timeout 250 python3 $P --top 1 --threads 128 --splits 1,2,4,8 devjobs/dumps/rmsnormw_linear_llama3_8b_gateup_b16.json devjobs/dumps/gated_mlp_relu_relullama_7b_b16.json 2>&1 | grep -v Warn
echo "== done $(date +%T)"
