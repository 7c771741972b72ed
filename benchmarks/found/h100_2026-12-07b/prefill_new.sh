#!/usr/bin/env bash
# fill the search cache with the merged tree (/work/wt = main after the QK-norm change) for calls B and C
cd /work/wt
export MIRAGE_LAB_CACHE=/work/main/devjobs/mlcache
for p in $PROGS; do
  /work/main/.venv/bin/python benchmarks/suite_bench.py --search-only --only $p --search-cap 60 --resume /work/main/devjobs/prefill_new.jsonl >> /work/main/devjobs/prefill_new.log 2>&1
  echo "$p $(date +%T)" >> /work/main/devjobs/prefill_new_progress.txt
done
echo done >> /work/main/devjobs/prefill_new_progress.txt
