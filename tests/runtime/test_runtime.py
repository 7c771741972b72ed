"""Runtime behaviour that needs no kernel launch: input checks, caching, torch baselines."""
from __future__ import annotations

import pytest
import torch

import mirage_lab as mi
from mirage_lab.errors import KernelInputError, MirageLabError
from mirage_lab.examples import gqa_program, rms_norm_linear_fused, rms_norm_linear_program
from mirage_lab.runtime import compile, floor_us, to_torch_fn


@pytest.fixture
def kernel(tmp_path, monkeypatch):
    monkeypatch.setenv("MIRAGE_LAB_CACHE", str(tmp_path))
    return compile(rms_norm_linear_fused(4, 256, 256, grid=8, forloop_range=4), cache_dir=tmp_path)


def test_module_is_cached_on_disk_by_content_hash(kernel, tmp_path):
    assert kernel.path is not None and kernel.path.parent == tmp_path and kernel.path.exists()
    again = compile(rms_norm_linear_fused(4, 256, 256, grid=8, forloop_range=4), cache_dir=tmp_path)
    assert again is kernel  # same μGraph content: same compiled module
    other = compile(rms_norm_linear_fused(4, 256, 256, grid=4, forloop_range=4), cache_dir=tmp_path)
    assert other.path != kernel.path


@pytest.mark.parametrize("inputs,match", [
    (None, "takes 2 inputs"),
    ("x", "list of torch tensors"),
    ([torch.zeros(4, 256, dtype=torch.float16)], "takes 2 inputs"),
    ([torch.zeros(4, 128, dtype=torch.float16), torch.zeros(256, 256, dtype=torch.float16)], "shape"),
    ([torch.zeros(4, 256), torch.zeros(256, 256)], "dtype"),
    ([torch.zeros(4, 256, dtype=torch.float16), "w"], "torch.Tensor"),
])
def test_wrong_inputs_are_refused(kernel, inputs, match):
    with pytest.raises(KernelInputError, match=match):
        kernel(inputs=inputs)


def test_cpu_tensors_are_refused_outside_the_simulator(kernel):
    if kernel.simulator:
        pytest.skip("the simulator runs on CPU tensors")
    xs = [torch.zeros(4, 256, dtype=torch.float16), torch.zeros(256, 256, dtype=torch.float16)]
    with pytest.raises(KernelInputError, match="CUDA tensors"):
        kernel(inputs=xs)
    assert issubclass(KernelInputError, MirageLabError)


def test_compile_rejects_non_graphs():
    with pytest.raises(MirageLabError):
        compile("graph")  # type: ignore[arg-type]


def test_torch_fn_matches_reference():
    g = rms_norm_linear_program(4, 64, 32)
    X, W = torch.randn(4, 64), torch.randn(64, 32)
    (out,) = to_torch_fn(g)(X, W)
    (ref,) = mi.run_reference(g, [X.double(), W.double()])
    assert float((out.double() - ref).norm() / ref.norm()) < 1e-5


def test_torch_fn_runs_customized_ops_through_the_interpreter():
    g = rms_norm_linear_fused(4, 256, 256, grid=8, forloop_range=4)
    X, W = torch.randn(4, 256), torch.randn(256, 256)
    (out,) = to_torch_fn(g)(X, W)
    (ref,) = mi.run_reference(rms_norm_linear_program(4, 256, 256), [X.double(), W.double()])
    assert float((out.double() - ref).norm() / ref.norm()) < 1e-5


def test_floor():
    assert abs(floor_us(rms_norm_linear_program(16, 4096, 4096)) - 11.2) < 0.2   # 33.8 MB / 3.0 TB/s
    assert abs(floor_us(gqa_program(64, 1, 128, 4096)) - 44.7) < 0.1


def test_inputs_are_checked_again_after_an_in_place_change(kernel):
    """The checked-input memo never hides a tensor changed in place (t_(), resize_(), a new input)."""
    if kernel.simulator or not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU: the memo is for CUDA tensors")
    X = torch.zeros(4, 256, dtype=torch.float16, device="cuda")
    W = torch.zeros(256, 256, dtype=torch.float16, device="cuda")
    assert kernel.check_inputs([X, W]) == [X, W]
    assert kernel.check_inputs([X, W])[1] is W           # remembered: same tensors, same versions
    W.t_()                                               # in place: a transposed, non-contiguous W
    (_, w2) = kernel.check_inputs([X, W])
    assert w2 is not W and w2.is_contiguous()            # checked again and copied
    X.resize_(2, 256)
    with pytest.raises(KernelInputError, match="shape"):
        kernel.check_inputs([X, W])
