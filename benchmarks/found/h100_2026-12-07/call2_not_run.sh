#!/usr/bin/env bash
# device call 2 (2026-12-07): why LoRA Mistral-7B's two-kernel plan measured 28.6 µs (estimate 16.5): timings + ncu of its
# fused kernel; then suite programs not run on a GPU since 2026-11-25 (searches from the CPU box's cache: tuning only)
cd "$(dirname "$0")/.."
exec > >(tee $OUT/log.txt) 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl .whl/extra/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 PATH=$PATH:/usr/local/cuda/bin
for v in TORCHINDUCTOR_CACHE_DIR TRITON_CACHE_DIR NUMBA_CACHE_DIR; do export $v=$(mktemp -d /tmp/c_$v.XXXX); done
git log --oneline | head -1; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
if [ -z "$SKIP_NCU" ]; then
echo "== 1. LoRA Mistral two-kernel plan $(date +%T)"
for jt in "c0 256 pw0-regNone-acc128-smem184-mma" "c1 128 pw0-regNone-acc128-mma" "c1 256 pw0-regNone-acc128-mma" "c2 256 pw0-regNone-acc128-ldsm-sk16-mma"; do
  set -- $jt
  echo "-- $1 $2 $3"; timeout 60 python3 benchmarks/profile_kernel.py json 0 0 $2 --json devjobs/lora_mistral_$1.json --tag $3 2>&1 | grep "mirage_lab\|torch" | head -4
done
SEC="--section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy --section LaunchStats"
echo "== ncu c1 128 $(date +%T)"
timeout 80 ncu --clock-control none $SEC -k regex:kernel_0 -c 1 python3 benchmarks/profile_kernel.py json 0 0 128 --json devjobs/lora_mistral_c1.json --tag pw0-regNone-acc128-mma --launch-only 2>&1 | grep -v "^==PROF==" | tail -120 > $OUT/ncu_c1.txt
grep -i "duration\|dram throughput\|memory throughput\|achieved occupancy\|theoretical occupancy\|registers per\|no eligible\|active warps per\|eligible warps\|block limit\|warp cycles per issued\|L2 Hit\|Grid Size\|Block Size\|Shared Memory Configuration Size\|Dynamic Shared" $OUT/ncu_c1.txt | head -30
fi
echo "== 2. suite (search results from the CPU box) $(date +%T)"
export MIRAGE_LAB_CACHE=$PWD/devjobs/mlcache
mkdir -p $OUT/dumps
for p in ${PROGS}; do
  echo "-- $p $(date +%T)"
  timeout ${PT:-100} python3 benchmarks/suite_bench.py --only "$p" --search-cap 60 --tune-seconds 30 --skip-max-autotune \
    --dump $OUT/dumps --resume $OUT/suite.jsonl --out $OUT/suite.md >> $OUT/suite_log.txt 2>&1
  python3 - "$p" <<'PY'
import json, os, sys
for l in open(os.environ["OUT"] + "/suite.jsonl"):
    r = json.loads(l)
    if r.get("program") == sys.argv[1] and "returned_us" in r:
        print({k: (round(v, 2) if isinstance(v, float) else v) for k, v in r.items() if k in ("program", "returned_us", "tuned_us", "compile_us", "eager_us", "library_us", "copy_floor_us", "winner", "chosen", "rel_err", "superoptimize_s", "candidates")})
PY
done
echo "== done $(date +%T)"
tar czf $OUT/dumps.tgz -C $OUT dumps && rm -rf $OUT/dumps
