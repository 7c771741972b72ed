"""When does a search find its best-estimated candidates? Per candidate: seconds, states, cost-model estimate.

python benchmarks/probes/search_timeline.py --seconds 30 --workers 16 --out timeline.json NAME...
(NAME: a suite program, or 'readme' for RMSNorm+Linear 16x4096x4096)
"""
import argparse, json, sys, time
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import mirage_lab as mi
from mirage_lab.search import CancelToken, CandidateFound, Finished, search
from mirage_lab.pipeline import estimate, lowering_variants
import suite

def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("names", nargs="+")
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--workers", type=int, default=16)
    ap.add_argument("--out", default="timeline.json")
    a = ap.parse_args()
    out = {}
    for name in a.names:
        if name == "readme":
            g = mi.new_kernel_graph(); X = g.new_input((16, 4096), mi.float16); W = g.new_input((4096, 4096), mi.float16)
            g.mark_output(g.matmul(g.rms_norm(X, normalized_shape=(4096,)), W)); cfg, secs = None, a.seconds
        else:
            p = suite.by_name(name); g = p.build(); cfg = p.config; secs = min(a.seconds, p.search_seconds or a.seconds)
        tok = CancelToken(); t0 = time.monotonic(); rows = []; best = float("inf"); last = 0
        for ev in search(g, cfg, workers=a.workers, cancel=tok):
            t = time.monotonic() - t0
            st = getattr(ev, "stats", None)
            if st is not None and st.states:
                last = st.states
            if isinstance(ev, CandidateFound):
                try:
                    est = min(estimate(v.graph, v.options).us for v in lowering_variants(ev.graph, candidate=ev.index))
                except Exception as e:  # noqa
                    est = float("nan")
                best = min(best, est)
                rows.append({"i": ev.index, "t": round(t, 2), "states": last, "est": round(est, 2), "best": round(best, 2)})
                print(f"  {name} cand {ev.index} t={t:.1f}s states={last} est={est:.1f} best={best:.1f}", flush=True)
            if isinstance(ev, Finished):
                out[name] = {"rows": rows, "end_t": round(t, 2), "states": ev.stats.states, "cancelled": ev.cancelled}
                print(f"{name}: {len(rows)} candidates, {ev.stats.states} states, {t:.1f}s, cancelled={ev.cancelled}", flush=True)
                break
            if t > secs and not tok.is_set():
                tok.cancel()
        json.dump(out, open(a.out, "w"), indent=1)


if __name__ == "__main__":   # spawned search workers re-import this file
    main()
