#!/bin/bash
exec > >(tee $OUT/log.txt) 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl .whl/extra/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv
timeout 200 python3 benchmarks/probes/splitk_read_bench.py --shape=8192x10240 --combine --quick
timeout 150 python3 benchmarks/probes/splitk_read_bench.py --shape=8192x10240 --flat
