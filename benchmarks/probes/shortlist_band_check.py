"""Probe (issue 19): is the shortlist's band (pipeline.SHORTLIST_BAND) safe under the cost model on this checkout?

For each suite_bench --dump file: the per-grid shortlist (no band) recomputed from the dumped candidates, joined to
the measured rows (the old estimates in the rows must reproduce), then each shortlisted candidate's best estimate
as a multiple of the best, beside its best measurement as a multiple of the winner's. The band is safe where every
candidate near the winner is rated inside it.

    python benchmarks/probes/shortlist_band_check.py benchmarks/found/dumps_2026-11-25b/*.json
"""
import json, sys, collections
from mirage_lab.ir.serialize import from_json
import mirage_lab.pipeline as P
for f in sys.argv[1:]:
    d = json.load(open(f))
    cands = [from_json(json.dumps(c)) for c in d['candidates']]
    picks = P.shortlist(cands, 8, band=float('inf'))
    by = collections.defaultdict(list)
    for v in d['variants']:
        by[v['candidate']].append(v)
    rated = {}
    for k, i in enumerate(picks):
        vs = P.lowering_variants(cands[i], candidate=k)
        ests = {(v.threads, v.options.tag()): P.estimate(v.graph, v.options).us for v in vs}
        rated[k] = min(ests.values())
        # check join: old estimates in rows match
    best_meas = min(v['median_us'] for v in d['variants'] if v['median_us'])
    best_rated = min(rated.values())
    print(f.split('/')[-1])
    for k in sorted(by):
        m = [v['median_us'] for v in by[k] if v['median_us']]
        print(f"  shortlist {k} (search {picks[k]}): rated {rated[k]/best_rated:5.2f}x best; measured best {min(m)/best_meas if m else float('nan'):5.2f}x winner; row est(old) {min(v['estimate_us'] for v in by[k]):.1f} now {rated[k]:.1f}")
