"""Every variant of stored candidates timed (no stopping rule): the best the code generator reaches, and the ranking."""
import json, os, sys, time
sys.path.insert(0, os.getcwd()); sys.path.insert(0, os.path.join(os.getcwd(), "benchmarks"))
from suite.programs import by_name
from mirage_lab.ir.serialize import from_json
from mirage_lab.pipeline.autotune import autotune
import mirage_lab.pipeline.variants as _v
if os.environ.get("SPLIT_LO"):   # the experiment: splits for grids of a few tiles too (up to one block an SM)
    _v.SPLIT_BLOCKS_PER_SM = (float(os.environ["SPLIT_LO"]), 8)

out = os.environ.get("OUT", "/tmp")
secs = float(os.environ.get("TUNE", "120"))
for name in sys.argv[1:]:
    t0 = time.time()
    p = by_name(name); g = p.build()
    cands = [from_json(s) for s in json.load(open(f"devjobs/cands/{name}.json"))]
    rep = autotune(g, cands, tune_seconds=secs, stop_margin=None)
    rows = rep.rows()
    json.dump({"program": name, "variants": rows, "programs": [q.row() for q in rep.programs],
               "stop": rep.stop_reason}, open(f"{out}/all_{name}.json", "w"))
    timed = sorted((r for r in rows if r["median_us"]), key=lambda r: r["median_us"])
    progs = {q.lowering: round(q.median_us, 2) for q in rep.programs if q.ok and q.timings}
    best = {}
    for r in timed:
        best.setdefault(r["candidate"], r)
    print(f"== {name}: {len(timed)}/{len(rows)} timed in {time.time()-t0:.0f} s; programs {progs}; rho {rep.rank_correlation()}; "
          f"winner {rep.winner}; {rep.stop_reason[:90]}", flush=True)
    for c, r in sorted(best.items(), key=lambda kv: kv[1]["median_us"])[:8]:
        gr = cands[c]
        desc = " ".join(f"C{tuple(op.block_graph.grid_dim)}L{op.block_graph.forloop_range}" if op.block_graph is not None
                        else op.op_type for op in gr.ops if op.op_type != "input")
        print(f"  cand {c:2d} {r['median_us']:7.2f} est {r['estimate_us']:7.2f} t{r['threads']} {r['options']:40s} {desc}", flush=True)
