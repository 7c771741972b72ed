"""Programmatic mutants of real μGraphs, for the no-false-positive corpus.

A graph is turned into its JSON dict (``mirage_lab.ir.serialize.to_dict``), one or two
edits are made to the op records (swapped operands, another op type, a wrong reduction
dim, a wrong forloop range or accumulator kind, wrong imap/fmap/omap, a dropped op, an
extra exp on some tensor, an input rewired to another tensor, ...), and the graph is
rebuilt through the public builder API. Edits that the builders refuse are dropped.
"""
from __future__ import annotations

import json
import random
from typing import Any, Iterator

import mirage_lab as mi
from mirage_lab.errors import MirageLabError
from mirage_lab.ir.serialize import to_dict

UNARY = ["exp", "silu", "gelu", "relu", "sqrt", "square"]
K_BINARY = ["add", "mul", "div", "pow"]
B_BINARY = ["add", "mul", "div", "sub", "pow"]
ACCS = [None, "sum", "mean", "rms", "sum_todimx"]


# --------------------------------------------------------------------------- dict -> graph
def build(d: dict[str, Any]) -> mi.KernelGraph:
    """Rebuild a (possibly edited) graph dict with the builders; dims are recomputed, not read."""
    kg = d["kernel_graph"]
    dims = {t["id"]: t for t in kg["tensors"]}
    g = mi.new_kernel_graph()
    env: dict[int, Any] = {}
    for op in kg["ops"]:
        typ, a = op["type"], op.get("attrs", {})
        ins = [env[i] for i in op["inputs"]]
        if typ == "input":
            t = dims[op["outputs"][0]]
            res = [g.new_input(t["dims"], t["dtype"])]
        elif typ == "customized":
            res = g.customized(ins, _build_block(op["block_graph"], ins))
        elif typ == "reduction":
            res = [g.reduction(ins[0], a["dim"])]
        elif typ == "clamp":
            res = [g.clamp(ins[0], a["lo"], a["hi"])]
        elif typ == "rms_norm":
            res = [g.rms_norm(ins[0])]
        elif typ in K_BINARY or typ == "matmul":
            res = [getattr(g, typ)(ins[0], ins[1])]
        else:
            res = [getattr(g, typ)(ins[0])]
        for tid, t in zip(op["outputs"], res):
            env[tid] = t
    for tid in kg["outputs"]:
        g.mark_output(env[tid])
    return g


def _build_block(d: dict[str, Any], dtensors: list[Any]) -> Any:
    bg = mi.new_threadblock_graph(tuple(d["grid_dim"]), tuple(d["block_dim"]), d["forloop_range"], d["reduction_dimx"])
    env: dict[int, Any] = {}
    n_in = 0
    for op in d["ops"]:
        typ, a = op["type"], op.get("attrs", {})
        ins = [env[i] for i in op["inputs"]]
        if typ == "input":
            res = bg.new_input(dtensors[n_in], tuple(a["input_map"]), a["forloop_dim"])
            n_in += 1
        elif typ == "output":
            bg.new_output(ins[0], tuple(a["output_map"]))
            continue
        elif typ == "forloop_accum":
            res = bg.forloop_accum(ins[0], a["acc"])
        elif typ in ("reduction",):
            res = bg.reduction(ins[0], a["dim"])
        elif typ == "concat":
            res = bg.concat(ins[0], ins[1], a["dim"])
        elif typ == "clamp":
            res = bg.clamp(ins[0], a["lo"], a["hi"])
        elif typ == "mul_scalar":
            res = bg.mul_scalar(ins[0], a["scalar"])
        elif typ in B_BINARY or typ == "matmul":
            res = getattr(bg, typ)(ins[0], ins[1])
        else:
            res = getattr(bg, typ)(ins[0])
        env[op["outputs"][0]] = res
    return bg


# --------------------------------------------------------------------------- edits
def _sites(d: dict[str, Any]) -> list[tuple[dict, list, int, bool]]:
    """(graph-level dict, its op list, op index, is_block) for every op of every level."""
    out = []
    kops = d["kernel_graph"]["ops"]
    for i, op in enumerate(kops):
        out.append((d["kernel_graph"], kops, i, False))
        if "block_graph" in op:
            bops = op["block_graph"]["ops"]
            for j in range(len(bops)):
                out.append((op["block_graph"], bops, j, True))
    return out


def _fresh_id(ops: list) -> int:
    return max([t for op in ops for t in op["outputs"]] + [t for op in ops for t in op["inputs"]] + [0]) + 1000


def edits(d: dict[str, Any], rng: random.Random) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every single-edit mutant of ``d`` (as ``(description, new_dict)``), in a shuffled order."""
    cands: list[tuple[str, Any]] = []
    for s_idx, (level, ops, i, is_block) in enumerate(_sites(d)):
        op = ops[i]
        typ = op["type"]
        binary = B_BINARY if is_block else K_BINARY
        where = f"{'block' if is_block else 'kernel'} op {i} ({typ})"
        if len(op["inputs"]) == 2 and op["inputs"][0] != op["inputs"][1]:
            cands.append((f"swap operands of {where}", (s_idx, "swap", None)))
        if typ in UNARY:
            for u in UNARY:
                if u != typ:
                    cands.append((f"{where} -> {u}", (s_idx, "type", u)))
            cands.append((f"drop {where}", (s_idx, "drop", 0)))
        if typ in binary:
            for b in binary:
                if b != typ:
                    cands.append((f"{where} -> {b}", (s_idx, "type", b)))
            cands.append((f"drop {where} (keep lhs)", (s_idx, "drop", 0)))
            cands.append((f"drop {where} (keep rhs)", (s_idx, "drop", 1)))
        if typ == "matmul" and not is_block:
            cands.append((f"drop {where} (keep lhs)", (s_idx, "drop", 0)))
        if typ in ("rms_norm", "mul_scalar", "clamp"):
            cands.append((f"drop {where}", (s_idx, "drop", 0)))
        if typ in ("reduction", "concat"):
            for dim in range(4):
                if dim != op["attrs"]["dim"]:
                    cands.append((f"{where} dim -> {dim}", (s_idx, "attr", ("dim", dim))))
        if typ == "mul_scalar":
            cands.append((f"{where} scalar x2", (s_idx, "attr", ("scalar", op["attrs"]["scalar"] * 2))))
        if typ == "clamp":
            cands.append((f"{where} lo -> 0", (s_idx, "attr", ("lo", 0.0))))
            cands.append((f"{where} hi -> 1", (s_idx, "attr", ("hi", 1.0))))
        if typ == "forloop_accum":
            for acc in ACCS:
                if acc != op["attrs"]["acc"]:
                    cands.append((f"{where} acc -> {acc}", (s_idx, "attr", ("acc", acc))))
        if typ == "input" and is_block:
            im = op["attrs"]["input_map"]
            for a in range(3):
                for k in [-1, 0, 1, 2]:
                    if k != im[a]:
                        new = list(im)
                        new[a] = k
                        cands.append((f"{where} imap -> {tuple(new)}", (s_idx, "attr", ("input_map", new))))
            for f in [-1, 0, 1, 2]:
                if f != op["attrs"]["forloop_dim"]:
                    cands.append((f"{where} fmap -> {f}", (s_idx, "attr", ("forloop_dim", f))))
        if typ == "output":
            om = op["attrs"]["output_map"]
            for a in range(3):
                for k in [-1, 0, 1, 2]:
                    if k != om[a]:
                        new = list(om)
                        new[a] = k
                        cands.append((f"{where} omap -> {tuple(new)}", (s_idx, "attr", ("output_map", new))))
            # swap which values two savers write
        if typ not in ("input", "output") or (typ == "input" and not is_block):
            for u in ("exp", "square"):
                cands.append((f"{u} after {where}", (s_idx, "insert", u)))
        if op["inputs"] and typ not in ("output",):
            cands.append((f"rewire an input of {where}", (s_idx, "rewire", None)))
        if is_block and i == 0:
            fr = level["forloop_range"]
            for nf in {fr * 2, max(1, fr // 2), fr + 1}:
                if nf != fr:
                    cands.append((f"forloop_range {fr} -> {nf}", (s_idx, "frange", nf)))
            gd = level["grid_dim"]
            for a in range(3):
                for ng in {gd[a] * 2, max(1, gd[a] // 2)}:
                    if ng != gd[a]:
                        new = list(gd)
                        new[a] = ng
                        cands.append((f"grid {tuple(gd)} -> {tuple(new)}", (s_idx, "grid", new)))
            if level["reduction_dimx"] > 1:
                cands.append((f"reduction_dimx /2", (s_idx, "dimx", level["reduction_dimx"] // 2)))
    rng.shuffle(cands)
    text = json.dumps(d)
    for desc, (s_idx, kind, arg) in cands:
        nd = json.loads(text)  # a deep copy, faster than copy.deepcopy
        if _apply(nd, s_idx, kind, arg, rng):
            yield desc, nd


def _apply(d: dict[str, Any], s_idx: int, kind: str, arg: Any, rng: random.Random) -> bool:
    level, ops, i, is_block = _sites(d)[s_idx]
    op = ops[i]
    if kind == "swap":
        op["inputs"] = op["inputs"][::-1]
    elif kind == "type":
        op["type"] = arg
    elif kind == "attr":
        op.setdefault("attrs", {})[arg[0]] = arg[1]
    elif kind == "drop":
        src = op["inputs"][arg]
        (out,) = op["outputs"] if op["outputs"] else (None,)
        for o in ops[i + 1:]:
            o["inputs"] = [src if t == out else t for t in o["inputs"]]
        if not is_block:
            level["outputs"] = [src if t == out else t for t in level["outputs"]]
        del ops[i]
    elif kind == "insert":
        if not op["outputs"]:
            return False
        out = rng.choice(op["outputs"])
        new_id = _fresh_id(ops)
        for o in ops[i + 1:]:
            o["inputs"] = [new_id if t == out else t for t in o["inputs"]]
        if not is_block:
            level["outputs"] = [new_id if t == out else t for t in level["outputs"]]
            level["tensors"].append({"id": new_id, "dims": [], "dtype": "float32"})
        ops.insert(i + 1, {"id": new_id, "type": arg, "inputs": [out], "outputs": [new_id], "attrs": {}})
    elif kind == "rewire":
        earlier = [t for o in ops[:i] for t in o["outputs"] if t not in op["inputs"]]
        if not earlier:
            return False
        j = rng.randrange(len(op["inputs"]))
        op["inputs"][j] = rng.choice(earlier)
    elif kind == "frange":
        level["forloop_range"] = arg
    elif kind == "grid":
        level["grid_dim"] = arg
    elif kind == "dimx":
        level["reduction_dimx"] = arg
    return True


def mutants(g: mi.KernelGraph, rng: random.Random, double: int = 0) -> Iterator[tuple[str, mi.KernelGraph]]:
    """Buildable mutants of ``g``: all single edits, then ``double`` random two-edit ones."""
    d = to_dict(g)
    singles = []
    for desc, nd in edits(d, rng):
        try:
            m = build(nd)
        except MirageLabError:
            continue
        singles.append((desc, nd))
        yield desc, m
    for _ in range(double):
        if not singles:
            return
        desc1, nd1 = rng.choice(singles)
        for desc2, nd2 in edits(nd1, rng):
            try:
                m = build(nd2)
            except MirageLabError:
                continue
            yield f"{desc1}; {desc2}", m
            break
