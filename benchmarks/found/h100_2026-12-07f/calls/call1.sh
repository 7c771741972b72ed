#!/usr/bin/env bash
cd "$(dirname "$0")/.."
README=1 BUDGET=190 PT=110 PROGS="gqa_decode_mistral7b_b64_kv1024 rmsnorm_linear_mistral7b_qkv_prefill512 gated_mlp_relu_relullama_7b_b16" bash benchmarks/device_suite.sh
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
for cw in 0 4; do echo "== search_bench CUDA_FINGERPRINT_WORKERS=$cw $(date +%T)"; timeout 70 python3 -c "import sys, runpy; import mirage_lab.search.executors as e; e.CUDA_FINGERPRINT_WORKERS=$cw; sys.argv=['search_bench.py', '--programs', 'rmsnorm_linear_16x4096x4096', '--workers', '16', '--time-limit', '40']; runpy.run_path('benchmarks/search_bench.py', run_name='__main__')" 2>&1 | tail -6; done
echo "== end $(date +%T)"
