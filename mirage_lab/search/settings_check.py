"""Search settings checked in the caller's cell, before any thread or process starts.

``mi.lab.explore``, ``run_search`` / ``g.search`` and ``superoptimize`` take the search's
settings as keywords. A typo or a wrong value used to surface late (inside the widget's
background thread, or as a raw ``TypeError`` deep in the executor); :func:`validate_search_settings`
checks them all first and raises a :class:`~.config.SearchConfigError` (a ``MirageLabError``) that
names the setting, what it got, and what it accepts, with "did you mean" for unknown names.

    >>> validate_search_settings(None, {"max_kernel_opz": 3})
    Traceback (most recent call last):
    ...
    mirage_lab.search.config.SearchConfigError: unknown search setting 'max_kernel_opz'; did you mean 'max_kernel_ops'? ...
    >>> validate_search_settings("attention", {"workers": 2, "griddims": [(2, 2, 1)]})
"""
from __future__ import annotations

import difflib
import numbers
import os
from typing import Any, Iterable, Mapping, Sequence

from ..ops import BLOCK, KERNEL, names
from .config import BLOCK_ACCUMS, FINGERPRINT_BACKENDS, PRESETS, SearchConfig, SearchConfigError

# search()'s own keywords (where and how it runs), then from_args' Mirage-style ones
RUN_SETTINGS = ("workers", "executor", "checkpoint", "cancel", "progress_interval", "search_config")
MIRAGE_SETTINGS = ("griddims", "imaps", "omaps", "fmaps", "franges", "blockdims")
_INTERNAL = ("extra", "config")
_NONNEG_INT = ("max_kernel_ops", "max_block_ops", "max_block_outputs", "max_block_inputs", "max_customized_ops",
               "max_extra_final_inputs", "seed")
_POS_INT = ("smem_limit", "min_blocks", "max_blocks", "search_tests", "verify_tests")
_BOOL = ("two_d_grids", "generate_grids", "dedup")


def known_settings() -> tuple[str, ...]:
    """Every keyword the search accepts, sorted."""
    fields = [f for f in SearchConfig.__dataclass_fields__ if f not in _INTERNAL]
    return tuple(sorted(set(fields) | set(RUN_SETTINGS) | set(MIRAGE_SETTINGS)))


def did_you_mean(word: str, choices: Iterable[Any]) -> str:
    """``" did you mean 'x'?"`` for the closest of ``choices`` (difflib), or ``""``.

        >>> did_you_mean("attenton", PRESETS)
        " did you mean 'attention'?"
    """
    strs = [c for c in choices if isinstance(c, str)]
    close = difflib.get_close_matches(str(word), strs, n=1, cutoff=0.6)
    return f" did you mean {close[0]!r}?" if close else ""


def check_choice(name: str, value: Any, allowed: Sequence[Any]) -> None:
    """Raise :class:`SearchConfigError` unless ``value`` is one of ``allowed`` (names them, with "did you mean").

        >>> check_choice("level", "warp", ("kernel", "block", "thread", "all"))
        Traceback (most recent call last):
        ...
        mirage_lab.search.config.SearchConfigError: level='warp' is not allowed; use one of 'kernel', 'block', 'thread', 'all'.
    """
    try:
        ok = value in allowed
    except TypeError:  # an unhashable value compared with strings
        ok = False
    if not ok:
        hint = did_you_mean(value, allowed) if isinstance(value, str) else ""
        raise SearchConfigError(f"{name}={value!r} is not allowed;{hint} use one of "
                                f"{', '.join(repr(a) for a in allowed)}.")


def _is_int(v: Any) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _int_rule(name: str, v: Any, low: int) -> None:
    if not _is_int(v) or v < low:
        what = "a non-negative int" if low == 0 else f"an int >= {low}"
        raise SearchConfigError(f"{name}={v!r}: must be {what}.")


def _map_list(name: str, v: Any, *, low: int, width: int = 3) -> list[tuple[int, ...]]:
    example = {"griddims": "[(2, 2, 1)]", "imaps": "[(0, 1, -1), (0, -1, -1)]", "omaps": "[(0, 1, -1)]"}[name]
    if isinstance(v, (str, bytes)) or not isinstance(v, Iterable):
        raise SearchConfigError(f"{name}={v!r}: must be a list of {width}-tuples of ints, e.g. {name}={example}.")
    out = []
    for m in v:
        if isinstance(m, (str, bytes)) or not isinstance(m, Iterable):
            raise SearchConfigError(f"{name}: {m!r} is not a {width}-tuple of ints, e.g. {name}={example}.")
        m = tuple(m)
        if len(m) != width or not all(_is_int(x) and x >= low for x in m):
            rule = "positive ints" if low == 1 else f"ints >= {low}"
            raise SearchConfigError(f"{name}: {m!r} must be {width} {rule} (x, y, z), e.g. {name}={example}.")
        out.append(m)
    return out


def _int_list(name: str, v: Any, low: int, example: str) -> None:
    if isinstance(v, (str, bytes)) or not isinstance(v, Iterable) or not all(_is_int(x) and x >= low for x in v):
        raise SearchConfigError(f"{name}={v!r}: must be a list of ints >= {low}, e.g. {name}={example}.")


def _names_list(name: str, v: Any, allowed: Sequence[Any]) -> None:
    if isinstance(v, (str, bytes)) or not isinstance(v, Iterable):
        raise SearchConfigError(f"{name}={v!r}: must be a list of names from {list(allowed)}.")
    for x in v:
        check_choice(f"{name} entry", x, allowed)


def _check_grids_fit(grids: list[tuple[int, ...]], program: Any) -> None:
    """A grid axis that divides no dimension of the program can split nothing: no tiling uses it, and the
    search would drop it without a word. Say so instead."""
    dims = sorted({int(d) for t in list(program.inputs) + list(getattr(program, "outputs", [])) for d in t.dims})
    for g in grids:
        for axis, n in zip("xyz", g):
            if n > 1 and not any(d % n == 0 for d in dims):
                raise SearchConfigError(
                    f"griddims: {g!r} has {axis}={n}, which divides no dimension of the program's tensors "
                    f"({', '.join(map(str, dims))}), so no tile map can use this grid and the search would skip it. "
                    "Use grid sizes that divide a dimension, e.g. griddims=[(2, 1, 1)].")


def validate_search_settings(config: Any, settings: Mapping[str, Any], program: Any = None) -> None:
    """Check a search's ``config`` and keyword ``settings`` before anything runs; raise on the first bad one.

    Unknown keywords get "did you mean" (difflib); a value of the wrong type or out of range
    gets a :class:`SearchConfigError` naming the setting and what it accepts. With ``program``
    (a ``KernelGraph``), ``griddims`` whose axes divide none of its dimensions are refused too.

        >>> validate_search_settings(None, {"workers": "two"})
        Traceback (most recent call last):
        ...
        mirage_lab.search.config.SearchConfigError: workers='two': must be a positive int (processes), or None for one per CPU core.
    """
    check_choice("config", config, PRESETS)
    known = set(known_settings())
    for k in settings:
        if k not in known:
            hint = did_you_mean(k, sorted(known))
            raise SearchConfigError(f"unknown search setting {k!r};{hint} known settings: {', '.join(sorted(known))}.")
    for k, v in settings.items():
        if k == "workers":
            if v is not None and (not _is_int(v) or v < 1):
                raise SearchConfigError(f"workers={v!r}: must be a positive int (processes), "
                                        "or None for one per CPU core.")
        elif k == "checkpoint":
            if v is not None and not isinstance(v, (str, os.PathLike)):
                raise SearchConfigError(f"checkpoint={v!r}: must be a file path (str or pathlib.Path) or None.")
        elif k == "progress_interval":
            if isinstance(v, bool) or not isinstance(v, numbers.Real) or v <= 0:
                raise SearchConfigError(f"progress_interval={v!r}: must be a positive number of seconds.")
        elif k in _NONNEG_INT:
            _int_rule(k, v, 0)
        elif k in _POS_INT:
            _int_rule(k, v, 1)
        elif k in _BOOL:
            if not isinstance(v, bool):
                raise SearchConfigError(f"{k}={v!r}: must be True or False.")
        elif k == "fingerprint_backend":
            check_choice(k, v, FINGERPRINT_BACKENDS)
        elif k == "griddims" and v is not None:
            grids = _map_list(k, v, low=1)
            if program is not None:
                _check_grids_fit(grids, program)
        elif k in ("imaps", "omaps") and v is not None:
            _map_list(k, v, low=-1)
        elif k == "fmaps" and v is not None:
            _int_list(k, v, -1, "[-1, 1, 2]")
        elif k == "franges" and v is not None:
            _int_list(k, v, 1, "[4, 16]")
        elif k == "kernel_ops":
            _names_list(k, v, names(level=KERNEL))
        elif k == "block_ops":
            _names_list(k, v, names(level=BLOCK))
        elif k == "block_accums":
            _names_list(k, v, BLOCK_ACCUMS + ("sum_todimx",))
        elif k == "reduction_dimx" and v is not None:
            _int_rule(k, v, 1)
        elif k == "split_reduction" and v is not None and not isinstance(v, bool):
            raise SearchConfigError(f"{k}={v!r}: must be True, False or None (on where the program allows split-K).")
        elif k == "row_grids" and v is not None and not isinstance(v, bool):
            raise SearchConfigError(f"{k}={v!r}: must be True, False or None (on for programs of 128 rows or more).")
    lo, hi = settings.get("min_blocks"), settings.get("max_blocks")
    if lo is not None and hi is not None and lo > hi:
        raise SearchConfigError(f"min_blocks={lo} is larger than max_blocks={hi}.")
    # what only building the config can tell (blockdims, block_dim, ...): its errors are already clear
    SearchConfig.from_args(config, **{k: v for k, v in settings.items() if k not in RUN_SETTINGS})


__all__ = ["validate_search_settings", "check_choice", "did_you_mean", "known_settings"]
