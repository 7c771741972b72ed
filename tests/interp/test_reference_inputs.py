"""Wrong kinds of inputs to the reference interpreter and to a compiled kernel's input check."""
from types import SimpleNamespace

import numpy as np
import pytest
import torch

import mirage_lab as mi
from mirage_lab.errors import KernelInputError, ReferenceRunError
from mirage_lab.runtime.kernel import CompiledKernel


def _graph():
    g = mi.new_kernel_graph()
    x = g.new_input((2, 3), dtype=mi.float32)
    g.mark_output(g.exp(x))
    return g


@pytest.mark.parametrize("inputs, needle", [
    (None, r"no inputs given; the graph takes 1 \(float32\[2,3\]\): call mi.run_reference\(graph, \[x, ...\]\)"),
    (np.zeros((2, 3)), r"got ndarray; convert it with torch.from_numpy\(x\); wrap them in a list"),
    (torch.zeros(2, 3), "got a single tensor; wrap them in a list"),
    ([np.zeros((2, 3))], r"input 0 must be a torch.Tensor, got ndarray; convert it with torch.from_numpy"),
    ([], "takes 1 inputs"), ([torch.zeros(3, 2)], "has shape"), ([torch.zeros(2, 3, dtype=torch.int32)], "floating point"),
    ("x", "got str"),
])
def test_run_reference_says_how_to_pass_inputs(inputs, needle):
    with pytest.raises(ReferenceRunError, match=needle):
        mi.run_reference(_graph(), inputs)


@pytest.mark.parametrize("inputs, needle", [
    (None, r"call it as kernel\(inputs=\[...\]\)"),
    (np.zeros((2, 3), np.float32), r"got ndarray \(convert it with torch.from_numpy\(x\), then .cuda\(\)\)"),
    ([np.zeros((2, 3), np.float32)], r"input 0 must be a torch.Tensor, got ndarray \(convert it"),
    ([torch.zeros(2, 3, dtype=torch.float16)], "has dtype torch.float16"),
])
def test_a_compiled_kernels_input_check_says_how_to_pass_inputs(inputs, needle):
    kernel = SimpleNamespace(graph=_graph(), simulator=True)   # the check reads only these two
    with pytest.raises(KernelInputError, match=needle):
        CompiledKernel._check_inputs_slow(kernel, inputs)
