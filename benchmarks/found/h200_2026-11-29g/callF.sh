#!/usr/bin/env bash
# device call F (2026-11-29 g, nvidia-h200): why M=8 streamed tensor-core kernels read W at ~2 TB/s (M=1: ~4): stall reasons by ncu
cd "$(dirname "$0")/.."
exec > >(tee $OUT/log.txt) 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl .whl/extra/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 PATH=$PATH:/usr/local/cuda/bin
for v in MIRAGE_LAB_CACHE NUMBA_CACHE_DIR; do export $v=$(mktemp -d /tmp/c_$v.XXXX); done
M='regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,sm__warps_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed.sum,gpu__time_duration.sum'
for m in 8 1; do
  a="rmsnorm 160 64 256 --shape $m,8192,10240 --mma"
  echo "== M=$m: $a $(date +%T)"
  timeout 40 python3 benchmarks/profile_kernel.py $a 2>&1 | grep "mirage_lab\|torch X"
  timeout 60 ncu --clock-control none --metrics "$M" -k regex:kernel_0 -c 1 python3 benchmarks/profile_kernel.py $a --launch-only 2>&1 \
    | grep -v "^==PROF==\|^==WARNING" | grep -E "stalled|warps_active|dram__|inst_executed|duration" | awk '$NF+0 > 0.05 || /dram|warps_active|inst|duration/'
done
echo "== done $(date +%T)"
