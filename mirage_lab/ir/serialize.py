"""Versioned JSON for μGraphs (all three levels) and a stable content hash.

The format is documented in ``docs/json_format.md``. Loading replays the builder API, so
a loaded graph passes exactly the validation a hand-built one does, and a file that would
build an invalid graph is refused with the builder's message.

    >>> text = g.to_json()                       # doctest: +SKIP
    >>> g2 = mi.from_json(text)                  # doctest: +SKIP
    >>> g2.content_hash() == g.content_hash()    # doctest: +SKIP
    True
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from ..errors import GraphBuildError, SerializationError
from .block_graph import BlockGraph
from .dtypes import ALL_DTYPES
from .kernel_graph import KernelGraph

FORMAT = "mirage_lab.mugraph"
VERSION = 1
MIME_TYPE = "application/vnd.mirage-lab.mugraph+json"


def _block_to_dict(bg: BlockGraph) -> dict[str, Any]:
    ops = []
    for op in bg.ops:
        attrs = {k: (list(v) if isinstance(v, tuple) else v) for k, v in op.attrs.items()}
        ops.append({"id": op.guid, "type": op.op_type, "inputs": [t.guid for t in op.inputs],
                    "outputs": [t.guid for t in op.outputs], "attrs": attrs})
    return {
        "grid_dim": list(bg.grid_dim),
        "block_dim": list(bg.block_dim),
        "forloop_range": bg.forloop_range,
        "reduction_dimx": bg.reduction_dimx,
        "tensors": [{"id": t.guid, "dims": list(t.dims), "dtype": t.dtype.name, "after_accum": t.after_accum}
                    for t in bg.tensors],
        "ops": ops,
        "thread_graph": bg.thread_graph().to_dict(),
    }


def to_dict(g: KernelGraph, metrics: dict[str, Any] | None = None) -> dict[str, Any]:
    """The JSON-ready dict of ``g`` (optionally with per-node ``metrics`` for viewers)."""
    ops = []
    for op in g.ops:
        attrs = {k: (list(v) if isinstance(v, tuple) else v) for k, v in op.attrs.items()}
        d: dict[str, Any] = {"id": op.guid, "type": op.op_type, "inputs": [t.guid for t in op.inputs],
                             "outputs": [t.guid for t in op.outputs], "attrs": attrs}
        if op.block_graph is not None:
            d["block_graph"] = _block_to_dict(op.block_graph)
        ops.append(d)
    out: dict[str, Any] = {
        "format": FORMAT,
        "version": VERSION,
        "kernel_graph": {
            "tensors": [{"id": t.guid, "dims": list(t.dims), "dtype": t.dtype.name} for t in g.tensors],
            "ops": ops,
            "inputs": [t.guid for t in g.inputs],
            "outputs": [t.guid for t in g.outputs],
        },
    }
    if metrics:
        out["metrics"] = metrics
    return out


def to_json(g: KernelGraph, metrics: dict[str, Any] | None = None, indent: int | None = None) -> str:
    return json.dumps(to_dict(g, metrics), indent=indent, sort_keys=True)


def content_hash(g: KernelGraph) -> str:
    """SHA-256 of the canonical JSON of the structure (no metrics, no derived thread graph)."""
    d = to_dict(g)
    for op in d["kernel_graph"]["ops"]:
        if "block_graph" in op:
            op["block_graph"].pop("thread_graph", None)
    text = json.dumps(d, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


# --------------------------------------------------------------------------- loading
def _get(d: Any, key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if not isinstance(d, dict) or key not in d:
        raise SerializationError(f"corrupt μGraph JSON: {where} has no '{key}'")
    v = d[key]
    if not isinstance(v, kind):
        raise SerializationError(f"corrupt μGraph JSON: {where}.{key} should be {kind}, got {type(v).__name__}")
    return v


def from_dict(d: Any) -> KernelGraph:
    if not isinstance(d, dict) or d.get("format") != FORMAT:
        raise SerializationError(
            f"not a mirage_lab μGraph: expected \"format\": \"{FORMAT}\" at the top level"
        )
    version = d.get("version")
    if not isinstance(version, int):
        raise SerializationError("corrupt μGraph JSON: 'version' is missing or not an int")
    if version > VERSION:
        raise SerializationError(
            f"this μGraph was saved by a newer mirage_lab (format version {version}; this one reads up to "
            f"{VERSION}); upgrade mirage_lab to load it"
        )
    kg = _get(d, "kernel_graph", dict, "top level")
    tensors = {t["id"]: t for t in _get(kg, "tensors", list, "kernel_graph") if isinstance(t, dict) and "id" in t}
    g = KernelGraph()
    by_id: dict[int, Any] = {}
    try:
        for i, op in enumerate(_get(kg, "ops", list, "kernel_graph")):
            where = f"kernel_graph.ops[{i}]"
            typ = _get(op, "type", str, where)
            ins = [by_id[j] for j in _get(op, "inputs", list, where)]
            outs_ids = _get(op, "outputs", list, where)
            attrs = op.get("attrs", {})
            if typ == "input":
                t = tensors[outs_ids[0]]
                if t["dtype"] not in ALL_DTYPES:
                    raise SerializationError(f"corrupt μGraph JSON: {where} has unknown dtype {t['dtype']!r}")
                res = [g.new_input(t["dims"], t["dtype"], attrs.get("strides"))]
            elif typ == "customized":
                bg = _block_from_dict(_get(op, "block_graph", dict, where), ins, where)
                res = g.customized(ins, bg)
            elif typ == "reduction":
                res = [g.reduction(ins[0], attrs["dim"])]
            elif typ == "clamp":
                res = [g.clamp(ins[0], attrs["lo"], attrs["hi"])]
            elif typ == "rms_norm":
                res = [g.rms_norm(ins[0])]
            elif typ in ("matmul", "add", "mul", "div", "pow"):
                res = [getattr(g, typ)(ins[0], ins[1])]
            elif typ in ("exp", "silu", "gelu", "relu", "sqrt", "square"):
                res = [getattr(g, typ)(ins[0])]
            else:
                raise SerializationError(f"corrupt μGraph JSON: {where} has unknown op type {typ!r}")
            if len(res) != len(outs_ids):
                raise SerializationError(f"corrupt μGraph JSON: {where} lists {len(outs_ids)} outputs, the op makes {len(res)}")
            for tid, t in zip(outs_ids, res):
                saved = tensors.get(tid)
                if saved is None or list(saved["dims"]) != list(t.dims) or saved["dtype"] != t.dtype.name:
                    raise SerializationError(
                        f"corrupt μGraph JSON: {where} output {tid} is saved as {saved}, but the op computes "
                        f"{t.dtype.name}{list(t.dims)}"
                    )
                by_id[tid] = t
        for tid in _get(kg, "outputs", list, "kernel_graph"):
            g.mark_output(by_id[tid])
    except SerializationError:
        raise
    except GraphBuildError as e:
        raise SerializationError(f"corrupt μGraph JSON: it describes an invalid graph: {e}") from e
    except (KeyError, IndexError, TypeError, ValueError) as e:
        raise SerializationError(f"corrupt μGraph JSON: {type(e).__name__}: {e}") from e
    return g


def _block_from_dict(d: dict[str, Any], dtensors: list[Any], where: str) -> BlockGraph:
    bg = BlockGraph(tuple(d["grid_dim"]), tuple(d["block_dim"]), d["forloop_range"], d["reduction_dimx"])
    by_id: dict[int, Any] = {}
    n_in = 0
    for i, op in enumerate(d["ops"]):
        w = f"{where}.block_graph.ops[{i}]"
        typ = _get(op, "type", str, w)
        ins = [by_id[j] for j in op["inputs"]]
        a = op.get("attrs", {})
        if typ == "input":
            res = bg.new_input(dtensors[n_in], tuple(a["input_map"]), a["forloop_dim"], a.get("store_in_dmem", False))
            n_in += 1
        elif typ == "output":
            bg.new_output(ins[0], tuple(a["output_map"]))
            res = None
        elif typ == "forloop_accum":
            res = bg.forloop_accum(ins[0], a["acc"])
        elif typ == "reduction":
            res = bg.reduction(ins[0], a["dim"])
        elif typ == "concat":
            res = bg.concat(ins[0], ins[1], a["dim"])
        elif typ == "clamp":
            res = bg.clamp(ins[0], a["lo"], a["hi"])
        elif typ == "mul_scalar":
            res = bg.mul_scalar(ins[0], a["scalar"])
        elif typ in ("matmul", "add", "mul", "div", "sub", "pow"):
            res = getattr(bg, typ)(ins[0], ins[1])
        elif typ in ("exp", "silu", "gelu", "relu", "sqrt", "square", "rms_norm"):
            res = getattr(bg, typ)(ins[0])
        else:
            raise SerializationError(f"corrupt μGraph JSON: {w} has unknown block op type {typ!r}")
        if res is not None:
            by_id[op["outputs"][0]] = res
    return bg


def from_json(text: str | bytes) -> KernelGraph:
    """Load a μGraph from JSON text written by ``graph.to_json()``."""
    try:
        d = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise SerializationError(f"corrupt μGraph JSON: not valid JSON ({e})") from e
    return from_dict(d)


def save(g: KernelGraph, path: str | Path, metrics: dict[str, Any] | None = None) -> Path:
    """Write ``g`` to ``path`` atomically (a crash never leaves half a file)."""
    p = Path(path)
    tmp = p.with_suffix(p.suffix + ".tmp")
    tmp.write_text(to_json(g, metrics, indent=1))
    tmp.replace(p)
    return p


def load(path: str | Path) -> KernelGraph:
    """Read a μGraph saved with :func:`save`."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as e:
        raise SerializationError(f"cannot read μGraph file {p}: {e}") from e
    try:
        return from_json(text)
    except SerializationError as e:
        raise SerializationError(f"{p}: {e}") from e
