"""The program itself as a lowering: its torch function called like a kernel, and exported as a torch-only module."""
from __future__ import annotations

import importlib.util

import pytest
import torch

import mirage_lab as mi
from mirage_lab import examples as ex
from mirage_lab.errors import KernelInputError
from mirage_lab.runtime.export import export_program
from mirage_lab.runtime.program import ProgramFunction


def _load(path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _rel(a, b):
    return float((a.double() - b.double()).norm() / b.double().norm())


def test_exported_program_runs_its_ops_with_torch_only(tmp_path):
    g = ex.gated_mlp_program(2, 64, 32, dtype=mi.float32)
    xs = [torch.randn(*t.dims) for t in g.inputs]
    (ref,) = mi.run_reference(g, xs)
    path = export_program(g, tmp_path / "mlp.py", latency_us=4.25, device="NVIDIA H100", note="why it won")
    text = path.read_text()
    assert "numba" not in text and "mirage_lab" not in text.split('"""', 2)[2]   # no import of either
    assert "4.25 µs" in text and "NVIDIA H100" in text and "why it won" in text and "COMPILE = False" in text
    mod = _load(path)
    assert _rel(mod.forward(*xs)[0], ref) < 1e-6 and _rel(mod.run(xs)[0], ref) < 1e-6
    with pytest.raises(ValueError, match=r"input 1: expected float32\[64, 32\]"):
        mod.forward(xs[0], xs[0], xs[2])
    compiled = _load(export_program(g, tmp_path / "mlp_compiled.py", lowering="torch.compile"))
    assert compiled.COMPILE is True
    compiled.COMPILE_OPTIONS = {"backend": "eager"}   # dynamo's tracing without inductor's compile time
    assert _rel(compiled.forward(*xs)[0], ref) < 1e-6


def test_export_program_refuses_what_it_cannot_write(tmp_path):
    fused = ex.rms_norm_linear_fused(4, 64, 64, grid=4, forloop_range=4)
    with pytest.raises(mi.MirageLabError, match="customized ops.*runtime.export"):
        export_program(fused, tmp_path / "x.py")
    with pytest.raises(mi.MirageLabError, match="lowering must be"):
        export_program(ex.rms_norm_linear_program(4, 64, 64), tmp_path / "x.py", lowering="cuda")


def test_program_function_is_called_like_a_kernel():
    g = ex.rms_norm_linear_program(4, 64, 32)
    f = ProgramFunction(g, compiled=False)
    X, W = torch.randn(4, 64).half(), torch.randn(64, 32).half()
    (ref,) = mi.run_reference(g, [X.double(), W.double()])
    assert _rel(f([X, W])[0], ref) < 2e-3 and _rel(f((X, W), graph=True)[0], ref) < 2e-3  # no graph on a CPU
    with pytest.raises(KernelInputError, match="has dtype torch.float32 but the program declares torch.float16"):
        f([X.float(), W])
    with pytest.raises(KernelInputError, match=r"input 1 has shape \[64,64\]"):
        f([X, torch.randn(64, 64).half()])
    with pytest.raises(KernelInputError, match="got numpy.ndarray; convert it with torch.from_numpy"):
        f([X.numpy(), W])


def test_torch_compile_lowering_is_made_at_first_use_not_at_construction():
    # a cache hit whose winner is torch.compile must not pay the import of torch._dynamo until it is called
    g = ex.rms_norm_linear_program(4, 64, 32, dtype=mi.float32)
    f = ProgramFunction(g, compiled=True)
    assert f._fn is None and f.lowering == "torch.compile"
    X, W = torch.randn(4, 64), torch.randn(64, 32)
    (ref,) = mi.run_reference(g, [X.double(), W.double()])
    assert _rel(f([X, W])[0], ref) < 1e-5
    assert f._fn is not None
