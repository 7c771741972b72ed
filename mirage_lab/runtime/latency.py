"""``LatencyRow``: one measured latency, the single shape measurements take from the runtime to the plots.

Rows are built where the numbers are made and read as they are everywhere after:

* :func:`baseline_rows` from the profiler's ``{name: Timing}`` (``profile_baselines``);
* :meth:`mirage_lab.pipeline.Selection.latency_rows` from ``mirage_lab.pipeline.select_fastest``;
* :meth:`mirage_lab.pipeline.TuneReport.latency_rows` (and ``VariantResult.latency_row``)
  from the autotuner, which ``superoptimize``, the explorer's Measure and the CLI use.

:func:`mirage_lab.viz.plots.latency_figure`, the explorer and ``SearchResult.measurements``
take lists of rows and nothing else, so no reader guesses what a dict of numbers meant.

    >>> row = LatencyRow("candidate 0", "candidate", 12.9, p10_us=12.5, p90_us=13.6, candidate=0,
    ...                  options="t256/fma", device="NVIDIA H100")
    >>> row.label, row.kind, row.median_us, row.spread
    ('candidate 0', 'candidate', 12.9, (12.5, 13.6))
    >>> LatencyRow("x", "kernel", 1.0)
    Traceback (most recent call last):
    ...
    ValueError: LatencyRow.kind must be 'candidate' or 'baseline', got 'kernel'
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Iterable, Mapping

if TYPE_CHECKING:  # profile imports this module; Timing is only named in annotations here
    from .profile import Timing

CANDIDATE, BASELINE = "candidate", "baseline"
KINDS = (CANDIDATE, BASELINE)

#: What the profiler calls its baselines, and the labels rows (and so the plots) give them.
BASELINE_LABELS = {
    "torch_eager": "torch eager",
    "torch_cuda_graph": "torch + CUDA graph",
    "torch_compile": "torch.compile",
    "torch_compile_cuda_graph": "torch.compile + CUDA graph",
}


@dataclass(frozen=True)
class LatencyRow:
    """One contender's measured device time per call, in microseconds.

    ``label`` is what a plot or table shows; ``kind`` is ``"candidate"`` (a μGraph) or
    ``"baseline"`` (torch). ``p10_us``/``p90_us`` are given when the profiler took enough
    samples. ``mode`` is how calls were launched (``cuda_graph`` replay or ``eager``),
    ``device`` the GPU's name, ``options`` how a candidate was lowered (threads per block and
    codegen options tag, e.g. ``"t256/fma"``), ``candidate`` its index in the caller's list.
    """

    label: str
    kind: str
    median_us: float
    p10_us: float | None = None
    p90_us: float | None = None
    mode: str = "cuda_graph"
    device: str = ""
    options: str = ""
    candidate: int | None = None

    def __post_init__(self) -> None:
        # checked here, once, so readers never have to (a NaN or inf is an untimed contender: no row at all)
        if self.kind not in KINDS:
            raise ValueError(f"LatencyRow.kind must be 'candidate' or 'baseline', got {self.kind!r}")
        for name in ("median_us", "p10_us", "p90_us"):
            v = getattr(self, name)
            if v is None and name != "median_us":
                continue
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise ValueError(f"LatencyRow.{name} must be a finite number of microseconds, got {v!r}")
            object.__setattr__(self, name, float(v))

    @property
    def spread(self) -> tuple[float, float] | None:
        """``(p10_us, p90_us)`` when both are known."""
        return None if self.p10_us is None or self.p90_us is None else (self.p10_us, self.p90_us)

    @classmethod
    def from_timing(cls, label: str, timing: Timing, *, kind: str, device: str = "", options: str = "",
                    candidate: int | None = None) -> LatencyRow:
        """A row from a profiler :class:`~mirage_lab.runtime.profile.Timing` (its mode, median, p10, p90)."""
        return cls(label, kind, timing.median_us, timing.p10_us, timing.p90_us, timing.mode, device, options,
                   candidate)

    def as_dict(self) -> dict[str, Any]:
        """The row as plain values (JSON-ready)."""
        return asdict(self)


def baseline_rows(timings: Mapping[str, Timing], *, device: str = "") -> list[LatencyRow]:
    """Rows for the profiler's baselines (``profile_baselines``'s ``{name: Timing}``), named by :data:`BASELINE_LABELS`.

    Host-side call times (``*python_call*``) are left out: they measure Python, not the GPU.

        >>> from mirage_lab.runtime.profile import Timing
        >>> rows = baseline_rows({"torch_eager": Timing("torch", "eager", 41.0, 40.0, 43.0, 200),
        ...                       "torch_python_call": Timing("torch", "python_call", 60.0, 59.0, 62.0, 200)})
        >>> [(r.label, r.kind, r.mode) for r in rows]
        [('torch eager', 'baseline', 'eager')]
    """
    from .profile import Timing

    out = []
    for key, t in timings.items():
        if not isinstance(t, Timing):
            raise TypeError(f"baseline_rows: {key!r} is a {type(t).__name__}, expected a runtime.profile.Timing")
        if "python_call" not in key:
            out.append(LatencyRow.from_timing(BASELINE_LABELS.get(key, key), t, kind=BASELINE, device=device))
    return out


def check_rows(rows: Iterable[LatencyRow] | None, who: str) -> list[LatencyRow]:
    """``rows`` as a list, or a ``TypeError`` (naming ``who`` and the expected type) for anything else.

    The one check every reader of rows makes: the plots, the explorer, the HTML report.

        >>> check_rows({"candidate 0": 12.9}, "latency_figure")
        Traceback (most recent call last):
        ...
        TypeError: latency_figure: expected a sequence of mirage_lab.runtime.LatencyRow, got dict ...
    """
    hint = ("build them with TuneReport.latency_rows(), Selection.latency_rows(), "
            "mirage_lab.runtime.baseline_rows({name: Timing}) or LatencyRow(label, kind, median_us)")
    if rows is None:
        return []
    if isinstance(rows, (LatencyRow, str, bytes, Mapping)) or not isinstance(rows, Iterable):
        raise TypeError(f"{who}: expected a sequence of mirage_lab.runtime.LatencyRow, got {type(rows).__name__} "
                        f"({hint})")
    out = list(rows)
    for r in out:
        if not isinstance(r, LatencyRow):
            raise TypeError(f"{who}: expected a sequence of mirage_lab.runtime.LatencyRow, got an item of type "
                            f"{type(r).__name__} ({hint})")
    return out


def current_device() -> str:
    """The name of the CUDA device torch uses, or ``""`` without one (rows record where they were measured)."""
    try:
        import torch

        return torch.cuda.get_device_name() if torch.cuda.is_available() else ""
    except Exception:  # a broken driver: the row still stands, without a device name
        return ""


__all__ = ["LatencyRow", "baseline_rows", "check_rows", "BASELINE_LABELS", "CANDIDATE", "BASELINE", "current_device"]
