"""Codegen test fixtures: generated kernels run in subprocesses under the CUDA simulator."""
from __future__ import annotations

from pathlib import Path

import pytest

from codegen_cases import CASES, SPLIT_CASES
from proc_helpers import ROOT, run_python

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="session")
def sim_results(tmp_path_factory) -> dict:
    """Every case of cases.py, compiled and run once under the simulator."""
    return run_python(HERE / "sim_runner.py", tmp_path_factory.mktemp("sim"), simulator=True, timeout=900, cwd=ROOT)


@pytest.fixture(scope="session")
def sim_results_mma(tmp_path_factory) -> dict:
    """The same cases with ``CodegenOptions(mma=True)``: streamed matmuls on (emulated) tensor cores."""
    return run_python(HERE / "sim_runner.py", tmp_path_factory.mktemp("sim_mma"), args=["--mma"], simulator=True,
                      timeout=900, cwd=ROOT)


@pytest.fixture(scope="session")
def sim_results_pipelined(tmp_path_factory) -> dict:
    """Tensor cores plus register prefetch three iterations ahead (``pipeline_depth=3``)."""
    return run_python(HERE / "sim_runner.py", tmp_path_factory.mktemp("sim_pipe"), args=["--mma", "--pipeline=64x3"],
                      simulator=True, timeout=900, cwd=ROOT)


@pytest.fixture(scope="session")
def sim_results_mv(tmp_path_factory) -> dict:
    """The 32-column tensor-core cases with ``mma_b16``: 16-byte B loads, emulated movmatrix."""
    return run_python(HERE / "sim_runner.py", tmp_path_factory.mktemp("sim_mv"), args=["--mma", "--mv"],
                      simulator=True, timeout=900, cwd=ROOT)


@pytest.fixture(scope="session", params=["64x1", "64x2"])
def sim_results_mv_pipelined(request, tmp_path_factory) -> dict:
    """The same with B prefetched into registers: one iteration ahead (moved), or two register sets."""
    return run_python(HERE / "sim_runner.py", tmp_path_factory.mktemp("sim_mv_pipe"),
                      args=["--mma", "--mv", f"--pipeline={request.param}"], simulator=True, timeout=900, cwd=ROOT)


@pytest.fixture(scope="session")
def sim_results_smem(tmp_path_factory) -> dict:
    """SMEM_CASES with ``CodegenOptions(mma=True, smem_kb=227)``: pools past 48 KB in dynamic shared memory."""
    return run_python(HERE / "sim_runner.py", tmp_path_factory.mktemp("sim_smem"), args=["--mma", "--smem=227"],
                      simulator=True, timeout=900, cwd=ROOT)



@pytest.fixture(scope="session")
def sim_results_async(tmp_path_factory) -> dict:
    """ASYNC_CASES with ``CodegenOptions(mma=True, async_stages=3, smem_kb=227)``: a cp.async ring of 3 stages."""
    return run_python(HERE / "sim_runner.py", tmp_path_factory.mktemp("sim_async"),
                      args=["--mma", "--async=3", "--smem=227"], simulator=True, timeout=900, cwd=ROOT)


@pytest.fixture(scope="session", params=["staged", "ring", "pipelined"])
def sim_results_ldmatrix(request, tmp_path_factory) -> dict:
    """ASYNC_CASES with ldmatrix fragments (``CodegenOptions.ldmatrix``): register-staged tiles kept as loaded, a
    cp.async ring of 3 stages, or two register sets (``pipeline_words=64, pipeline_depth=2``, a tuner option set)."""
    extra = {"staged": [], "ring": ["--async=3"], "pipelined": ["--pipeline=64x2"]}[request.param]
    res = run_python(HERE / "sim_runner.py", tmp_path_factory.mktemp("sim_ldsm"),
                     args=["--mma", "--ldmatrix", "--smem=227", *extra], simulator=True, timeout=900, cwd=ROOT)
    return {"unrolled": 2 if request.param == "pipelined" else 1, **res}   # the loop body written out twice


@pytest.fixture(scope="session", params=["2", "4-mma"])
def sim_results_split(request, tmp_path_factory) -> dict:
    """SPLIT_CASES with each tile's loop split over blocks (``CodegenOptions.split``): 2 blocks (FMA), or 4 on
    tensor cores with two register sets of prefetch."""
    args = {"2": ["--split=2"], "4-mma": ["--split=4", "--mma", "--pipeline=64x2"]}[request.param]
    S = int(request.param[0])
    # split 4 on the cases with a loop it divides (the others are the unsplit kernels of the split-2 run)
    names = [n for n in SPLIT_CASES if S == 2 or any(op.block_graph.forloop_range % S == 0
                                                       for op in dict((c[0], c[1]) for c in CASES)[n]().customized_ops)]
    res = run_python(HERE / "sim_runner.py", tmp_path_factory.mktemp("sim_split"), args=[*args, *names],
                     simulator=True, timeout=900, cwd=ROOT)
    return {"split": S, **res}

