"""Run chosen subtrees of a suite program's search alone, in one process, and time its hits (issue 19).

    python benchmarks/probes/subtree_probe.py PROGRAM full|small|rows:16 0,1|all CAP_S [setting=value ...]

Prints the task count, a line at each candidate (seconds, states) and each subtree's stats. Used for
RESULTS.md, "Suite programs with no candidate".
"""
import sys, time
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from suite.programs import by_name, SuiteProgram
from suite import kinds
from mirage_lab.search.config import SearchConfig

from mirage_lab.search.generator import Generator, Target, Cancelled
import mirage_lab as mi
name, which, idxs, cap = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
over = dict(a.split("=") for a in sys.argv[5:])
p = by_name(name)
if which == "small": g = p.build(True)
elif which == "full": g = p.build(False)
else:
    shape = dict(p.shape); shape.update({k: int(v) for k, v in (x.split(":") for x in which.split(","))})
    g = kinds.BUILDERS[p.kind](**shape, dtype=getattr(mi, p.dtype))
print([t.dims for t in g.inputs])
kw = {k: (int(v) if v.lstrip('-').isdigit() else v) for k, v in over.items()}
cfg = SearchConfig.from_args(p.config, **kw).with_program_ops(g)
t0 = time.time()
gen = Generator(Target(g, cfg), cfg, fingerprint_backend="numpy", should_stop=lambda: time.time() - t0 > cap, on_hit=lambda h: print("HIT at %.1fs states %d" % (time.time() - t0, gen.stats.states), flush=True))
tasks = gen.all_tasks()
print("tasks", len(tasks), "%.1fs" % (time.time() - t0))
sel = range(len(tasks)) if idxs == "all" else [int(i) for i in idxs.split(",")]
for i in sel:
    t1 = time.time(); s0 = gen.stats.states if hasattr(gen.stats, "states") else None
    try:
        hits = gen.run_task(tasks[i])
    except Cancelled:
        print("task", i, "cancelled after %.1fs" % (time.time() - t1), gen.stats); break
    if hits or idxs != "all":
        print("task", i, "hits", len(hits), "%.1fs" % (time.time() - t1), "at %.1fs" % (time.time() - t0), gen.stats)
    if hits and idxs == "all": break
else:
    print("end", "%.1fs" % (time.time() - t0), gen.stats)
