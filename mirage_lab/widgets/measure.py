"""GPU measurements for the explorer: torch baselines once, then each candidate, reported one by one.

Uses the runtime's profiler (:mod:`mirage_lab.runtime.profile`) the way its own
``select_fastest`` does: every candidate is compiled, checked against the reference
interpreter (float64) and timed with CUDA-graph replay on L2-cold input copies. Needs a
CUDA GPU; :func:`gpu_available` says whether there is one.

    >>> gpu_available() in (True, False)
    True
"""
from __future__ import annotations

import math
from typing import Any, Callable, Sequence

from ..ir.kernel_graph import KernelGraph


def gpu_available() -> bool:
    """Whether torch sees a CUDA device (False where torch is a CPU build)."""
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:  # a broken driver is the same as no GPU here
        return False


def random_inputs(program: KernelGraph, device: str = "cuda", seed: int = 0) -> list[Any]:
    """Inputs in the program's shapes and dtypes, scaled by 1/sqrt(last dim) so exp and products stay finite."""
    import torch

    gen = torch.Generator(device="cpu").manual_seed(seed)
    out = []
    for t in program.inputs:
        x = torch.randn(tuple(t.dims), generator=gen, dtype=torch.float32) / math.sqrt(max(1, t.dims[-1]))
        out.append(x.to(device=device, dtype=t.dtype.torch))
    return out


def measure(program: KernelGraph, candidates: Sequence[tuple[int, KernelGraph]], *,
            on_result: Callable[[str, Any], None], inputs: Sequence[Any] | None = None,
            baselines: bool = True, compile_mode: str | None = "default", repeats: int = 200,
            should_stop: Callable[[], bool] = lambda: False) -> None:
    """Time the baselines, then each ``(index, graph)``; call ``on_result(name, value)`` as each finishes.

    ``name`` is a profiler baseline key (``"torch_eager"``, ...) with a ``Timing``, or
    ``"candidate {index}"`` with the runtime's ``Candidate`` (timings, or an error).
    """
    from ..interp.reference import run_reference
    from ..runtime.profile import profile_baselines, select_fastest

    xs = list(inputs) if inputs is not None else random_inputs(program)
    ref = run_reference(program, [x.double() for x in xs])
    if baselines and not should_stop():
        for name, timing in profile_baselines(program, xs, repeats=repeats, compile_mode=compile_mode).items():
            on_result(name, timing)
    for index, graph in candidates:
        if should_stop():
            return
        sel = select_fastest([graph], xs, reference=ref, repeats=repeats)
        on_result(f"candidate {index}", sel.candidates[0])
