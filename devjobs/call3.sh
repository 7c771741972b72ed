source devjobs/setup.sh
python3 -m pip install -q --no-index --no-deps --target /tmp/tools .whl/tools/*.whl >/dev/null 2>&1; ls /tmp/tools/bin
python3 -c "import threadpoolctl; print('threadpoolctl', threadpoolctl.__version__)"
fresh() { export TORCHINDUCTOR_CACHE_DIR=$(mktemp -d) TRITON_CACHE_DIR=$(mktemp -d) MIRAGE_LAB_CACHE=$(mktemp -d); }
P=benchmarks/probes/superoptimize_timeline.py
fresh; echo "== search only, complete, 16 workers, one BLAS thread per worker"
timeout 60 python3 $P --tag search_w16_blas1 --kwargs '{"tune": false, "stop_when_quiet": false, "workers": 16}' --every 2 --out $OUT/search_w16_blas1.json > $OUT/search_w16_blas1.txt 2>&1
grep -E "^==|firsts" $OUT/search_w16_blas1.txt | cut -c1-300
fresh; echo "== README timeline, py-spy"
timeout 100 /tmp/tools/bin/py-spy record --threads --idle --rate 50 --format speedscope -o $OUT/readme.speedscope.json -- python3 $P --tag pyspy --out $OUT/tl_pyspy.json > $OUT/tl_pyspy.txt 2>&1; echo rc=$?
grep -E "^==|firsts|lowerings" $OUT/tl_pyspy.txt | cut -c1-500
fresh; echo "== README timeline, plain"
timeout 100 python3 $P --tag plain --out $OUT/tl_plain.json > $OUT/tl_plain.txt 2>&1; echo rc=$?
grep -E "^==|firsts|lowerings" $OUT/tl_plain.txt | cut -c1-500
fresh; echo "== README graph.superoptimize() from scratch, new process; then a cache hit"
timeout 100 python3 benchmarks/cache_hit_bench.py --defaults --runs 2 --cache $MIRAGE_LAB_CACHE > $OUT/readme_defaults.txt 2>&1; echo rc=$?
grep -v '^{"cache' $OUT/readme_defaults.txt | tail -2 | cut -c1-300
fresh; echo "== e2e three seeds in one process, tune 30"
timeout 230 python3 benchmarks/e2e_bench.py --programs rmsnorm_linear_16x4096x4096,gated_mlp_8x4096x4096,gqa_decode_64x1x128x4096 --tune-seconds 30 --out $OUT/e2e > $OUT/e2e.log 2>&1; echo rc=$?
cut -d'|' -f2-8,18-19 $OUT/e2e/e2e_bench.md 2>/dev/null | tail -4
date -u
