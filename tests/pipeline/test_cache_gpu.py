"""On a real GPU: a second superoptimize in a new process returns the measured winner from the cache, compiled."""
from __future__ import annotations

import pytest

from mirage_lab.pipeline import gpu_available
from pipe_helpers import SMALL_SEARCH
from proc_helpers import run_python

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU")]

RUN = '''
import json, time, torch, mirage_lab as mi
from mirage_lab import examples as ex
g = ex.rms_norm_linear_program(16, 256, 512)
t0 = time.perf_counter()
best = g.superoptimize(tune_seconds=120, max_candidates=2, **SETTINGS)
secs = time.perf_counter() - t0
X, W = torch.randn(16, 256, device="cuda").half(), torch.randn(256, 512, device="cuda").half()
(o,) = best(inputs=[X, W])
(ref,) = mi.run_reference(g, [X.double(), W.double()])
print("RESULTS " + json.dumps({"secs": secs, "from": best.from_cache, "latency": best.latency_us,
      "compiled": best._kernel is not None, "tag": best.report.best.variant.tag, "device": best.report.device,
      "err": float((o.double() - ref).norm() / ref.norm()), "rows": len(best.search_result.measurements)}))
'''


def test_a_new_process_gets_the_measured_winner_from_the_cache_in_about_a_second(tmp_path):
    code = RUN.replace("SETTINGS", repr({**SMALL_SEARCH, "griddims": [(16, 1, 1), (32, 1, 1)]}))
    first = run_python(code, tmp_path, simulator=False, timeout=900)
    second = run_python(code, tmp_path, simulator=False, timeout=900)       # the same MIRAGE_LAB_CACHE (tmp/cache)
    assert first["from"] is None and second["from"]
    assert second["latency"] == first["latency"] and second["tag"] == first["tag"]
    assert second["device"] == first["device"] and second["rows"] == first["rows"] > 0
    assert second["compiled"] and second["err"] < 2e-3
    assert second["secs"] < 3.0, second["secs"]       # compiled from numba's disk cache, nothing timed
