#!/usr/bin/env bash
# device call A (2026-11-29 h, nvidia-h200): split-K across blocks (CodegenOptions.split): GPU tests, A/B on tuned μGraphs
cd "$(dirname "$0")/.."
exec > >(tee $OUT/log.txt) 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl .whl/extra/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 PATH=$PATH:/usr/local/cuda/bin
for v in MIRAGE_LAB_CACHE TORCHINDUCTOR_CACHE_DIR TRITON_CACHE_DIR NUMBA_CACHE_DIR; do export $v=$(mktemp -d /tmp/c_$v.XXXX); done
git log --oneline | head -1; git status --short | head
echo "== gpu tests $(date +%T)"
timeout 200 python3 -m pytest -q -x tests/runtime/test_gpu.py -k "split" -p no:cacheprovider 2>&1 | tail -15
echo "== A/B $(date +%T)"
timeout 330 python3 benchmarks/probes/split_ab_probe.py --top 2 devjobs/dumps/rmsnormw_linear_llama3_70b_qkv_b8.json devjobs/dumps/rmsnormw_linear_llama3_8b_gateup_b16.json devjobs/dumps/residual_rmsnorm_linear_llama3_8b_qkv_b16.json devjobs/dumps/gated_mlp_relu_relullama_7b_b16.json devjobs/dumps/rmsnorm_linear_llama3_8b_qkv_b1.json devjobs/dumps/gated_mlp_silu_llama3_8b_b1.json 2>&1 | grep -v Warning
echo "== done $(date +%T)"
