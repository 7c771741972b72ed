"""Helpers for pipeline tests (a unique module name: test folders share one import namespace)."""
from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# the search settings that keep a superoptimize of a small RMSNorm + Linear to seconds
SMALL_SEARCH = dict(workers=1, max_kernel_ops=4, max_block_ops=5, griddims=[(4, 1, 1)], franges=[4])
