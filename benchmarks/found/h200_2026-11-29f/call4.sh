#!/usr/bin/env bash
# device call 4 (2026-11-29 f): the final tree on the user's path: README example from scratch + cache; three more suite programs with ldmatrix in the tuner
cd "$(dirname "$0")/.."
exec > >(tee $OUT/log.txt) 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl .whl/extra/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 PATH=$PATH:/usr/local/cuda/bin
for v in MIRAGE_LAB_CACHE TORCHINDUCTOR_CACHE_DIR TRITON_CACHE_DIR NUMBA_CACHE_DIR; do export $v=$(mktemp -d /tmp/c_$v.XXXX); done
sha1sum mirage_lab/pipeline/variants.py mirage_lab/codegen/__init__.py | cut -c1-12
echo "== 1. README example from scratch, then a cache hit (bytecode kept) $(date +%T)"
timeout 95 benchmarks/with_bytecode.sh python3 benchmarks/cache_hit_bench.py --defaults --runs 2
echo "== 2. suite (dumps kept) $(date +%T)"
mkdir -p $OUT/dumps
for p in gated_mlp_silu_llama3_8b_b1 gated_mlp_relu_relullama_7b_b16 rmsnormw_linear_llama3_8b_gateup_b16; do
  echo "-- $p $(date +%T)"
  timeout 120 python3 benchmarks/suite_bench.py --only "$p" --search-cap 60 --tune-seconds 30 --skip-max-autotune \
    --dump $OUT/dumps --resume $OUT/suite.jsonl --out $OUT/suite.md >> $OUT/suite_log.txt 2>&1
  python3 - "$p" <<'PY'
import json, os, sys
for l in open(os.environ["OUT"] + "/suite.jsonl"):
    r = json.loads(l)
    if r.get("program") == sys.argv[1] and "returned_us" in r:
        print({k: (round(v, 2) if isinstance(v, float) else v) for k, v in r.items() if k in ("program", "returned_us", "tuned_us", "compile_us", "eager_us", "winner", "chosen", "rel_err", "superoptimize_s")})
try:
    d = json.load(open(os.environ["OUT"] + "/dumps/" + sys.argv[1] + ".json"))
    vs = sorted((v for v in d["variants"] if v.get("median_us")), key=lambda v: v["median_us"])
    print("   timed", len(vs), "of", len(d["variants"]), "| programs", [(q["lowering"], q["median_us"]) for q in d["programs"]])
    for v in vs[:5]:
        print("   ", v["candidate"], v["threads"], v["options"], v["estimate_us"], v["median_us"])
    print("   ldsm timed:", [(v["candidate"], v["threads"], v["options"], v["median_us"]) for v in vs if "ldsm" in v["options"]][:6])
except Exception as e:
    print("   no dump:", e)
PY
done
echo "== done $(date +%T)"
tar czf $OUT/dumps.tgz -C $OUT dumps && rm -rf $OUT/dumps
