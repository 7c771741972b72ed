source devjobs/setup.sh
lscpu | grep -E "^CPU\(s\)|Thread\(s\) per core|Core\(s\) per socket|Model name" 
fresh() { export TORCHINDUCTOR_CACHE_DIR=$(mktemp -d) TRITON_CACHE_DIR=$(mktemp -d) MIRAGE_LAB_CACHE=$(mktemp -d); }
P=benchmarks/probes/superoptimize_timeline.py
for w in 16 8; do
  fresh; echo "== search only, complete, $w workers"
  timeout 90 python3 $P --tag search_w$w --kwargs "{\"tune\": false, \"stop_when_quiet\": false, \"workers\": $w}" --every 2 --out $OUT/search_w$w.json > $OUT/search_w$w.txt 2>&1
  grep -E "^==|firsts" $OUT/search_w$w.txt | cut -c1-300; tail -4 $OUT/search_w$w.txt | head -3
done
for tag in default ct1 default2; do
  fresh; [ $tag = ct1 ] && export TORCHINDUCTOR_COMPILE_THREADS=1 || unset TORCHINDUCTOR_COMPILE_THREADS
  echo "== README superoptimize() timeline: $tag"
  timeout 120 python3 $P --tag $tag --out $OUT/tl_$tag.json > $OUT/tl_$tag.txt 2>&1; echo rc=$?
  grep -E "^==|firsts|lowerings" $OUT/tl_$tag.txt | cut -c1-600
done
date -u
