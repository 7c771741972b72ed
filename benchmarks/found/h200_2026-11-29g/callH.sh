#!/usr/bin/env bash
# device call H (2026-11-29 g, nvidia-h200): the final tree's cluster protocol on one GPU, 2 workers sharing it,
# 8 programs at once (builds in threads again, 0aa6006; the GPU timeline, e740a6f); call G's run on the final tree
cd "$(dirname "$0")/.."
exec > >(tee $OUT/log.txt) 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl .whl/extra/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 PATH=$PATH:/usr/local/cuda/bin
for v in TORCHINDUCTOR_CACHE_DIR TRITON_CACHE_DIR NUMBA_CACHE_DIR; do export $v=$(mktemp -d /tmp/c_$v.XXXX); done
export MIRAGE_LAB_CACHE=/tmp/mlc; cp -r devjobs/mlcache /tmp/mlc
sha1sum mirage_lab/pipeline/distributed.py benchmarks/multi_gpu_bench.py | cut -c1-12
P=rmsnorm_linear_llama3_8b_qkv_b1,rmsnormw_linear_llama3_8b_gateup_b16,gated_mlp_silu_llama3_8b_b1,gated_mlp_gelu_gemma_2b_b8,gqa_decode_llama3_8b_b1_kv4096,softmax_linear_mixtral_router_b64,l2norm_linear_ngpt_4096_qkv_b32
echo "== 1. one GPU, 2 workers sharing it, 7 programs at once (LoRA left out: its search found nothing on the busy CPU box), fixed work 8 $(date +%T)"
timeout 170 python3 benchmarks/multi_gpu_bench.py --only "$P" --gpus 1 --workers-share-gpu 2 --fixed-work 8 --max-candidates 8 \
  --search-cap 20 --concurrent 8 --json $OUT/share2_final.json --out $OUT/share2_final.md 2>&1 | grep -v -i "warning\|^ *warnings.warn\|distributed\.\|^ \+File\|^Traceback\|BrokenPipe"
echo "== done $(date +%T)"
