#!/usr/bin/env bash
# device call E (2026-11-29 h, nvidia-h200): ncu of LLaMA-3 70B QKV b8's best split lowering (40 tiles x 8 blocks, 128 threads)
# against the same μGraph whole and the plain split read of splitk_read_bench
cd "$(dirname "$0")/.."
exec > >(tee $OUT/log.txt) 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl .whl/extra/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 PATH=$PATH:/usr/local/cuda/bin
for v in TORCHINDUCTOR_CACHE_DIR TRITON_CACHE_DIR NUMBA_CACHE_DIR; do export $v=$(mktemp -d /tmp/c_$v.XXXX); done
J="json 0 0 128 --json devjobs/cand70b_1.json"
for t in pw0-regNone-acc128-sk8-mma pw0-regNone-acc128-mma; do
  timeout 60 python3 benchmarks/profile_kernel.py $J --tag $t 2>&1 | grep "mirage_lab\|torch" | head -4
done
SEC="--section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats"
for t in pw0-regNone-acc128-sk8-mma pw0-regNone-acc128-mma; do
  echo "== ncu $t $(date +%T)"
  timeout 80 ncu --clock-control none $SEC -k regex:kernel_0 -c 1 python3 benchmarks/profile_kernel.py $J --tag $t --launch-only 2>&1 | grep -v "^==PROF==" | tail -120 > $OUT/ncu_$t.txt
  grep -i "duration\|dram throughput\|memory throughput\|achieved occupancy\|theoretical occupancy\|registers per\|issued warp\|no eligible\|active warps per\|eligible warps\|block limit\|waves per sm\|warp cycles per issued\|L1/TEX Hit\|L2 Hit\|Mem Busy\|Max Bandwidth\|Grid Size\|Block Size" $OUT/ncu_$t.txt | head -40
done
echo "== done $(date +%T)"
