"""How long before a search's workers visit their first state, by start method and fingerprint backend.

Each case runs in a new process: the README's RMSNorm+Linear search (16x4096x4096) for --seconds,
with ``workers`` processes; ``parent_cuda`` makes a CUDA tensor first (as a notebook that used the GPU
does, or a second superoptimize after a tuning), so the pool spawns instead of forking.

    python benchmarks/probes/worker_start.py --workers 16,64 --seconds 15
"""
import argparse, json, os, subprocess, sys, time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def case(workers: int, parent_cuda: bool, backend: str, seconds: float) -> dict:
    t_start = time.monotonic()
    import mirage_lab as mi
    from mirage_lab.search import CancelToken, CandidateFound, search
    if parent_cuda:
        import torch
        torch.zeros(1, device="cuda")
    g = mi.new_kernel_graph(); X = g.new_input((16, 4096), mi.float16); W = g.new_input((4096, 4096), mi.float16)
    g.mark_output(g.matmul(g.rms_norm(X, normalized_shape=(4096,)), W))
    tok = CancelToken(); t0 = time.monotonic(); first = None; cands = 0; states = 0; first_cand = None
    for ev in search(g, None, workers=workers, cancel=tok, fingerprint_backend=backend):
        t = time.monotonic() - t0
        st = getattr(ev, "stats", None)
        if st is not None and st.states:
            states = st.states
            first = first if first is not None else t
        if isinstance(ev, CandidateFound):
            cands += 1
            first_cand = first_cand if first_cand is not None else t
        if t > seconds:
            tok.cancel()
    return {"workers": workers, "parent_cuda": parent_cuda, "backend": backend, "import_s": round(t0 - t_start, 2),
            "first_state_s": first and round(first, 2), "first_candidate_s": first_cand and round(first_cand, 2),
            "states": states, "candidates": cands, "total_s": round(time.monotonic() - t0, 2)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", default="16")
    ap.add_argument("--seconds", type=float, default=15)
    ap.add_argument("--backends", default="auto,numpy")
    ap.add_argument("--case", default=None)
    a = ap.parse_args()
    if a.case:
        w, pc, b = a.case.split(":")
        print("RESULT " + json.dumps(case(int(w), pc == "1", b, a.seconds)), flush=True)
        return
    print("| workers | parent CUDA (spawn) | fingerprints | import s | first state s | first candidate s | states | candidates |")
    print("|---:|---|---|---:|---:|---:|---:|---:|")
    for w in a.workers.split(","):
        for pc in ("0", "1"):
            for b in a.backends.split(","):
                t = time.monotonic()
                p = subprocess.run([sys.executable, __file__, "--case", f"{w}:{pc}:{b}", "--seconds", str(a.seconds)],
                                   capture_output=True, text=True, timeout=a.seconds + 240)
                line = [x for x in p.stdout.splitlines() if x.startswith("RESULT ")]
                if not line:
                    print(f"| {w} | {pc} | {b} | failed rc={p.returncode}: {p.stderr[-300:]!r} |", flush=True)
                    continue
                r = json.loads(line[0][7:])
                print(f"| {w} | {pc} | {b} | {r['import_s']} | {r['first_state_s']} | {r['first_candidate_s']} | "
                      f"{r['states']} | {r['candidates']} |", flush=True)


if __name__ == "__main__":
    main()
