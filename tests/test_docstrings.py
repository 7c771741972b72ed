"""The examples in the docstrings run as written: one test per module, for every package."""
from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    # the foundation
    "mirage_lab", "mirage_lab.ir.kernel_graph", "mirage_lab.ir.block_graph", "mirage_lab.ir.dtypes",
    "mirage_lab.ir.serialize", "mirage_lab.interp.reference", "mirage_lab.examples",
    "mirage_lab.viz", "mirage_lab.viz.graphviz_draw", "mirage_lab.report", "mirage_lab.cli",
    # the verifier and the abstract expressions
    "mirage_lab.verify", "mirage_lab.verify.field", "mirage_lab.verify.tile_plans", "mirage_lab.verify.numpy_backend",
    "mirage_lab.verify.backends", "mirage_lab.verify.fingerprint",
    "mirage_lab.verify.equivalence", "mirage_lab.verify.float_check", "mirage_lab.expr", "mirage_lab.expr.terms", "mirage_lab.expr.abstract",
    "mirage_lab.expr.oracle",
    # the search and the code generator
    "mirage_lab.search.config", "mirage_lab.search.axes", "mirage_lab.search.arrays", "mirage_lab.gpu.numba_compat",
    "mirage_lab.codegen", "mirage_lab.codegen.source", "mirage_lab.codegen.plan", "mirage_lab.codegen.block_kernel",
    "mirage_lab.codegen.elementwise",
    "mirage_lab.ops", "mirage_lab.ir.tiling", "mirage_lab.lazy",
    # the pipeline between search and runtime
    "mirage_lab.ir.hooks", "mirage_lab.pipeline.inputs", "mirage_lab.pipeline.variants", "mirage_lab.pipeline.cost_model",
    "mirage_lab.pipeline.stopping", "mirage_lab.runtime.program", "mirage_lab.pipeline.library", "mirage_lab.pipeline.ranking",
    "mirage_lab.pipeline.scheduling", "mirage_lab.pipeline.calibration",
    # the notebook widgets and plots (the explorer's own example runs a search: tests/widgets covers it)
    "mirage_lab.lab", "mirage_lab.viz.plots", "mirage_lab.widgets.records", "mirage_lab.widgets.table",
    "mirage_lab.widgets.detail", "mirage_lab.widgets.measure", "mirage_lab.widgets.progress",
    "mirage_lab.widgets.session", "mirage_lab.runtime.latency",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    mod = importlib.import_module(name)
    result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False)
    assert result.failed == 0, f"{result.failed} docstring example(s) of {name} failed (run python -m doctest -v)"
    assert result.attempted > 0
