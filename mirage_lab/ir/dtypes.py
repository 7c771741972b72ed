"""Element types of μGraph tensors (the three Mirage supports)."""
from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import GraphBuildError

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class DType:
    """An element type: its name, its size in bytes and the torch dtype it maps to."""

    name: str
    itemsize: int

    @property
    def torch(self) -> "torch.dtype":
        import torch  # here, not at import: building and searching a graph need no torch (1+ s to import)

        return getattr(torch, self.name)

    def __repr__(self) -> str:
        return f"mi.{self.name}"


float16 = DType("float16", 2)
bfloat16 = DType("bfloat16", 2)
float32 = DType("float32", 4)

ALL_DTYPES = {d.name: d for d in (float16, bfloat16, float32)}
_ALIASES = {"fp16": "float16", "half": "float16", "bf16": "bfloat16", "fp32": "float32", "float": "float32"}


def as_dtype(value: Any, *, where: str = "new_input") -> DType:
    """Turn ``mi.float16``, ``"float16"`` or ``torch.float16`` into a :class:`DType`.

    >>> as_dtype("fp16")
    mi.float16
    """
    if isinstance(value, DType):
        return value
    torch = sys.modules.get("torch")  # a torch dtype can only come from a process that imported torch
    if torch is not None and isinstance(value, torch.dtype):
        for name in ALL_DTYPES:
            if getattr(torch, name) == value:
                return ALL_DTYPES[name]
    if isinstance(value, str):
        name = _ALIASES.get(value, value)
        if name in ALL_DTYPES:
            return ALL_DTYPES[name]
    raise GraphBuildError(
        f"{where}: unknown dtype {value!r}; use one of mi.float16, mi.bfloat16, mi.float32"
    )
