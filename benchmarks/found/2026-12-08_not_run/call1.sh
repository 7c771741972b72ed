#!/usr/bin/env bash
# 2026-12-08 call 1: the user's path on the final tree (README from scratch + cache, Falcon MQA decode through the suite), then the crash probe
cd "$(dirname "$0")/../../.."
T0=$(date +%s); date +%T
PROGS="mqa_decode_falcon7b_b8_kv2048" README=1 BUDGET=100 PT=140 bash benchmarks/device_suite.sh 2>&1 | grep -v Warning | tail -20
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
for v in TORCHINDUCTOR_CACHE_DIR TRITON_CACHE_DIR NUMBA_CACHE_DIR; do export $v=$(mktemp -d /tmp/c_$v.XXXX); done
echo "== probe once $(date +%T)"
CUDA_LAUNCH_BLOCKING=1 timeout 150 python3 benchmarks/probes/final_round_crash.py --mode once 2>&1 | grep -v Warning | tail -25 | tee /tmp/once.txt
if grep -q "FAILED\|Error" /tmp/once.txt; then
  echo "== probe per-round $(date +%T)"
  CUDA_LAUNCH_BLOCKING=1 timeout 150 python3 benchmarks/probes/final_round_crash.py --mode per-round 2>&1 | grep -v Warning | tail -12
fi
echo "== probe sequential --variants 130 $(date +%T)"
CUDA_LAUNCH_BLOCKING=1 timeout $(( 430 - $(date +%s) + T0 )) python3 benchmarks/probes/final_round_crash.py --mode sequential --variants 130 2>&1 | grep -v Warning | tail -25
echo "== end $(date +%T)"
# then (not part of the 8 minutes above; a call of its own if the probe points at a variant): memcheck names the kernel
# python3 benchmarks/probes/memcheck_variants.py --compile-only --variants 60
# compute-sanitizer --tool memcheck --print-limit 3 python3 benchmarks/probes/memcheck_variants.py --variants 60 2>&1 | tail -40
