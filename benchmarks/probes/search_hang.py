"""Why does a search on the H100 host sometimes visit 0 states? Run searches; dump the workers' stacks when stuck.

python benchmarks/probes/search_hang.py --cuda-parent --runs 2 --workers 16 readme qwen
"""
import argparse, os, subprocess, sys, time
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import mirage_lab as mi
from mirage_lab.search import CancelToken, CandidateFound, Finished, search
import suite

def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("names", nargs="+")
    ap.add_argument("--cuda-parent", action="store_true")
    ap.add_argument("--probe-gpu", action="store_true", help="mirage_lab.pipeline.gpu_available() first, as superoptimize does")
    ap.add_argument("--estimate", action="store_true", help="call the cost model on each candidate (as the timeline did)")
    ap.add_argument("--workers", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=25)
    ap.add_argument("--stuck", type=float, default=14)
    a = ap.parse_args()
    if a.cuda_parent:
        import torch
        torch.zeros(1, device="cuda"); torch.cuda.synchronize()
    if a.probe_gpu:
        from mirage_lab.pipeline import gpu_available
        import torch
        print("gpu_available:", gpu_available(), "torch initialized:", torch.cuda.is_initialized(), flush=True)
    SPY = os.environ.get("PYSPY", "py-spy")

    def children():
        import psutil
        return psutil.Process().children(recursive=True)

    def dump():
        kids = children()
        print(f"    children: {len(kids)}: {[ (k.pid, k.name(), k.status(), round(k.cpu_percent(0.2))) for k in kids][:20]}", flush=True)
        for k in kids[:3] + kids[-1:]:
            try:
                r = subprocess.run([SPY, "dump", "--pid", str(k.pid)], capture_output=True, text=True, timeout=30)
            except FileNotFoundError:
                print(f"    ({SPY} not found: install py-spy, or set PYSPY to its path)")
                return
            print(f"    --- py-spy {k.pid}:\n" + "\n".join("      " + l for l in (r.stdout + r.stderr).splitlines()[:40]), flush=True)

    for name in a.names:
        if name == "readme":
            g = mi.new_kernel_graph(); X = g.new_input((16, 4096), mi.float16); W = g.new_input((4096, 4096), mi.float16)
            g.mark_output(g.matmul(g.rms_norm(X, normalized_shape=(4096,)), W)); cfg = None
        else:
            p = suite.by_name(name); g = p.build(); cfg = p.config
        tok = CancelToken(); t0 = time.monotonic(); states = 0; nxt = 1.0; dumped = False; first = None
        for ev in search(g, cfg, workers=a.workers, cancel=tok):
            t = time.monotonic() - t0
            st = getattr(ev, "stats", None)
            if st is not None and st.states:
                states = st.states
                if first is None:
                    first = t
            if isinstance(ev, CandidateFound) and a.estimate:
                from mirage_lab.pipeline import estimate, lowering_variants
                min(estimate(v.graph, v.options).us for v in lowering_variants(ev.graph, candidate=ev.index))
            if isinstance(ev, Finished):
                print(f"{name}: {len(ev.candidates)} cands, {ev.stats.states} states, {t:.1f}s, first states at {first}, "
                      f"backends {ev.fingerprint_backends}, worker_errors {ev.worker_errors}", flush=True)
                break
            if type(ev).__name__ == "SearchError":
                print("  SearchError:", ev, flush=True)
            if t > nxt:
                print(f"  t={t:.0f}s states={states}", flush=True); nxt += 2.0
            if t > a.stuck and states == 0 and not dumped:
                dumped = True; dump()
            if t > a.seconds and not tok.is_set():
                tok.cancel()


if __name__ == "__main__":   # spawned search workers re-import this file
    main()
