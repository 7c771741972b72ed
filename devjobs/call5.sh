source devjobs/setup.sh
export TORCHINDUCTOR_CACHE_DIR=$(mktemp -d) TRITON_CACHE_DIR=$(mktemp -d)
echo "== import times, cold triton cache"
python3 - <<'PY'
import time, importlib, sys
t=time.perf_counter(); import torch; print("torch", round(time.perf_counter()-t,2))
for m in ["torch._dynamo", "torch._inductor.compile_fx", "torch._inductor.codegen.triton", "torch._inductor.runtime.triton_heuristics", "triton"]:
    t=time.perf_counter(); importlib.import_module(m); print(m, round(time.perf_counter()-t,2), "cuda init:", torch.cuda.is_initialized(), "libcuda mapped:", any("libcuda.so" in l for l in open("/proc/self/maps")))
PY
fresh() { export TORCHINDUCTOR_CACHE_DIR=$(mktemp -d) TRITON_CACHE_DIR=$(mktemp -d) MIRAGE_LAB_CACHE=$(mktemp -d); }
P=benchmarks/probes/superoptimize_timeline.py
fresh; echo "== README timeline, preload dynamo + compile_fx only"
timeout 70 python3 $P --tag dynamo --preload torch._dynamo,torch._inductor.compile_fx --out $OUT/tl_dynamo.json > $OUT/tl_dynamo.txt 2>&1; echo rc=$?
grep -E "^==|firsts|lowerings" $OUT/tl_dynamo.txt | cut -c1-450
fresh; echo "== README timeline, no preload, 15 search workers"
timeout 70 python3 $P --tag none15 --preload none --kwargs '{"workers": 15}' --out $OUT/tl_none15.json > $OUT/tl_none15.txt 2>&1; echo rc=$?
grep -E "^==|firsts|lowerings" $OUT/tl_none15.txt | cut -c1-450
date -u
