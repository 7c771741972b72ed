"""The verifier mutant corpus: mutants of correct μGraphs, scalar mutants and equivalent variants.

Bases: every hand-built (program, μGraph) pair of :mod:`verify_graphs` (``pairs`` and
``scalar_pairs``, at the "mut" size); each program and each μGraph is mutated and the
mutant is compared with the program. Three families:

- **structural** (:func:`verify_mutants.edits`): another op type, swapped operands, other
  imap/fmap/omap, forloop range, grid, accumulator, reduction dim, reduction_dimx, a dropped
  op, an inserted exp/square, a rewired input; single edits and random double edits;
- **scalar**: ``mul_scalar`` constants changed (×2, ×−1, ×(1+1e-6), ×1.113 and ×0.887 (n ≡ d
  mod 113), +25651 (the same field element), 1/s, 0); clamp bounds moved (by 2.625, ×2, by
  1e-3, to the other bound, ...); exp's argument scaled by 1.113, 0.887, 2.13, 114, 1/114,
  25652 (≡ 1 in the field), −1, 2**-0.5; a tensor scaled by such a constant;
- **equivalent variants**: commuted add/mul operands, silu ↔ x·sigmoid(x), ``mul_scalar(s)`` as
  two ``mul_scalar(±sqrt|s|)``, ``mul_scalar(c)`` then ``mul_scalar(1/c)`` (c = 2**-0.5, 3, 0.1)
  inserted after an op, ``mul_scalar(1)``, ``clamp∘clamp``, ``exp(x) = exp(x/2)·exp(x/2)``.

Ground truth is the float64 interpreter on five input draws of its own (normal, scaled by
4, 2**-4 and 2**-8, and uniform [0.5, 1.5)), independent of the verifier's seeds: a mutant whose outputs
differ (under every output permutation) is *non-equivalent*, one whose outputs agree to 1e-7
is *float-equivalent*.
"""
from __future__ import annotations

import itertools
import json
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import torch

import mirage_lab as mi
from mirage_lab.errors import MirageLabError
from mirage_lab.ir.serialize import to_dict
from mirage_lab.verify.float_check import float_equivalent, loose_ops

import verify_graphs as vg
import verify_mutants as vm

SCALAR_FACTORS = (2.0, -1.0, 1 + 1e-6, 1 + 1e-3, 1.113, 0.887, 0.5, 3.0, 1 / 3, 10.0, -0.5)
SCALAR_SETS = ("+25651", "1/s", "0")
CLAMP_EDITS = (("lo", -2.625), ("lo", "x2"), ("lo", 1e-3), ("hi", "x2"), ("hi", -0.25), ("hi", 1e-3), ("lo", "=hi"),
               ("hi", "=lo"), ("lo", 0.375), ("lo", -0.125), ("hi", 0.125), ("lo", -1.0), ("hi", 2.0), ("lo", -1e-6))
EXP_SCALES = (1.113, 0.887, 2.13, 114.0, 1 / 114, 227.0, 340.0, 25652.0, -1.0, 2 ** -0.5, 0.5, 1.5, 1 + 1e-6)
TENSOR_SCALES = (1.113, 25652.0, 2 ** -0.5, 0.5, -1.0)
CLASSES = ("op type", "operands", "maps", "loop range", "grid", "accumulator", "reduction", "dimx", "dropped op",
           "inserted op", "rewired input", "scalar value", "clamp bound", "exp scale", "tensor scale", "double edit")


@dataclass
class Case:
    """One corpus entry: ``variant`` = constructed to be equivalent."""

    base: str
    cls: str
    desc: str
    d: dict
    variant: bool = False


def bases() -> dict[str, tuple[Callable, list[Callable]]]:
    """``name -> (make_program, [graphs to mutate])``."""
    out = {}
    for name, (p, f) in {**vg.pairs("mut"), **vg.scalar_pairs("mut")}.items():
        out[name] = (p, [p, f])
    return out


def classify(desc: str) -> str:
    """The mutation class of a :func:`verify_mutants.edits` description."""
    for key, cls in (("swap operands", "operands"), ("imap", "maps"), ("fmap", "maps"), ("omap", "maps"),
                     ("forloop_range", "loop range"), ("grid", "grid"), ("acc ->", "accumulator"),
                     ("dim ->", "reduction"), ("reduction_dimx", "dimx"), ("scalar x2", "scalar value"),
                     ("lo -> 0", "clamp bound"), ("hi -> 1", "clamp bound"), ("drop", "dropped op"),
                     ("after", "inserted op"), ("rewire", "rewired input"), (" -> ", "op type")):
        if key in desc:
            return cls
    return "other"


# --------------------------------------------------------------------------- dict edits
def _new_op(ops: list, typ: str, src: int, attrs: dict) -> dict:
    nid = vm._fresh_id(ops)
    return {"id": nid, "type": typ, "inputs": [src], "outputs": [nid], "attrs": attrs}


def _insert_after(level: dict, ops: list, i: int, out: int, chain: list[tuple[str, dict]], is_block: bool) -> None:
    """Insert a chain of unary ops after ops[i] on its output ``out``; later uses read the chain's end."""
    cur = out
    new_ops = []
    for typ, attrs in chain:
        op = _new_op(ops + new_ops, typ, cur, attrs)
        new_ops.append(op)
        cur = op["outputs"][0]
    for o in ops[i + 1:]:
        o["inputs"] = [cur if t == out else t for t in o["inputs"]]
    if not is_block:
        level["outputs"] = [cur if t == out else t for t in level["outputs"]]
        for op in new_ops:
            level["tensors"].append({"id": op["outputs"][0], "dims": [], "dtype": "float32"})
    ops[i + 1:i + 1] = new_ops


def _insert_before(ops: list, i: int, typ: str, attrs: dict) -> None:
    """Feed ops[i]'s first input through a new block op."""
    op = _new_op(ops, typ, ops[i]["inputs"][0], attrs)
    ops[i]["inputs"] = [op["outputs"][0]] + ops[i]["inputs"][1:]
    ops.insert(i, op)


def _edited(d: dict, s_idx: int, fn: Callable[[dict, list, int, bool], Any]) -> dict | None:
    nd = json.loads(json.dumps(d))
    level, ops, i, is_block = vm._sites(nd)[s_idx]
    return None if fn(level, ops, i, is_block) is False else nd


def _compute_sites(d: dict) -> Iterator[tuple[int, dict, bool]]:
    for s_idx, (_, ops, i, is_block) in enumerate(vm._sites(d)):
        if ops[i]["type"] not in ("input", "output") and ops[i]["outputs"]:
            yield s_idx, ops[i], is_block


def scalar_edits(d: dict) -> Iterator[tuple[str, str, dict]]:
    """(class, description, dict) for every scalar mutation of ``d``."""
    for s_idx, (_, ops, i, is_block) in enumerate(vm._sites(d)):
        op = ops[i]
        a = op.get("attrs", {})
        where = f"{'block' if is_block else 'kernel'} op {i} ({op['type']})"
        if op["type"] == "mul_scalar":
            s = a["scalar"]
            news = [(f"x{f:g}", s * f) for f in SCALAR_FACTORS]
            news += [("+25651", s + 25651.0), ("1/s", 1.0 / s if s else 1.0), ("0", 0.0)]
            for label, v in news:
                if v != s:
                    nd = _edited(d, s_idx, lambda lv, o, j, b, v=v: o[j]["attrs"].__setitem__("scalar", v))
                    yield "scalar value", f"{where} scalar {s:g} {label} -> {v!r}", nd
        if op["type"] == "clamp":
            lo, hi = a["lo"], a["hi"]
            for which, how in CLAMP_EDITS:
                cur = a[which]
                v = cur * 2 if how == "x2" else hi if how == "=hi" else lo if how == "=lo" else cur + how
                nlo, nhi = (v, hi) if which == "lo" else (lo, v)
                if nlo > nhi or (nlo, nhi) == (lo, hi):
                    continue
                nd = _edited(d, s_idx, lambda lv, o, j, b, k=which, v=v: o[j]["attrs"].__setitem__(k, v))
                yield "clamp bound", f"{where} {which} {cur:g} -> {v!r}", nd
        if op["type"] == "exp" and is_block:
            for c in EXP_SCALES:
                nd = _edited(d, s_idx, lambda lv, o, j, b, c=c: _insert_before(o, j, "mul_scalar", {"scalar": c}))
                yield "exp scale", f"{where}: exp({c!r}·x)", nd
    for s_idx, op, is_block in _compute_sites(d):
        if is_block:
            for c in TENSOR_SCALES:
                out = op["outputs"][0]
                nd = _edited(d, s_idx, lambda lv, o, j, b, c=c, out=out: _insert_after(
                    lv, o, j, out, [("mul_scalar", {"scalar": c})], b))
                yield "tensor scale", f"block op ({op['type']}) output x{c!r}", nd


def equivalent_edits(d: dict) -> Iterator[tuple[str, str, dict]]:
    """(class, description, dict) for edits that keep the function."""
    for s_idx, (level, ops, i, is_block) in enumerate(vm._sites(d)):
        op = ops[i]
        typ = op["type"]
        where = f"{'block' if is_block else 'kernel'} op {i} ({typ})"
        if typ in ("add", "mul") and op["inputs"][0] != op["inputs"][1]:
            yield "commuted operands", f"swap operands of {where}", _edited(
                d, s_idx, lambda lv, o, j, b: o[j].__setitem__("inputs", o[j]["inputs"][::-1]))
        if typ == "silu":
            def silu_as_product(lv, o, j, b):
                src = o[j]["inputs"][0]
                sig = _new_op(o, "sigmoid", src, {})
                o[j].update(type="mul", inputs=[src, sig["outputs"][0]], attrs={})
                o.insert(j, sig)
                if not b:
                    lv["tensors"].append({"id": sig["outputs"][0], "dims": [], "dtype": "float32"})
            yield "silu as x*sigmoid(x)", f"{where} -> x*sigmoid(x)", _edited(d, s_idx, silu_as_product)
        if typ == "mul" and len(op["inputs"]) == 2:
            # mul(x, sigmoid(x)) -> silu(x)
            prod = {o["outputs"][0]: o for o in ops[:i] if o["outputs"]}
            a, b2 = op["inputs"]
            for x, s in ((a, b2), (b2, a)):
                sp = prod.get(s)
                if sp and sp["type"] == "sigmoid" and sp["inputs"] == [x]:
                    yield "x*sigmoid(x) as silu", f"{where} -> silu", _edited(
                        d, s_idx, lambda lv, o, j, bb, x=x: o[j].update(type="silu", inputs=[x], attrs={}))
                    break
        if typ == "mul_scalar":
            s = op["attrs"]["scalar"]
            r = abs(s) ** 0.5
            if r:
                out = op["outputs"][0]

                def two_roots(lv, o, j, b, r=r, s=s, out=out):
                    o[j]["attrs"]["scalar"] = r
                    _insert_after(lv, o, j, out, [("mul_scalar", {"scalar": r if s > 0 else -r})], b)
                yield "scalar split", f"{where} {s:g} -> two of {r:g}", _edited(d, s_idx, two_roots)
        if typ == "clamp":
            out = op["outputs"][0]
            yield "clamp twice", f"{where} twice", _edited(d, s_idx, lambda lv, o, j, b, out=out, a=dict(op["attrs"]): (
                _insert_after(lv, o, j, out, [("clamp", a)], b)))
        if typ == "exp" and is_block:
            def half_squared(lv, o, j, b):
                src = o[j]["inputs"][0]
                half = _new_op(o, "mul_scalar", src, {"scalar": 0.5})
                o.insert(j, half)
                e = o[j + 1]
                e["inputs"] = [half["outputs"][0]]
                out = e["outputs"][0]
                sq = _new_op(o, "mul", out, {})
                sq["inputs"] = [out, out]
                for later in o[j + 2:]:
                    later["inputs"] = [sq["outputs"][0] if t == out else t for t in later["inputs"]]
                o.insert(j + 2, sq)
            yield "exp(x/2)^2", f"{where} -> exp(x/2)*exp(x/2)", _edited(d, s_idx, half_squared)
    for s_idx, op, is_block in _compute_sites(d):
        if is_block:
            out = op["outputs"][0]
            for c in (2 ** -0.5, 3.0, 0.1):
                yield "scale and unscale", f"block op ({op['type']}) x{c:g} then x1/{c:g}", _edited(
                    d, s_idx, lambda lv, o, j, b, c=c, out=out: _insert_after(
                        lv, o, j, out, [("mul_scalar", {"scalar": c}), ("mul_scalar", {"scalar": 1 / c})], b))
            yield "times one", f"block op ({op['type']}) x1", _edited(
                d, s_idx, lambda lv, o, j, b, out=out: _insert_after(lv, o, j, out, [("mul_scalar", {"scalar": 1.0})], b))


def corpus(doubles: int = 360, seed: int = 0) -> Iterator[Case]:
    """Every case, deterministic for ``seed``; ``doubles`` random two-edit mutants per graph
    (a random single edit, then a random structural or scalar edit of it)."""
    rng = random.Random(seed)
    for name, (_, graphs) in bases().items():
        for make in graphs:
            d = to_dict(make())
            singles = []
            for desc, nd in vm.edits(d, rng):
                singles.append((desc, nd))
                yield Case(name, classify(desc), desc, nd)
            for cls, desc, nd in scalar_edits(d):
                if nd is not None:
                    singles.append((desc, nd))
                    yield Case(name, cls, desc, nd)
            for cls, desc, nd in equivalent_edits(d):
                if nd is not None:
                    yield Case(name, cls, desc, nd, variant=True)
            for k in range(doubles if singles else 0):
                desc1, first = rng.choice(singles)
                if rng.random() < 0.25:
                    seconds = [(desc, nd) for _, desc, nd in scalar_edits(first) if nd is not None]
                    second = rng.choice(seconds) if seconds else None
                else:
                    second = next(iter(vm.edits(first, rng)), None)
                if second is not None:
                    yield Case(name, "double edit", f"{desc1}; then {second[0]}", second[1])


# --------------------------------------------------------------------------- ground truth
def _close(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.shape != b.shape:
        return False
    fa, fb = torch.isfinite(a), torch.isfinite(b)
    if not torch.equal(fa, fb) or not torch.equal(torch.isnan(a), torch.isnan(b)):
        return False
    if not torch.equal(torch.nan_to_num(a[~fa], nan=0.0), torch.nan_to_num(b[~fb], nan=0.0)):
        return False
    a, b = a[fa], b[fb]
    if a.numel() == 0:
        return True
    scale = a.abs().max().item()
    return bool(((a - b).abs() <= 1e-7 * (a.abs() + b.abs()) + 1e-9 * scale).all())


class GroundTruth:
    """The program's float64 outputs on five draws of its own; ``equal(m)`` compares a mutant."""

    def __init__(self, prog: mi.KernelGraph, seed: int = 12345):
        gen = torch.Generator().manual_seed(seed)
        dims = [t.dims for t in prog.inputs]
        self.inputs = [[torch.randn(d, generator=gen, dtype=torch.float64) for d in dims],
                       [4 * torch.randn(d, generator=gen, dtype=torch.float64) for d in dims],
                       [2.0 ** -4 * torch.randn(d, generator=gen, dtype=torch.float64) for d in dims],
                       [2.0 ** -8 * torch.randn(d, generator=gen, dtype=torch.float64) for d in dims],
                       [torch.rand(d, generator=gen, dtype=torch.float64) + 0.5 for d in dims]]
        self.wants = [mi.run_reference(prog, x) for x in self.inputs]
        self.n = len(prog.outputs)

    def equal(self, m: mi.KernelGraph) -> bool:
        if len(m.outputs) != self.n:
            return False
        gots = [mi.run_reference(m, x) for x in self.inputs]
        return any(all(_close(got[p[i]], want[i]) for got, want in zip(gots, self.wants) for i in range(self.n))
                   for p in itertools.permutations(range(self.n)))


# --------------------------------------------------------------------------- running
@dataclass
class Report:
    """Counts of one corpus run (see :func:`evaluate`)."""

    stats: Counter = field(default_factory=Counter)
    by_class: dict[str, Counter] = field(default_factory=dict)
    false_accepts: list[str] = field(default_factory=list)
    false_rejects: list[str] = field(default_factory=list)
    field_only_accepts: dict[str, Counter] = field(default_factory=dict)   # class -> {"k1": n, "k2": n}
    verify_time: float = 0.0
    float_check_time: float = 0.0
    float_checks: int = 0
    second_checks: Counter = field(default_factory=Counter)   # "confirmed", "rejected", "decided", ...
    field_accept_labels: list[str] = field(default_factory=list)   # non-equivalent, accepted by the field alone

    def count(self, cls: str, key: str, n: int = 1) -> None:
        self.stats[key] += n
        self.by_class.setdefault(cls, Counter())[key] += n


def evaluate(cases: list[Case], seed: int = 0, field_k1: bool = True) -> Report:
    """Verify every case against its program; classify by ground truth.

    Per mutant: ``equivalent(prog, m)`` (defaults: tests=2, float check "auto") is the verdict;
    the field alone (``float_check="never"``) at k = 2 is read off the same run and, with
    ``field_k1``, at k = 1 from a second run: their accepts of non-equivalent mutants are the
    field's blind spots, which the float64 check closes.
    """
    rep = Report()
    progs: dict[str, tuple[mi.KernelGraph, GroundTruth, list]] = {}
    base = bases()
    n = seed * 1_000_003
    for c in cases:
        if c.base not in progs:
            prog = base[c.base][0]()
            progs[c.base] = (prog, GroundTruth(prog), sorted(t.dims for t in prog.outputs))
        prog, truth, out_shapes = progs[c.base]
        try:
            m = vm.build(c.d)
        except MirageLabError:
            rep.count(c.cls, "refused by the builder")
            continue
        n += 1
        rep.count(c.cls, "variants" if c.variant else "mutants")
        t0 = time.perf_counter()
        r = mi.verify.equivalent(prog, m, seed=n, backend="numpy")
        rep.verify_time += time.perf_counter() - t0
        if r.second_check:
            rep.second_checks[r.second_check] += 1
            t0 = time.perf_counter()
            float_equivalent(prog, m, n)
            rep.float_check_time += time.perf_counter() - t0
            rep.float_checks += 1
        same_shapes = sorted(t.dims for t in m.outputs) == out_shapes and len(m.outputs) == len(prog.outputs)
        truly = same_shapes and truth.equal(m)
        field_k2 = (bool(r) and r.second_check != "decided") or r.second_check == "rejected"
        label = f"{c.base}: {c.desc}"
        if not truly:
            rep.count(c.cls, "non-equivalent")
            if c.variant:
                rep.count(c.cls, "variant not float-equivalent (construction error)")
            if r:
                rep.false_accepts.append(label)
                rep.count(c.cls, "false accepts")
            fo = rep.field_only_accepts.setdefault(c.cls, Counter())
            if field_k2:
                fo["k2"] += 1
                rep.field_accept_labels.append(label)
            if field_k1 and same_shapes and mi.verify.equivalent(prog, m, tests=1, seed=n, backend="numpy",
                                                                 float_check="never"):
                fo["k1"] += 1
        else:
            rep.count(c.cls, "float-equivalent")
            if r:
                rep.count(c.cls, "accepted")
            else:
                loose = sorted(loose_ops(m) | loose_ops(prog))
                rep.false_rejects.append(f"{label} [{r.reason[:80]}] loose ops {loose}")
                rep.count(c.cls, "false rejects")
    return rep


def sample(k: int, seed: int, doubles: int = 20) -> list[Case]:
    """``k`` cases drawn at random from the whole corpus (every class represented when k allows)."""
    allc = list(corpus(doubles=doubles))
    rng = random.Random(seed)
    by: dict[str, list[Case]] = {}
    for c in allc:
        by.setdefault(c.cls, []).append(c)
    picked = [rng.choice(v) for v in by.values()]
    rest = rng.sample(allc, max(0, k - len(picked)))
    return picked + rest
