# Spearman rho, estimate vs measured, within each tuner dump, H100 constants against others (2026-11-29 f).
# Extract dumps_call{1,3,4}.tgz of this folder into devjobs/out_call{1,3,4}/ first; run from the repository root:
#   python benchmarks/found/h200_2026-11-29f/rho_by_constants.py H200=hbm_bytes_us:3.9e6
import json, glob, sys
from dataclasses import replace
sys.path.insert(0, "benchmarks")
from rank_quality import options_from_tag
from mirage_lab.ir.serialize import from_dict
from mirage_lab.pipeline.variants import with_block_dim
from mirage_lab.pipeline.cost_model import estimate, H100, with_constants
def ranks(x):
    o=sorted(range(len(x)), key=lambda i:x[i]); r=[0]*len(x)
    for k,i in enumerate(o): r[i]=k
    return r
def rho(a,b):
    ra,rb=ranks(a),ranks(b); n=len(a); 
    if n<3: return float("nan")
    return 1-6*sum((x-y)**2 for x,y in zip(ra,rb))/(n*(n*n-1))
hws = {"H100": H100}
for arg in sys.argv[1:]:
    k, v = arg.split("=")
    hws[k] = with_constants(**{kk: float(vv) for kk, vv in (p.split(":") for p in v.split(","))})
files = sorted(set(glob.glob("devjobs/out_call*/dumps/*.json")))
tot = {k: [] for k in hws}
for f in files:
    d = json.load(open(f))
    rows = [v for v in d["variants"] if v.get("median_us") and str(v["candidate"]) in d["tuned"]]
    if len(rows) < 4: continue
    meas = [v["median_us"] for v in rows]
    out = []
    for k, hw in hws.items():
        est = [estimate(with_block_dim(from_dict(d["tuned"][str(v["candidate"])]), v["threads"]), options_from_tag(v["options"]), hw).us for v in rows]
        r = rho(est, meas); tot[k].append(r)
        best = min(range(len(rows)), key=lambda i: meas[i]); place = sorted(est).index(est[best]) + 1
        out.append(f"{k} rho {r:.2f} best@{place}")
    print(f.split("/")[-3][-5:], f.split("/")[-1][:36], len(rows), " | ".join(out))
print({k: round(sum(v)/len(v), 3) for k, v in tot.items()})
