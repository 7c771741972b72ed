"""What every contender of the tuner's race shares: a check's error, timings, and how they read."""
from __future__ import annotations

from typing import Any


class Measured:
    """Mixin for the tuner's records (a μGraph variant, a program lowering): needs ``timings``
    (mode -> ``runtime.profile.Timing``), ``error`` and ``rel_err`` attributes."""

    timings: dict[str, Any]
    error: str | None
    rel_err: float | None

    @property
    def median_us(self) -> float:
        """The CUDA-graph replay's median (µs), ``inf`` when not timed."""
        t = self.timings.get("cuda_graph")
        return t.median_us if t is not None else float("inf")

    @property
    def ok(self) -> bool:
        """Checked and correct (a timing failure sets ``error`` too)."""
        return self.error is None and self.rel_err is not None
