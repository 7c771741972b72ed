#!/usr/bin/env bash
cd "$(dirname "$0")/.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl $(ls .whl/extra/*.whl) 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 MIRAGE_LAB_CACHE=/tmp/mlc3
for v in TORCHINDUCTOR_CACHE_DIR TRITON_CACHE_DIR NUMBA_CACHE_DIR; do export $v=$(mktemp -d /tmp/c_$v.XXXX); done
nvidia-smi --query-gpu=name --format=csv,noheader; date +%T
TUNE=30 timeout 150 python3 devjobs/allvariants.py mqa_decode_falcon7b_b8_kv2048 2>&1 | grep -v Warning
python3 -c "
import json; d=json.load(open('$OUT/all_mqa_decode_falcon7b_b8_kv2048.json')); print(d['stop']); print([(p['lowering'], p['median_us'], (p['error'] or '')[:60]) for p in d['programs']])
print([(v['candidate'], v['threads'], v['median_us'], (v.get('rounds_us') or [None])[:3], (v['error'] or '')[:50]) for v in d['variants'] if v.get('rounds_us') or v['error']][:8])"
date +%T
