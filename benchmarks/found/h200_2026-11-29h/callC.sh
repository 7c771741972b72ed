#!/usr/bin/env bash
# device call C (2026-11-29 h, nvidia-h200): split-K across blocks in the tuner (narrow grids), cost model with two blocks an SM drawing: README example from scratch and from the cache; LLaMA-3 70B RMSNorm-weight + QKV b8 on the user path

cd "$(dirname "$0")/.."
exec > >(tee $OUT/log.txt) 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl .whl/extra/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
for v in MIRAGE_LAB_CACHE TORCHINDUCTOR_CACHE_DIR TRITON_CACHE_DIR NUMBA_CACHE_DIR; do export $v=$(mktemp -d /tmp/c_$v.XXXX); done
git log --oneline | head -1; git status --short | grep -v devjobs | head
echo "== 1. README example from scratch, then a cache hit (bytecode kept) $(date +%T)"
timeout 100 benchmarks/with_bytecode.sh python3 benchmarks/cache_hit_bench.py --defaults --runs 2
echo "== 2. suite $(date +%T)"
mkdir -p $OUT/dumps
PROGS=${PROGS:-rmsnormw_linear_llama3_70b_qkv_b8}
for p in $PROGS; do
  echo "-- $p $(date +%T)"
  timeout 170 python3 benchmarks/suite_bench.py --only "$p" --search-cap 60 --tune-seconds 30 --skip-max-autotune \
    --dump $OUT/dumps --resume $OUT/suite.jsonl --out $OUT/suite.md >> $OUT/suite_log.txt 2>&1
  python3 - "$p" <<'PY'
import json, os, sys
for l in open(os.environ["OUT"] + "/suite.jsonl"):
    r = json.loads(l)
    if r.get("program") == sys.argv[1] and "returned_us" in r:
        print({k: (round(v, 2) if isinstance(v, float) else v) for k, v in r.items() if k in ("program", "returned_us", "tuned_us", "compile_us", "eager_us", "winner", "chosen", "rel_err", "superoptimize_s")})
try:
    d = json.load(open(os.environ["OUT"] + "/dumps/" + sys.argv[1] + ".json"))
    from mirage_lab.ir.serialize import from_json
    def shape(c):
        g = from_json(json.dumps(d["tuned"][str(c)]))
        return [(op.block_graph.grid_dim[0], op.block_graph.forloop_range) for op in g.ops if getattr(op, "block_graph", None) is not None]
    vs = sorted((v for v in d["variants"] if v.get("median_us")), key=lambda v: v["median_us"])
    print("   timed", len(vs), "of", len(d["variants"]), "| programs", [(q["lowering"], q["median_us"]) for q in d["programs"]])
    print("   split variants planned", sum("-sk" in v["options"] for v in d["variants"]), "timed", sum("-sk" in v["options"] for v in vs))
    for v in vs[:8]:
        print("   ", v["candidate"], shape(v["candidate"]), v["threads"], v["options"], v["estimate_us"], v["median_us"])
except Exception as e:
    print("   no dump:", e)
PY
done
echo "== done $(date +%T)"
tar czf $OUT/dumps.tgz -C $OUT dumps && rm -rf $OUT/dumps
