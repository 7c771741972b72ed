#!/usr/bin/env bash
# device call C (2026-11-29 g, nvidia-h200-x2): issue 23 after the compile-ahead tasks - 1 and 2 GPUs at fixed work, 8 programs at once; a worker killed mid-run
cd "$(dirname "$0")/.."
exec > >(tee $OUT/log.txt) 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl .whl/extra/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
for v in TORCHINDUCTOR_CACHE_DIR TRITON_CACHE_DIR NUMBA_CACHE_DIR; do export $v=$(mktemp -d /tmp/c_$v.XXXX); done
export MIRAGE_LAB_CACHE=/tmp/mlc; cp -r devjobs/mlcache /tmp/mlc
nvidia-smi -L; nproc; sha1sum mirage_lab/pipeline/distributed.py benchmarks/multi_gpu_bench.py | cut -c1-12
P=rmsnorm_linear_llama3_8b_qkv_b1,rmsnormw_linear_llama3_8b_gateup_b16,gated_mlp_silu_llama3_8b_b1,gated_mlp_gelu_gemma_2b_b8,gqa_decode_llama3_8b_b1_kv4096,lora_gpt3_q_r8_b4,softmax_linear_mixtral_router_b64,l2norm_linear_ngpt_4096_qkv_b32
echo "== 1. fixed work, 8 programs at once, N=1,2 $(date +%T)"
timeout 270 python3 benchmarks/multi_gpu_bench.py --only "$P" --gpus 1,2 --fixed-work 8 --max-candidates 8 --search-cap 20 \
  --concurrent 8 --json $OUT/fixed.json --out $OUT/fixed.md 2>&1 | grep -v -i "warning\|^ *warnings.warn"
echo "== 2. kill one of 2 GPU workers mid-run $(date +%T)"
timeout 110 python3 benchmarks/multi_gpu_bench.py --only gated_mlp_gelu_gemma_2b_b8,lora_gpt3_q_r8_b4 --gpus 2 --kill-one \
  --fixed-work 8 --max-candidates 8 --search-cap 20 --json $OUT/kill.json --out $OUT/kill.md 2>&1 | grep -v -i "warning\|^ *warnings.warn"
echo "== 3. why the 80-column tensor-core layout (Stream.CW) is slow: LLaMA-3 70B QKV b8 shape (no norm weight) $(date +%T)"
export PATH=$PATH:/usr/local/cuda/bin
S="--shape 8,8192,10240 --mma"
for a in "128 64 256 --pw 64 --depth 2" "128 64 128 --pw 64 --depth 2" "80 64 512" "160 64 256" "640 16 128"; do
  timeout 40 python3 benchmarks/profile_kernel.py rmsnorm $a $S 2>&1 | grep "mirage_lab\|torch" ; done
timeout 70 ncu --clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats \
  -k regex:kernel_0 -c 1 python3 benchmarks/profile_kernel.py rmsnorm 128 64 256 --pw 64 --depth 2 $S --launch-only 2>&1 | grep -v "^==PROF==" | tail -90 > $OUT/ncu_cw.txt
timeout 50 ncu --clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats \
  -k regex:kernel_0 -c 1 python3 benchmarks/profile_kernel.py rmsnorm 80 64 512 $S --launch-only 2>&1 | grep -v "^==PROF==" | tail -90 > $OUT/ncu_80.txt
echo "== done $(date +%T)"
