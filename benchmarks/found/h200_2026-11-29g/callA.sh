#!/usr/bin/env bash
# device call A (2026-11-29 g, nvidia-h200-x2): issue 23 - tuning on 1 and 2 GPUs at fixed work, 8 programs at once; a worker killed mid-run
cd "$(dirname "$0")/.."
exec > >(tee $OUT/log.txt) 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl .whl/extra/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
for v in TORCHINDUCTOR_CACHE_DIR TRITON_CACHE_DIR NUMBA_CACHE_DIR; do export $v=$(mktemp -d /tmp/c_$v.XXXX); done
export MIRAGE_LAB_CACHE=/tmp/mlc; cp -r devjobs/mlcache /tmp/mlc
nvidia-smi -L; nproc; sha1sum mirage_lab/pipeline/distributed.py benchmarks/multi_gpu_bench.py | cut -c1-12
P=rmsnorm_linear_llama3_8b_qkv_b1,rmsnormw_linear_llama3_8b_gateup_b16,gated_mlp_silu_llama3_8b_b1,gated_mlp_gelu_gemma_2b_b8,gqa_decode_llama3_8b_b1_kv4096,lora_gpt3_q_r8_b4,softmax_linear_mixtral_router_b64,l2norm_linear_ngpt_4096_qkv_b32
echo "== 1. fixed work, 8 programs at once, N=1,2 $(date +%T)"
timeout 330 python3 benchmarks/multi_gpu_bench.py --only "$P" --gpus 1,2 --fixed-work 8 --max-candidates 8 --search-cap 20 \
  --concurrent 8 --json $OUT/fixed.json --out $OUT/fixed.md 2>&1 | grep -v -i "warning\|^ *warnings.warn"
echo "== 2. kill one of 2 GPU workers mid-run $(date +%T)"
timeout 170 python3 benchmarks/multi_gpu_bench.py --only gated_mlp_gelu_gemma_2b_b8,lora_gpt3_q_r8_b4 --gpus 2 --kill-one \
  --fixed-work 8 --max-candidates 8 --search-cap 20 --json $OUT/kill.json --out $OUT/kill.md 2>&1 | grep -v -i "warning\|^ *warnings.warn"
echo "== done $(date +%T)"
