source devjobs/setup.sh
T0=$(date +%s); left() { echo $(( 545 - ($(date +%s) - T0) )); }
fresh() { export TORCHINDUCTOR_CACHE_DIR=$(mktemp -d) TRITON_CACHE_DIR=$(mktemp -d) MIRAGE_LAB_CACHE=$(mktemp -d); }
P=benchmarks/probes/superoptimize_timeline.py
fresh; echo "== README timeline"
timeout 80 python3 $P --tag plain --out $OUT/tl_plain.json > $OUT/tl_plain.txt 2>&1; echo rc=$?
grep -E "^==|firsts|lowerings" $OUT/tl_plain.txt | cut -c1-450
fresh; echo "== README graph.superoptimize() from scratch in a new process, then a cache hit"
timeout 80 python3 benchmarks/cache_hit_bench.py --defaults --runs 2 --cache $MIRAGE_LAB_CACHE > $OUT/readme_defaults.txt 2>&1; echo rc=$?
grep -v '^{"cache' $OUT/readme_defaults.txt | tail -2 | cut -c1-250
fresh; echo "== e2e three seeds in one process, tune 30; left $(left) s"
timeout 200 python3 benchmarks/e2e_bench.py --programs rmsnorm_linear_16x4096x4096,gated_mlp_8x4096x4096,gqa_decode_64x1x128x4096 --tune-seconds 30 --out $OUT/e2e > $OUT/e2e.log 2>&1; echo rc=$?
cut -d'|' -f2-8,18-19 $OUT/e2e/e2e_bench.md 2>/dev/null | tail -4
fresh; echo "== suite part (search cap 60, tune 30, no max-autotune); left $(left) s"
timeout $(( $(left) - 3 )) python3 benchmarks/suite_bench.py --only residual_rmsnorm_linear_llama3_8b_qkv_b16,lora_llama3_8b_q_r16_b16 --search-cap 60 --tune-seconds 30 --skip-max-autotune --resume $OUT/suite.jsonl --out $OUT/suite.md > $OUT/suite.log 2>&1; echo rc=$?
cat $OUT/suite.md 2>/dev/null | cut -c1-400 | tail -4
date -u
