#!/usr/bin/env bash
# device call 1 (2026-12-07): LoRA's two-kernel plan in the lora preset; the task order's third kind of fused tiling.
# README example from scratch + cache hit; the three LoRA suite programs from scratch on the user's path (searches here)
cd "$(dirname "$0")/.."
exec > >(tee $OUT/log.txt) 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl .whl/extra/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
for v in MIRAGE_LAB_CACHE TORCHINDUCTOR_CACHE_DIR TRITON_CACHE_DIR NUMBA_CACHE_DIR; do export $v=$(mktemp -d /tmp/c_$v.XXXX); done
git log --oneline | head -1; git status --short | grep -v devjobs | head; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "== 1. README example from scratch, then a cache hit (bytecode kept) $(date +%T)"
timeout 100 benchmarks/with_bytecode.sh python3 benchmarks/cache_hit_bench.py --defaults --runs 2
echo "== 2. suite $(date +%T)"
mkdir -p $OUT/dumps
PROGS=${PROGS:-lora_mistral7b_v_r64_b32 lora_llama3_8b_q_r16_b16 lora_gpt3_q_r8_b4}
for p in $PROGS; do
  echo "-- $p $(date +%T)"
  timeout ${PT:-150} python3 benchmarks/suite_bench.py --only "$p" --search-cap 60 --tune-seconds 30 --skip-max-autotune \
    --dump $OUT/dumps --resume $OUT/suite.jsonl --out $OUT/suite.md >> $OUT/suite_log.txt 2>&1
  python3 - "$p" <<'PY'
import json, os, sys
for l in open(os.environ["OUT"] + "/suite.jsonl"):
    r = json.loads(l)
    if r.get("program") == sys.argv[1] and "returned_us" in r:
        print({k: (round(v, 2) if isinstance(v, float) else v) for k, v in r.items() if k in ("program", "returned_us", "tuned_us", "compile_us", "eager_us", "library_us", "copy_floor_us", "winner", "chosen", "rel_err", "superoptimize_s", "first_candidate_s", "candidates")})
try:
    d = json.load(open(os.environ["OUT"] + "/dumps/" + sys.argv[1] + ".json"))
    from mirage_lab.ir.serialize import from_json
    def shape(c):
        g = from_json(json.dumps(d["tuned"][str(c)]))
        plain = [op.op_type for op in g.ops if op.op_type not in ("input", "customized")]
        return plain, [(op.block_graph.grid_dim[0], op.block_graph.forloop_range) for op in g.ops if getattr(op, "block_graph", None) is not None]
    vs = sorted((v for v in d["variants"] if v.get("median_us")), key=lambda v: v["median_us"])
    print("   timed", len(vs), "of", len(d["variants"]), "| programs", [(q["lowering"], q["median_us"]) for q in d["programs"]])
    for v in vs[:8]:
        print("   ", v["candidate"], shape(v["candidate"]), v["threads"], v["options"], v["estimate_us"], v["median_us"])
    two = [v for v in vs if shape(v["candidate"])[0][:1] == ["matmul"]]
    print("   two-kernel plan variants timed", len(two), "best", min((v["median_us"] for v in two), default=None))
except Exception as e:
    print("   no dump:", e)
PY
done
echo "== done $(date +%T)"
tar czf $OUT/dumps.tgz -C $OUT dumps && rm -rf $OUT/dumps
