#!/usr/bin/env bash
# device call G (2026-11-29 h, nvidia-h200-x2): issue 23 - 8 suite programs tuned at once on 1 and 2 GPUs (first 8 planned
# variants of each, compiles cold at every N), with the GPU timeline: what a GPU waits for at N=2
cd "$(dirname "$0")/.."
exec > >(tee $OUT/log.txt) 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl .whl/extra/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
for v in TORCHINDUCTOR_CACHE_DIR TRITON_CACHE_DIR NUMBA_CACHE_DIR; do export $v=$(mktemp -d /tmp/c_$v.XXXX); done
export MIRAGE_LAB_CACHE=/tmp/mlc; cp -r devjobs/mlcache /tmp/mlc
nvidia-smi -L; nproc
P=rmsnorm_linear_llama3_8b_qkv_b1,rmsnormw_linear_llama3_8b_gateup_b16,gated_mlp_silu_llama3_8b_b1,gated_mlp_gelu_gemma_2b_b8,gqa_decode_llama3_8b_b1_kv4096,lora_gpt3_q_r8_b4,softmax_linear_mixtral_router_b64,l2norm_linear_ngpt_4096_qkv_b32
echo "== 1. fixed work 8, 8 programs at once, N=1,2 $(date +%T)"
timeout 290 python3 benchmarks/multi_gpu_bench.py --only "$P" --gpus 1,2 --fixed-work 8 --max-candidates 8 --search-cap 20 \
  --concurrent 8 --json $OUT/fixed8.json --out $OUT/fixed8.md 2>&1 | grep -v -i "warning\|^ *warnings.warn\|distributed\.\|^ \+File\|^Traceback\|BrokenPipe"
echo "== done $(date +%T)"
