"""JSON for the pipeline's records (search results, tuning reports): dataclasses by their fields, never pickle.

Any dataclass of ``mirage_lab`` is written field by field under its qualified name, so a
field added to :class:`~.autotune.TuneReport` or :class:`~.autotune.VariantResult` later is
stored and restored without a change here. μGraphs are written as their JSON; an object that
appears twice (``report.best`` is one of ``report.results``) is written once and restored as
one object. Decoding builds only ``mirage_lab`` dataclasses: a foreign class name is refused.

    >>> from mirage_lab.codegen import CodegenOptions
    >>> records = [CodegenOptions(mma=True), (1, 2), {"t": float("inf")}]
    >>> decode(json.loads(dumps(encode(records)))) == records
    True
"""
from __future__ import annotations

import dataclasses
import importlib
import json
import math
import numbers
from typing import Any

from ..errors import MirageLabError
from ..ir.kernel_graph import KernelGraph


class CodecError(MirageLabError, ValueError):
    """A value cannot be written as JSON here, or a stored record is not one this codec wrote."""


def encode(obj: Any) -> Any:
    """``obj`` as JSON-ready data (dicts, lists, strings, numbers); raises :class:`CodecError` for other objects."""
    return _Encoder().enc(obj)


def decode(data: Any) -> Any:
    """The objects :func:`encode` wrote; raises :class:`CodecError` on anything else."""
    return _Decoder().dec(data)


class _Encoder:
    def __init__(self) -> None:
        self.ids: dict[int, int] = {}
        self.keep: list[Any] = []     # keeps encoded objects alive so their ids stay unique

    def enc(self, o: Any) -> Any:
        if o is None or isinstance(o, (bool, str)):
            return o
        if isinstance(o, numbers.Integral):
            return int(o)
        if isinstance(o, numbers.Real):
            f = float(o)
            return f if math.isfinite(f) else {"__float__": repr(f)}
        if isinstance(o, (list, tuple)):
            items = [self.enc(x) for x in o]
            return items if isinstance(o, list) else {"__tuple__": items}
        if isinstance(o, dict):
            return {"__dict__": [[self.enc(k), self.enc(v)] for k, v in o.items()]}
        if id(o) in self.ids:
            return {"__ref__": self.ids[id(o)]}
        if isinstance(o, KernelGraph):
            return self._shared(o, {"__graph__": o.to_json()})
        if dataclasses.is_dataclass(o) and not isinstance(o, type):
            cls = type(o)
            if not cls.__module__.startswith("mirage_lab."):
                raise CodecError(f"cannot store a {cls.__module__}.{cls.__qualname__} (not a mirage_lab record)")
            n = self._shared(o, {})
            n["__dataclass__"] = f"{cls.__module__}:{cls.__qualname__}"
            # a list, not an object: the order is the order of definition, which sorted keys would break
            # a field marked metadata={"stored": False} (a live object: a compiled runner) is written as None
            n["fields"] = [[f.name, self.enc(getattr(o, f.name)) if f.metadata.get("stored", True) else None]
                           for f in dataclasses.fields(o)]
            return n
        raise CodecError(f"cannot store a {type(o).__module__}.{type(o).__qualname__} as JSON")

    def _shared(self, o: Any, node: dict) -> dict:
        self.ids[id(o)] = len(self.ids)
        self.keep.append(o)
        node["__id__"] = self.ids[id(o)]
        return node


class _Decoder:
    def __init__(self) -> None:
        self.objs: dict[int, Any] = {}

    def dec(self, d: Any) -> Any:
        if d is None or isinstance(d, (bool, str, int, float)):
            return d
        if isinstance(d, list):
            return [self.dec(x) for x in d]
        if not isinstance(d, dict):
            raise CodecError(f"unexpected {type(d).__name__} in a stored record")
        if "__tuple__" in d:
            return tuple(self.dec(x) for x in d["__tuple__"])
        if "__dict__" in d:
            return {_hashable(self.dec(k)): self.dec(v) for k, v in d["__dict__"]}
        if "__float__" in d:
            if d["__float__"] not in ("inf", "-inf", "nan"):
                raise CodecError(f"bad float {d['__float__']!r} in a stored record")
            return float(d["__float__"])
        if "__ref__" in d:
            if d["__ref__"] not in self.objs:
                raise CodecError(f"a stored record refers to object {d['__ref__']!r} before it is defined")
            return self.objs[d["__ref__"]]
        if "__graph__" in d:
            from ..ir.serialize import from_json

            return self._define(d, from_json(d["__graph__"]))
        if "__dataclass__" in d:
            return self._dataclass(d)
        raise CodecError(f"unknown node {sorted(d)[:4]} in a stored record")

    def _define(self, d: dict, obj: Any) -> Any:
        self.objs[d.get("__id__")] = obj
        return obj

    def _dataclass(self, d: dict) -> Any:
        mod, _, qual = str(d["__dataclass__"]).partition(":")
        if not mod.startswith("mirage_lab."):
            raise CodecError(f"refusing to build {d['__dataclass__']!r}: not a mirage_lab record")
        try:
            cls: Any = importlib.import_module(mod)
            for part in qual.split("."):
                cls = getattr(cls, part)
        except (ImportError, AttributeError) as e:
            raise CodecError(f"stored record names {d['__dataclass__']!r}, which this version lacks") from e
        if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
            raise CodecError(f"{d['__dataclass__']!r} is not a dataclass")
        known = {f.name: f for f in dataclasses.fields(cls)}
        try:
            stored = [(str(k), v) for k, v in d.get("fields", [])]
        except (TypeError, ValueError) as e:
            raise CodecError(f"stored {qual} has malformed fields") from e
        extra = {k for k, _ in stored} - set(known)
        if extra:
            raise CodecError(f"stored {qual} has fields {sorted(extra)} this version lacks")
        values = {k: self.dec(v) for k, v in stored}
        try:  # through __init__, so its checks run; fields added since the record was written take their defaults
            obj = cls(**{k: v for k, v in values.items() if known[k].init})
        except (TypeError, ValueError) as e:
            raise CodecError(f"stored {qual} does not rebuild: {e}") from e
        for k, v in values.items():
            if not known[k].init:
                object.__setattr__(obj, k, v)
        return self._define(d, obj)


def _hashable(k: Any) -> Any:
    return tuple(k) if isinstance(k, list) else k


def dumps(obj: Any) -> str:
    """Canonical JSON text of already-encoded data (sorted keys; the same data gives the same text).

    A key may hold ``inf`` (``tune_seconds=float("inf")``): written as ``Infinity``, which Python reads back.
    """
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


__all__ = ["encode", "decode", "dumps", "CodecError"]
