"""A suite program's search on N workers, M of them fingerprinting on the GPU: states after 5 / 10 / 20 / 30 s.

Each case runs in a new process (NAME:WORKERS:CUDA_WORKERS; ``executors.CUDA_FINGERPRINT_WORKERS`` set to
CUDA_WORKERS), the search alone (no tuning), stopped after CAP seconds. Used for RESULTS.md "2026-11-29 (e)":
the H200 host's searches of the gated MLPs were as fast on 2 workers as on 16.

    python benchmarks/probes/search_workers_probe.py 35 gated_mlp_silu_qwen25_0_5b_b64:16:0 gated_mlp_silu_qwen25_0_5b_b64:2:0
"""
import json, subprocess, sys, time
from pathlib import Path
ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

def case(name, workers, cuda_workers, cap):
    import mirage_lab as mi
    from mirage_lab.search import executors
    from mirage_lab.search import CancelToken, CandidateFound, Finished, search
    import suite
    executors.CUDA_FINGERPRINT_WORKERS = cuda_workers
    p = suite.by_name(name); g = p.build()
    tok = CancelToken(); t0 = time.monotonic(); first = None; marks = {}; states = 0; fin = None
    for ev in search(g, p.config, workers=workers, cancel=tok):
        t = time.monotonic() - t0
        st = getattr(ev, "stats", None)
        if st is not None and st.states:
            states = st.states
            for m in (5, 10, 20, 30):
                if t >= m and m not in marks: marks[m] = states
        if isinstance(ev, CandidateFound) and first is None: first = round(t, 1)
        if isinstance(ev, Finished): fin = ev
        if t > cap: tok.cancel()
    return {"program": name, "workers": workers, "cuda_workers": cuda_workers, "first_candidate_s": first,
            "states_at": marks, "states": states, "total_s": round(time.monotonic() - t0, 1),
            "completed": bool(fin and not fin.cancelled), "candidates": len(fin.candidates) if fin else None,
            "backends": fin.fingerprint_backends if fin else None}

if __name__ == "__main__":
    if sys.argv[1] == "--case":
        n, w, c, cap = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
        print("RESULT " + json.dumps(case(n, w, c, cap)), flush=True)
    else:
        cap = float(sys.argv[1])
        for spec in sys.argv[2:]:
            n, w, c = spec.split(":")
            p = subprocess.run([sys.executable, __file__, "--case", n, w, c, str(cap)], capture_output=True, text=True, timeout=cap + 90)
            line = [x for x in p.stdout.splitlines() if x.startswith("RESULT ")]
            print(line[0][7:] if line else f"{spec} failed rc={p.returncode} {p.stderr[-400:]}", flush=True)
