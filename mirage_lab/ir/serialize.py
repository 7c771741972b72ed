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
import math
import re
from pathlib import Path
from typing import Any

from ..errors import GraphBuildError, SerializationError
from ..ops import BLOCK, KERNEL, binary_ops, unary_ops
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
    if not isinstance(d, dict):
        raise SerializationError(f"corrupt μGraph JSON: {where} should be an object, got {type(d).__name__}")
    if key not in d:
        raise SerializationError(f"corrupt μGraph JSON: {where} has no '{key}'")
    v = d[key]
    if not isinstance(v, kind) or isinstance(v, bool) and kind is int:
        names = " or ".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
        raise SerializationError(f"corrupt μGraph JSON: {where}.{key} should be {names}, got {type(v).__name__}")
    return v


def _attrs(op: dict[str, Any], where: str) -> dict[str, Any]:
    a = op.get("attrs", {})
    if not isinstance(a, dict):
        raise SerializationError(f"corrupt μGraph JSON: {where}.attrs should be an object, got {type(a).__name__}")
    return a


def _refs(ids: list[Any], by_id: dict[Any, Any], where: str) -> list[Any]:
    out = []
    for j in ids:
        if not isinstance(j, int) or j not in by_id:
            raise SerializationError(
                f"corrupt μGraph JSON: {where} reads tensor id {j!r}, which no earlier op produces"
            )
        out.append(by_id[j])
    return out


def _explain(e: Exception) -> str:
    if isinstance(e, KeyError):
        return f"missing key {e}"
    return f"{type(e).__name__}: {e}"


def from_dict(d: Any) -> KernelGraph:
    """Rebuild a μGraph from the dict form of :func:`to_dict` (``SerializationError`` when it is not one)."""
    if not isinstance(d, dict) or d.get("format") != FORMAT:
        raise SerializationError(
            f"not a mirage_lab μGraph: expected \"format\": \"{FORMAT}\" at the top level"
        )
    version = d.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise SerializationError(f"corrupt μGraph JSON: 'version' should be a positive int, got {version!r}")
    if version > VERSION:
        raise SerializationError(
            f"this μGraph was saved by a newer mirage_lab (format version {version}; this one reads up to "
            f"{VERSION}); upgrade mirage_lab to load it"
        )
    kg = _get(d, "kernel_graph", dict, "top level")
    tensors: dict[Any, Any] = {}
    for i, t in enumerate(_get(kg, "tensors", list, "kernel_graph")):
        tensors[_get(t, "id", int, f"kernel_graph.tensors[{i}]")] = t
    g = KernelGraph()
    by_id: dict[int, Any] = {}
    for i, op in enumerate(_get(kg, "ops", list, "kernel_graph")):
        where = f"kernel_graph.ops[{i}]"
        try:
            _load_kernel_op(g, op, where, tensors, by_id)
        except SerializationError:
            raise
        except GraphBuildError as e:
            raise SerializationError(f"corrupt μGraph JSON: {where} describes an invalid graph: {e}") from e
        except (KeyError, IndexError, TypeError, ValueError, AttributeError) as e:
            raise SerializationError(f"corrupt μGraph JSON: {where}: {_explain(e)}") from e
    outs = _refs(_get(kg, "outputs", list, "kernel_graph"), by_id, "kernel_graph.outputs")
    try:
        for t in outs:
            g.mark_output(t)
    except GraphBuildError as e:
        raise SerializationError(f"corrupt μGraph JSON: kernel_graph.outputs: {e}") from e
    ins = _get(kg, "inputs", list, "kernel_graph")
    if ins != [t.guid for t in g.inputs]:
        raise SerializationError(
            f"corrupt μGraph JSON: kernel_graph.inputs is {ins}, but the input ops make tensors "
            f"{[t.guid for t in g.inputs]}"
        )
    return g


def _load_kernel_op(g: KernelGraph, op: Any, where: str, tensors: dict[Any, Any], by_id: dict[int, Any]) -> None:
    typ = _get(op, "type", str, where)
    ins = _refs(_get(op, "inputs", list, where), by_id, where)
    outs_ids = _get(op, "outputs", list, where)
    attrs = _attrs(op, where)
    if typ == "input":
        if len(outs_ids) != 1 or outs_ids[0] not in tensors:
            raise SerializationError(f"corrupt μGraph JSON: {where} (input) must list one output tensor id from kernel_graph.tensors")
        t = tensors[outs_ids[0]]
        if t.get("dtype") not in ALL_DTYPES:
            raise SerializationError(
                f"corrupt μGraph JSON: {where} has unknown dtype {t.get('dtype')!r}; known: {', '.join(ALL_DTYPES)}"
            )
        res = [g.new_input(_get(t, "dims", list, f"kernel_graph.tensors[id={outs_ids[0]}]"), t["dtype"], attrs.get("strides"))]
    elif typ == "customized":
        bg = _block_from_dict(_get(op, "block_graph", dict, where), ins, f"{where}.block_graph")
        res = g.customized(ins, bg)
    elif typ == "reduction":
        res = [g.reduction(ins[0], attrs["dim"])]
    elif typ == "clamp":
        res = [g.clamp(ins[0], attrs["lo"], attrs["hi"])]
    elif typ == "rms_norm":
        res = [g.rms_norm(ins[0])]
    elif typ == "matmul" or typ in binary_ops(level=KERNEL):
        res = [getattr(g, typ)(ins[0], ins[1])]
    elif typ in unary_ops(level=KERNEL, attrs=False):
        res = [getattr(g, typ)(ins[0])]
    else:
        raise SerializationError(f"corrupt μGraph JSON: {where} has unknown op type {typ!r}")
    if len(res) != len(outs_ids):
        raise SerializationError(f"corrupt μGraph JSON: {where} lists {len(outs_ids)} outputs, the op makes {len(res)}")
    for tid, t in zip(outs_ids, res):
        saved = tensors.get(tid)
        if saved is None or saved.get("dims") != list(t.dims) or saved.get("dtype") != t.dtype.name:
            raise SerializationError(
                f"corrupt μGraph JSON: {where} ({typ}) output {tid} is saved as "
                f"{saved.get('dtype') if saved else None}{saved.get('dims') if saved else ''}, but the op computes "
                f"{t.dtype.name}{list(t.dims)}"
            )
        by_id[tid] = t


def _block_from_dict(d: dict[str, Any], dtensors: list[Any], where: str) -> BlockGraph:
    bg = BlockGraph(tuple(_get(d, "grid_dim", list, where)), tuple(_get(d, "block_dim", list, where)),
                    _get(d, "forloop_range", int, where), _get(d, "reduction_dimx", int, where))
    by_id: dict[int, Any] = {}
    n_in = 0
    for i, op in enumerate(_get(d, "ops", list, where)):
        w = f"{where}.ops[{i}]"
        typ = _get(op, "type", str, w)
        ins = _refs(_get(op, "inputs", list, w), by_id, w)
        a = _attrs(op, w)
        if typ == "input":
            if n_in >= len(dtensors):
                raise SerializationError(f"corrupt μGraph JSON: {w} is loader {n_in}, but the customized op has {len(dtensors)} inputs")
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
        elif typ == "matmul" or typ in binary_ops(level=BLOCK):
            res = getattr(bg, typ)(ins[0], ins[1])
        elif typ == "rms_norm" or typ in unary_ops(level=BLOCK, attrs=False):
            res = getattr(bg, typ)(ins[0])
        else:
            raise SerializationError(f"corrupt μGraph JSON: {w} has unknown block op type {typ!r}")
        if res is not None:
            by_id[_get(op, "outputs", list, w)[0]] = res
    return bg


# Limits checked before and while json parses, so that no input reaches Python's recursion limit,
# its 4,300-digit int limit or float overflow: a μGraph file nests about 8 levels deep and holds
# ints of at most a dozen digits.
MAX_DEPTH = 64
MAX_INT_DIGITS = 30
_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"')
_BRACKETS = re.compile(r"[^\[\]{}]+")


def json_depth(text: str, limit: int) -> int:
    """How deep ``text`` nests (brackets inside strings do not count), read up to ``limit + 1``.

    >>> json_depth('{"a": [1, "[["]}', limit=10)
    2
    """
    depth = top = 0
    for ch in _BRACKETS.sub("", _STRINGS.sub("", text)):
        depth += 1 if ch in "[{" else -1
        if depth > top:
            top = depth
            if top > limit:
                break
    return top


def _check_depth(text: str) -> None:
    """Refuse JSON that nests deeper than ``MAX_DEPTH``, before json's recursive parser sees it."""
    if json_depth(text, MAX_DEPTH) > MAX_DEPTH:
        raise SerializationError(f"corrupt μGraph JSON: nested more than {MAX_DEPTH} levels deep; "
                                 "a μGraph file nests about 8 (is this the right file?)")


def _parse_int(s: str) -> int:
    if len(s.lstrip("-")) > MAX_INT_DIGITS:
        raise SerializationError(f"corrupt μGraph JSON: an integer of {len(s.lstrip('-'))} digits; "
                                 f"μGraph files hold ints of at most {MAX_INT_DIGITS}")
    return int(s)


def _parse_float(s: str) -> float:
    if len(s) > 64:
        raise SerializationError(f"corrupt μGraph JSON: a number written with {len(s)} characters; "
                                 "μGraph files hold plain floats")
    f = float(s)
    if not math.isfinite(f):
        raise SerializationError(f"corrupt μGraph JSON: the number {s[:40]} overflows a float; "
                                 "μGraph files hold finite numbers")
    return f


def _parse_constant(s: str) -> float:
    raise SerializationError(f"corrupt μGraph JSON: {s} is not a finite number; μGraph files hold finite numbers")


def from_json(text: str | bytes) -> KernelGraph:
    """Load a μGraph from JSON text written by ``graph.to_json()``.

    >>> import mirage_lab as mi
    >>> g = mi.new_kernel_graph(); g.mark_output(g.exp(g.new_input((2, 3))))
    >>> mi.from_json(g.to_json()).to_json() == g.to_json()
    True
    """
    if not isinstance(text, (str, bytes, bytearray)):
        raise SerializationError(f"from_json: expected the JSON text (str or bytes), got {type(text).__name__}; "
                                 "to read a file use mi.load(path)")
    if not isinstance(text, str):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as e:
            raise SerializationError(f"corrupt μGraph JSON: not UTF-8 text ({e})") from None
    _check_depth(text)
    try:
        d = json.loads(text, parse_int=_parse_int, parse_float=_parse_float, parse_constant=_parse_constant)
    except json.JSONDecodeError as e:
        raise SerializationError(f"corrupt μGraph JSON: not valid JSON ({e})") from None
    return from_dict(d)


def save(g: KernelGraph, path: str | Path, metrics: dict[str, Any] | None = None) -> Path:
    """Write ``g`` to ``path`` atomically (a crash never leaves half a file)."""
    p = Path(path)
    tmp = p.with_suffix(p.suffix + ".tmp")
    tmp.write_text(to_json(g, metrics, indent=1), encoding="utf-8")
    tmp.replace(p)
    return p


def load(path: str | Path) -> KernelGraph:
    """Read a μGraph saved with :func:`save`."""
    p = Path(path)
    try:
        text = p.read_bytes()  # bytes: a binary or mis-encoded file becomes a SerializationError below
    except OSError as e:
        raise SerializationError(f"cannot read μGraph file {p}: {e}") from e
    try:
        return from_json(text)
    except SerializationError as e:
        raise SerializationError(f"{p}: {e}") from e
