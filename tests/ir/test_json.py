"""Versioned JSON: exact round trips, a content hash stable across processes, clear errors on bad files."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import mirage_lab as mi
from mirage_lab import examples as ex
from mirage_lab.ir.serialize import FORMAT, VERSION


def every_block_op_graph() -> mi.KernelGraph:
    """A small graph touching every block op type, every accumulator, strides and clamp."""
    g = mi.new_kernel_graph()
    X = g.new_input((8, 256), dtype=mi.float32, strides=(256, 1))
    Y = g.new_input((8, 256), dtype=mi.float32)
    bg = mi.new_threadblock_graph((2, 1, 1), (128, 1, 1), forloop_range=4, reduction_dimx=16)
    x = bg.new_input(X, input_map=(0, -1, -1), forloop_dim=1)   # [4,64]
    y = bg.new_input(Y, input_map=(0, -1, -1), forloop_dim=1, store_in_dmem=True)
    a = bg.sub(bg.mul(bg.add(x, y), bg.div(y, bg.exp(x))), bg.pow(bg.relu(x), bg.square(y)))
    b = bg.clamp(bg.mul_scalar(bg.gelu(bg.silu(a)), 0.5), -3, 3)
    c = bg.concat(bg.sqrt(bg.square(b)), b, 1)                   # [4,128]
    r = bg.reduction(c, 1)                                       # [4,1]
    n = bg.rms_norm(c)
    accs = [bg.forloop_accum(n), bg.forloop_accum(c, "sum"), bg.forloop_accum(x, "mean"),
            bg.forloop_accum(y, "rms"), bg.forloop_accum(c, "sum_todimx"), bg.forloop_accum(r)]
    for t in accs:
        bg.new_output(bg.exp(t), output_map=(0, -1, -1))
    outs = g.customized([X, Y], bg)
    k = g.clamp(g.reduction(g.sqrt(g.square(outs[0])), 1), 0.0, 10.0)
    g.mark_output(k)
    g.mark_output(g.pow(g.gelu(g.relu(g.silu(outs[4]))), outs[3]))
    return g


def all_graphs() -> dict[str, mi.KernelGraph]:
    return {
        "rms_program": ex.rms_norm_linear_program(16, 4096, 4096),
        "rms_fused": ex.rms_norm_linear_fused(16, 4096, 4096),
        "rms_fused_6144": ex.rms_norm_linear_fused(2, 4096, 6144),
        "gqa_program": ex.gqa_program(),
        "gqa_flashdecoding": ex.gqa_flashdecoding(),
        "gated_mlp_program": ex.gated_mlp_program(),
        "gated_mlp_fused": ex.gated_mlp_fused(),
        "every_op": every_block_op_graph(),
    }


@pytest.mark.parametrize("name", list(all_graphs()))
def test_round_trip_is_exact(name):
    g = all_graphs()[name]
    text = g.to_json()
    g2 = mi.from_json(text)
    assert g2.to_json() == text
    assert g2.content_hash() == g.content_hash()
    assert repr(g2) == repr(g)
    # the derived thread graph comes back identical too
    for a, b in zip(g.customized_ops, g2.customized_ops):
        assert a.block_graph.thread_graph().to_dict() == b.block_graph.thread_graph().to_dict()


def test_round_trip_preserves_semantics():
    g = every_block_op_graph()
    g2 = mi.from_json(g.to_json())
    x, y = torch.rand(8, 256) + 0.1, torch.rand(8, 256) + 0.1
    for a, b in zip(mi.run_reference(g, [x, y]), mi.run_reference(g2, [x, y])):
        assert torch.equal(a, b)
        assert torch.isfinite(a).all()


def test_json_layout_is_documented_shape():
    d = json.loads(ex.rms_norm_linear_fused(16, 4096, 4096).to_json())
    assert d["format"] == FORMAT == "mirage_lab.mugraph" and d["version"] == VERSION == 1
    kg = d["kernel_graph"]
    assert kg["inputs"] == [0, 1] and kg["outputs"] == [2]
    cust = kg["ops"][2]
    assert cust["type"] == "customized"
    bg = cust["block_graph"]
    assert bg["grid_dim"] == [256, 1, 1] and bg["forloop_range"] == 32 and bg["reduction_dimx"] == 64
    assert bg["ops"][0]["attrs"] == {"input_map": [-1, -1, -1], "forloop_dim": 1, "dtensor_dims": [16, 4096],
                                     "store_in_dmem": False}
    assert bg["thread_graph"] == {"chains": [[0], [1], [2], [3, 4], [5], [6]]}


def test_metrics_travel_but_do_not_change_the_hash():
    g = ex.rms_norm_linear_fused()
    text = g.to_json(metrics={"op2": {"latency_us": 12.5}})
    assert json.loads(text)["metrics"] == {"op2": {"latency_us": 12.5}}
    assert mi.from_json(text).content_hash() == g.content_hash()


def test_hash_is_stable_across_processes():
    names = list(all_graphs())
    code = (
        "import mirage_lab as mi, sys; sys.path.insert(0, sys.argv[1]); import test_json as t;"
        "gs = t.all_graphs(); print(' '.join(gs[n].content_hash() for n in sys.argv[2:]))"
    )
    env = dict(os.environ, PYTHONHASHSEED="12345")  # a different str-hash seed from this process
    out = subprocess.run([sys.executable, "-c", code, str(Path(__file__).parent), *names], env=env,
                         capture_output=True, text=True, timeout=120, check=True).stdout.split()
    here = [all_graphs()[n].content_hash() for n in names]
    assert out == here
    assert len(set(here)) == len(here)  # different graphs, different hashes
    assert all(len(h) == 64 and int(h, 16) >= 0 for h in here)


def test_hash_changes_with_any_structural_change():
    base = ex.rms_norm_linear_fused(16, 4096, 4096).content_hash()
    assert ex.rms_norm_linear_fused(16, 4096, 4096).content_hash() == base
    assert ex.rms_norm_linear_fused(16, 4096, 4096, grid=128).content_hash() != base
    assert ex.rms_norm_linear_fused(16, 4096, 4096, forloop_range=64).content_hash() != base
    assert ex.rms_norm_linear_fused(16, 4096, 4096, dtype=mi.float32).content_hash() != base


def test_save_and_load(tmp_path):
    g = ex.gqa_flashdecoding()
    p = mi.save(g, tmp_path / "gqa.json")
    assert p == tmp_path / "gqa.json" and p.exists()
    assert not list(tmp_path.glob("*.tmp"))  # written atomically: no leftover temp file
    g2 = mi.load(p)
    assert g2.to_json() == g.to_json()
    assert mi.load(str(p)).content_hash() == g.content_hash()


# --------------------------------------------------------------------------- corrupt input
def _doc() -> dict:
    return json.loads(ex.rms_norm_linear_fused(16, 4096, 4096).to_json())


def _mutate(fn) -> str:
    d = _doc()
    fn(d)
    return json.dumps(d)


CORRUPT = {
    "not json": ("hello, world", r"not valid JSON"),
    "empty": ("", r"not valid JSON"),
    "truncated": (ex.rms_norm_linear_fused().to_json()[:300], r"not valid JSON"),
    "a list": ("[1, 2, 3]", r"not a mirage_lab μGraph: expected \"format\": \"mirage_lab.mugraph\""),
    "wrong format": (_mutate(lambda d: d.update(format="mirage.checkpoint")), r"not a mirage_lab μGraph"),
    "newer version": (_mutate(lambda d: d.update(version=VERSION + 1)),
                      r"newer mirage_lab \(format version 2; this one reads up to 1\); upgrade mirage_lab"),
    "version not int": (_mutate(lambda d: d.update(version="1")), r"'version' should be a positive int"),
    "no kernel_graph": (_mutate(lambda d: d.pop("kernel_graph")), r"top level has no 'kernel_graph'"),
    "no ops": (_mutate(lambda d: d["kernel_graph"].pop("ops")), r"kernel_graph has no 'ops'"),
    "no outputs": (_mutate(lambda d: d["kernel_graph"].pop("outputs")), r"kernel_graph has no 'outputs'"),
    "no grid": (_mutate(lambda d: d["kernel_graph"]["ops"][2]["block_graph"].pop("grid_dim")),
                r"kernel_graph\.ops\[2\]\.block_graph has no 'grid_dim'"),
    "missing attr": (_mutate(lambda d: d["kernel_graph"]["ops"][2]["block_graph"]["ops"][2]["attrs"].pop("acc")),
                     r"kernel_graph\.ops\[2\]: missing key 'acc'"),
    "dangling id": (_mutate(lambda d: d["kernel_graph"]["ops"][2].update(inputs=[0, 7])),
                    r"kernel_graph\.ops\[2\] reads tensor id 7, which no earlier op produces"),
    "wrong input dims": (_mutate(lambda d: d["kernel_graph"]["tensors"][1].update(dims=[4096, 4000])),
                         r"kernel_graph\.ops\[2\] describes an invalid graph: .*grid axis x \(size 256\) does not divide"),
    "wrong output dims": (_mutate(lambda d: d["kernel_graph"]["tensors"][2].update(dims=[16, 4000])),
                          r"output 2 is saved as float16\[16, 4000\], but the op computes float16\[16, 4096\]"),
    "dims not a list": (_mutate(lambda d: d["kernel_graph"]["tensors"][0].update(dims="16x4096")),
                        r"dims should be list, got str"),
    "negative dim": (_mutate(lambda d: d["kernel_graph"]["tensors"][0].update(dims=[-16, 4096])),
                     r"describes an invalid graph: new_input: every dim must be a positive int"),
    "unknown dtype": (_mutate(lambda d: d["kernel_graph"]["tensors"][0].update(dtype="float8")),
                      r"unknown dtype 'float8'"),
    "unknown op": (_mutate(lambda d: d["kernel_graph"]["ops"][2].update(type="conv2d")), r"unknown op type 'conv2d'"),
    "attrs not object": (_mutate(lambda d: d["kernel_graph"]["ops"][0].update(attrs=[])),
                         r"ops\[0\]\.attrs should be an object"),
    "bad imap": (_mutate(lambda d: d["kernel_graph"]["ops"][2]["block_graph"]["ops"][1]["attrs"].update(input_map=[7, -1, -1])),
                 r"invalid graph: new_input \(block graph\): input_map \(7, -1, -1\)"),
    "block ops not list": (_mutate(lambda d: d["kernel_graph"]["ops"][2]["block_graph"].update(ops=3)),
                           r"block_graph\.ops should be list, got int"),
    "inputs list wrong": (_mutate(lambda d: d["kernel_graph"].update(inputs=[1, 0])), r"kernel_graph\.inputs is \[1, 0\]"),
}


@pytest.mark.parametrize("case", list(CORRUPT))
def test_corrupt_text_gives_serialization_error(case):
    text, pattern = CORRUPT[case]
    with pytest.raises(mi.SerializationError, match=pattern) as info:
        mi.from_json(text)
    assert isinstance(info.value, mi.MirageLabError)


def test_from_json_wrong_argument_type():
    with pytest.raises(mi.SerializationError, match=r"expected the JSON text .* use mi\.load\(path\)"):
        mi.from_json(None)  # type: ignore[arg-type]


def test_load_corrupt_or_missing_file_names_the_path(tmp_path):
    p = tmp_path / "bad.json"
    p.write_text(CORRUPT["newer version"][0])
    with pytest.raises(mi.SerializationError, match=rf"{p}: this μGraph was saved by a newer mirage_lab"):
        mi.load(p)
    p.write_bytes(b"\x00\xff\xfe garbage")
    with pytest.raises(mi.SerializationError, match=str(p)):
        mi.load(p)
    with pytest.raises(mi.SerializationError, match="cannot read μGraph file"):
        mi.load(tmp_path / "missing.json")
