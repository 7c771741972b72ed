#!/usr/bin/env bash
# fill devjobs/mlcache with the search results of the issue-23 programs (CPU box), so the device call tunes only
cd "$(dirname "$0")/.."
export MIRAGE_LAB_CACHE=$PWD/devjobs/mlcache
P=rmsnorm_linear_llama3_8b_qkv_b1,rmsnormw_linear_llama3_8b_gateup_b16,gated_mlp_silu_llama3_8b_b1,gated_mlp_gelu_gemma_2b_b8,gqa_decode_llama3_8b_b1_kv4096,lora_gpt3_q_r8_b4,softmax_linear_mixtral_router_b64,l2norm_linear_ngpt_4096_qkv_b32
.venv/bin/python - "$P" <<'PY'
import sys, time
sys.path.insert(0, "benchmarks")
import suite, multi_gpu_bench as m
for p in suite.select(sys.argv[1]):
    t = time.perf_counter()
    try:
        prog, c = m.candidates_of(p, 8, print, 20.0, None)
        print(p.name, len(c), f"{time.perf_counter()-t:.1f}s", flush=True)
    except Exception as e:
        print(p.name, "ERR", type(e).__name__, str(e)[:200], flush=True)
PY
