#!/usr/bin/env bash
# device call 1 (2026-11-29 f): ldmatrix fragments A/B on the tuned SwiGLU lowerings + ncu; suite SwiGLUs on the user's path after the search fix
cd "$(dirname "$0")/.."
exec > >(tee $OUT/log.txt) 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl .whl/extra/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
for v in MIRAGE_LAB_CACHE TORCHINDUCTOR_CACHE_DIR TRITON_CACHE_DIR NUMBA_CACHE_DIR; do export $v=$(mktemp -d /tmp/c_$v.XXXX); done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; git log --oneline -1 | cut -c1-80
D=benchmarks/found/h200_2026-11-29e/dumps_call2
echo "== 1. ldmatrix probe $(date +%T)"
timeout 170 python3 benchmarks/probes/async_copy_probe.py --top 2 --stages 2 --ldmatrix \
  --dumps $D/gated_mlp_silu_phi3_mini_b32.json,$D/gated_mlp_silu_qwen25_0_5b_b64.json
echo "== 2. ncu ldmatrix $(date +%T)"
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
for tag in pw0-regNone-acc128-smem152-ldsm-mma; do
  timeout 60 $NCU --clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats \
    --section SchedulerStats --section Occupancy --section InstructionStats -k regex:kernel_0 --launch-count 1 \
    python3 benchmarks/profile_kernel.py json 0 0 256 --json devjobs/phi3_c0.json --tag $tag --launch-only > $OUT/ncu_$tag.txt 2>&1
  echo "-- $tag"
  grep -E "Duration|Throughput|Warp Cycles|Eligible|Issued Warp|Registers|Executed Instructions  |Executed Ipc" $OUT/ncu_$tag.txt | head -30
done
echo "== 3. suite (dumps kept) $(date +%T)"
mkdir -p $OUT/dumps
for p in gated_mlp_silu_qwen25_0_5b_b64 gated_mlp_silu_phi3_mini_b32; do
  echo "-- $p $(date +%T)"
  timeout 125 python3 benchmarks/suite_bench.py --only "$p" --search-cap 60 --tune-seconds 30 --skip-max-autotune \
    --dump $OUT/dumps --resume $OUT/suite.jsonl --out $OUT/suite.md >> $OUT/suite_log.txt 2>&1
  python3 - "$p" <<'PY'
import json, os, sys
for l in open(os.environ["OUT"] + "/suite.jsonl"):
    r = json.loads(l)
    if r.get("program") == sys.argv[1] and "returned_us" in r:
        print({k: (round(v, 2) if isinstance(v, float) else v) for k, v in r.items() if k in ("program", "returned_us", "tuned_us", "compile_us", "eager_us", "winner", "chosen", "rel_err", "superoptimize_s")})
PY
done
echo "== done $(date +%T)"
