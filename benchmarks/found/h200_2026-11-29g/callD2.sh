#!/usr/bin/env bash
# device call D2 (2026-11-29 g, nvidia-h200-x2): issue 23 after torch.compile builds of runs at once go to child processes - more work per program (first 24 planned variants), 8 programs at once,
# N=1,2; each GPU worker compiles in 16 processes (a GPU with its half of this 32-core host: the multi-host model)
cd "$(dirname "$0")/.."
exec > >(tee $OUT/log.txt) 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl .whl/extra/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
for v in TORCHINDUCTOR_CACHE_DIR TRITON_CACHE_DIR NUMBA_CACHE_DIR; do export $v=$(mktemp -d /tmp/c_$v.XXXX); done
export MIRAGE_LAB_CACHE=/tmp/mlc; cp -r devjobs/mlcache /tmp/mlc
nvidia-smi -L; nproc; sha1sum mirage_lab/pipeline/distributed.py benchmarks/multi_gpu_bench.py | cut -c1-12
P=rmsnorm_linear_llama3_8b_qkv_b1,rmsnormw_linear_llama3_8b_gateup_b16,gated_mlp_silu_llama3_8b_b1,gated_mlp_gelu_gemma_2b_b8,gqa_decode_llama3_8b_b1_kv4096,lora_gpt3_q_r8_b4,softmax_linear_mixtral_router_b64,l2norm_linear_ngpt_4096_qkv_b32
echo "== 1. fixed work 24, 16 compile processes per GPU worker, 8 programs at once, N=1,2 $(date +%T)"
timeout 420 python3 benchmarks/multi_gpu_bench.py --only "$P" --gpus 1,2 --fixed-work 24 --max-candidates 8 --search-cap 20 \
  --compile-workers 16 --concurrent 8 --json $OUT/fixed24b.json --out $OUT/fixed24b.md 2>&1 | grep -v -i "warning\|^ *warnings.warn\|distributed\.\|^ \+File\|^Traceback\|BrokenPipe"
echo "== done $(date +%T)"
