source devjobs/setup.sh
fresh_torch_caches() { export TORCHINDUCTOR_CACHE_DIR=$(mktemp -d) TRITON_CACHE_DIR=$(mktemp -d); }
echo "== 1. README's own call graph.superoptimize() from scratch (cold torch caches), then a cache hit"
fresh_torch_caches
timeout 170 python3 benchmarks/cache_hit_bench.py --defaults --runs 2 --cache $(mktemp -d) > $OUT/readme_defaults.txt 2>&1; echo rc=$?
grep -v '^{"cache' $OUT/readme_defaults.txt | tail -3 | cut -c1-400
echo "== 2. search_seconds=30 tune_seconds=30 from scratch (cold torch caches)"
fresh_torch_caches
timeout 130 python3 benchmarks/cache_hit_bench.py --runs 1 --cache $(mktemp -d) > $OUT/readme_30_30.txt 2>&1; echo rc=$?
grep -v '^{"cache' $OUT/readme_30_30.txt | tail -2 | cut -c1-400
echo "== 3. e2e three seeds in one process, tune 30"
fresh_torch_caches
MIRAGE_LAB_CACHE=$(mktemp -d) timeout 280 python3 benchmarks/e2e_bench.py --programs rmsnorm_linear_16x4096x4096,gated_mlp_8x4096x4096,gqa_decode_64x1x128x4096 --tune-seconds 30 --out $OUT/e2e.md > $OUT/e2e.log 2>&1; echo rc=$?
cat $OUT/e2e.md 2>/dev/null | head -40
tr '\r' '\n' < $OUT/e2e.log | grep -iv "it/s\|s/it\|%|" | tail -25 | cut -c1-300
date -u
