#!/usr/bin/env bash
# device call F (2026-11-29 h, nvidia-h200): more suite programs on the final tree (searches from the CPU box cache: tuning only)
cd "$(dirname "$0")/.."
exec > >(tee $OUT/log.txt) 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl .whl/extra/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
for v in TORCHINDUCTOR_CACHE_DIR TRITON_CACHE_DIR NUMBA_CACHE_DIR; do export $v=$(mktemp -d /tmp/c_$v.XXXX); done
echo "== 2. suite (search results from the CPU box) $(date +%T)"
export MIRAGE_LAB_CACHE=$PWD/devjobs/mlcache
mkdir -p $OUT/dumps
for p in ${PROGS:-gqa_decode_llama3_70b_b4_kv8192 lora_gpt3_q_r8_b4 mqa_decode_falcon7b_b8_kv2048 gated_mlp_gelu_gemma_2b_b8 lora_llama3_8b_q_r16_b16}; do
  echo "-- $p $(date +%T)"
  timeout ${PT:-110} python3 benchmarks/suite_bench.py --only "$p" --search-cap 60 --tune-seconds 30 --skip-max-autotune \
    --dump $OUT/dumps --resume $OUT/suite.jsonl --out $OUT/suite.md >> $OUT/suite_log.txt 2>&1
  python3 - "$p" <<'PY'
import json, os, sys
for l in open(os.environ["OUT"] + "/suite.jsonl"):
    r = json.loads(l)
    if r.get("program") == sys.argv[1] and "returned_us" in r:
        print({k: (round(v, 2) if isinstance(v, float) else v) for k, v in r.items() if k in ("program", "returned_us", "tuned_us", "compile_us", "eager_us", "winner", "chosen", "rel_err", "superoptimize_s", "floor_us")})
try:
    d = json.load(open(os.environ["OUT"] + "/dumps/" + sys.argv[1] + ".json"))
    from mirage_lab.ir.serialize import from_json
    def shape(c):
        g = from_json(json.dumps(d["tuned"][str(c)]))
        return [(op.block_graph.grid_dim, op.block_graph.forloop_range) for op in g.ops if getattr(op, "block_graph", None) is not None]
    vs = sorted((v for v in d["variants"] if v.get("median_us")), key=lambda v: v["median_us"])
    print("   timed", len(vs), "of", len(d["variants"]), "| programs", [(q["lowering"], q["median_us"]) for q in d["programs"]])
    print("   split variants planned", sum("-sk" in v["options"] for v in d["variants"]), "timed", sum("-sk" in v["options"] for v in vs))
    for v in vs[:6]:
        print("   ", v["candidate"], shape(v["candidate"]), v["threads"], v["options"], v["estimate_us"], v["median_us"])
except Exception as e:
    print("   no dump:", e)
PY
done
echo "== done $(date +%T)"
tar czf $OUT/dumps.tgz -C $OUT dumps && rm -rf $OUT/dumps
