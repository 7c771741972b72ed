"""``import mirage_lab`` stays light: building a program, searching and reading a cached result need
no torch, numba, z3 or widget stack, so none of them loads with the package (torch alone is 1+ s).
The lazy names still resolve to the real objects on first use."""
from __future__ import annotations

from proc_helpers import run_python

HEAVY = ("torch", "numba", "z3", "plotly", "graphviz", "ipywidgets", "tqdm")

_CHECK = """
import json, sys
import mirage_lab as mi
g = mi.new_kernel_graph()
X = g.new_input((4, 64), mi.float16)
W = g.new_input((64, 64), "fp16")
g.mark_output(g.matmul(g.rms_norm(X), W))
loaded = sorted(m for m in %r if m in sys.modules)
import torch
from mirage_lab.interp.reference import run_reference
from mirage_lab.runtime import profile as prof_module
from mirage_lab.runtime.kernel import compile as rt_compile
import mirage_lab.runtime.profile
print("RESULTS " + json.dumps({
    "loaded": loaded,
    "run_reference": mi.run_reference is run_reference and mi.interp.run_reference is run_reference,
    "compile": mi.runtime.compile is rt_compile,
    "profile_module": mi.runtime.profile is mirage_lab.runtime.profile,
    "dtype_torch": [str(t.dtype.torch) for t in g.inputs],
    "as_dtype": repr(mi.ir.dtypes.as_dtype(torch.bfloat16)),
    "dir": "compile" in dir(mi.runtime) and "run_reference" in dir(mi),
}))
""" % (HEAVY,)


def test_import_loads_no_heavy_dependency_and_lazy_names_resolve(tmp_path):
    res = run_python(_CHECK, tmp_path, simulator=False, timeout=300)
    assert res == {"loaded": [], "run_reference": True, "compile": True, "profile_module": True,
                   "dtype_torch": ["torch.float16", "torch.float16"], "as_dtype": "mi.bfloat16", "dir": True}


_HIT = """
import json, sys
import mirage_lab as mi
from mirage_lab import examples as ex
best = mi.superoptimize(ex.rms_norm_linear_program(2, 32, 32), tune=False, workers=1, max_kernel_ops=3,
                       griddims=[(2, 1, 1)], generate_grids=False, progress=False)
print("RESULTS " + json.dumps({"from_cache": getattr(best, "from_cache", None) is not None,
                               "loaded": sorted(m for m in %r if m in sys.modules)}))
""" % (HEAVY,)


def test_a_cache_hit_in_a_new_process_loads_no_heavy_dependency(tmp_path):
    # the first process searches (numba, z3) and fills the cache; the second only reads it back
    first = run_python(_HIT, tmp_path, simulator=False, timeout=600)
    assert first["from_cache"] is False and "z3" in first["loaded"]
    assert run_python(_HIT, tmp_path, simulator=False, timeout=300) == {"from_cache": True, "loaded": []}
