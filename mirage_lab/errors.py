"""The package's error types.

Every error mirage_lab raises on bad input is a :class:`MirageLabError`, so a notebook
user can catch one type. Subclasses say which stage complained.
"""
from __future__ import annotations


class MirageLabError(Exception):
    """Base class of every error mirage_lab raises on bad input or bad state."""


class GraphBuildError(MirageLabError, ValueError):
    """A kernel or block graph op was given inputs it cannot accept (shapes, maps, dtypes)."""


class SerializationError(MirageLabError, ValueError):
    """A μGraph file or JSON text is corrupt, of another format, or of a newer version."""


class ReferenceRunError(MirageLabError, ValueError):
    """The reference interpreter was given inputs that do not fit the graph."""


class GraphvizMissingError(MirageLabError, RuntimeError):
    """The Graphviz ``dot`` binary is not installed, so a drawing cannot be rendered."""


class CodegenError(MirageLabError, RuntimeError):
    """A μGraph cannot be lowered to a GPU kernel (an unsupported op, dtype or shape)."""


class KernelInputError(MirageLabError, ValueError):
    """A compiled kernel was called with inputs that do not fit it (count, shape, dtype, device)."""


class GpuFaultError(MirageLabError, RuntimeError):
    """The GPU faulted while a kernel ran (an illegal memory access, a launch failure): the error leaves the
    process's CUDA context unable to run anything more, so the work stops and says how to go on."""
