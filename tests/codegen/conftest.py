"""Codegen test fixtures: generated kernels run in subprocesses under the CUDA simulator."""
from __future__ import annotations

import pytest

from codegen_proc import HERE, run_script


@pytest.fixture(scope="session")
def sim_results(tmp_path_factory) -> dict:
    """Every case of cases.py, compiled and run once under the simulator."""
    return run_script(HERE / "sim_runner.py", [], tmp_path_factory.mktemp("sim"), simulator=True)


@pytest.fixture(scope="session")
def sim_results_mma(tmp_path_factory) -> dict:
    """The same cases with ``CodegenOptions(mma=True)``: streamed matmuls on (emulated) tensor cores."""
    return run_script(HERE / "sim_runner.py", ["--mma"], tmp_path_factory.mktemp("sim_mma"), simulator=True)


@pytest.fixture(scope="session")
def sim_results_pipelined(tmp_path_factory) -> dict:
    """Tensor cores plus register prefetch three iterations ahead (``pipeline_depth=3``)."""
    return run_script(HERE / "sim_runner.py", ["--mma", "--pipeline=64x3"], tmp_path_factory.mktemp("sim_pipe"),
                      simulator=True)
