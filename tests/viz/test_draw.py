"""Graphviz drawings at the kernel, block, thread and combined levels; notebook MIME bundles;
behaviour when the ``dot`` binary is missing."""
from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

import mirage_lab as mi
from mirage_lab import examples as ex
from mirage_lab.viz import LEVELS, dot_available, render_svg

needs_dot = pytest.mark.skipif(shutil.which("dot") is None and not os.environ.get("CI"),
                               reason="Graphviz `dot` not installed (./dev.sh installs it; CI must have it)")


def svg_text(graph, level: str) -> str:
    svg = render_svg(mi.draw(graph, level))
    assert svg.lstrip().startswith("<?xml") and "</svg>" in svg
    # the words of every <text> element, unescaped, in one string
    return " | ".join(html.unescape(t) for t in re.findall(r"<text[^>]*>([^<]*)</text>", svg))


@pytest.fixture(scope="module")
def rms():
    return ex.rms_norm_linear_fused(16, 4096, 4096)


@pytest.fixture(scope="module")
def gqa():
    return ex.gqa_flashdecoding()


@needs_dot
def test_kernel_level(rms, gqa):
    t = svg_text(rms, "kernel")
    for label in ("input 0", "float16[16,4096]", "input 1", "float16[4096,4096]", "customized",
                  "grid (256, 1, 1)", "forloop 32", "output 0"):
        assert label in t, label
    assert "load in0" not in t          # the kernel level does not open the block graph
    t = svg_text(gqa, "kernel")
    assert "grid (2, 8, 16)" in t and "grid (2, 16, 1)" in t and "forloop 4" in t


@needs_dot
def test_block_level_shows_maps_loop_and_accumulators(rms, gqa):
    t = svg_text(rms, "block")
    for label in ("customized op2: grid (256, 1, 1), block (128, 1, 1), forloop_range 32",
                  "load in0: float16[16,128]", "imap {}", "fmap 1",
                  "load in1: float16[128,16]", "imap {x→1}", "fmap 0",
                  "accum: rms", "accum: none (acc += x)", "div (after loop)",
                  "save out0: [16,4096]", "omap {x→1}"):
        assert label in t, label
    assert "thread chain" not in t
    t = svg_text(gqa, "block")
    for label in ("imap {x→0, z→1}", "imap {x→0, y→2}", "fmap 2", "omap {x→0, y→2, z→1}",
                  "accum: sum", "accum: sum_todimx", "forloop_range 4", "forloop_range 1"):
        assert label in t, label


@needs_dot
def test_thread_level_shows_fusion_chains(rms, gqa):
    t = svg_text(rms, "thread")
    assert "thread chain" in t and "matmul → accum: none (acc += x)" in t
    assert "block op" in t and "accum: rms" in t
    t = svg_text(gqa, "thread")
    assert "matmul → exp" in t
    assert "imap {x→0, z→1}, fmap ∅" in t


@needs_dot
def test_all_level_nests_chains_inside_block_graphs(rms):
    t = svg_text(rms, "all")
    assert "thread chain 3" in t                   # the matmul -> accum chain, as a nested cluster
    assert "imap {}" in t and "omap {x→1}" in t and "forloop_range 32" in t


def test_draw_returns_dot_source_without_rendering(rms):
    d = mi.draw(rms, "block")
    assert "cluster_op2_" in d.source and "forloop_range 32" in d.source
    assert d.source.count("->") >= 8       # edges between loaders, ops, saver and kernel I/O
    with pytest.raises(mi.MirageLabError, match=r"unknown level 'warp'; use one of \('kernel', 'block', 'thread', 'all'\)"):
        mi.draw(rms, "warp")
    with pytest.raises(mi.MirageLabError, match="expected a KernelGraph"):
        mi.draw(rms.customized_ops[0].block_graph)
    assert LEVELS == ("kernel", "block", "thread", "all")


def test_metrics_show_in_nodes(rms):
    d = mi.draw(rms, "kernel", metrics={"op2": "12.1 µs"})
    assert "12.1 µs" in d.source


@needs_dot
def test_mimebundle_of_a_graph(rms):
    b = rms._repr_mimebundle_()
    assert set(b) == {mi.MIME_TYPE, "image/svg+xml", "text/plain"}
    assert mi.MIME_TYPE == "application/vnd.mirage-lab.mugraph+json"
    # the MIME payload is the JSON document itself (what the JupyterLab extension renders)
    assert b[mi.MIME_TYPE] == json.loads(rms.to_json())
    assert "<svg" in b["image/svg+xml"] and "forloop_range 32" in html.unescape(b["image/svg+xml"])
    assert b["text/plain"] == repr(rms)
    assert "<svg" in rms._repr_svg_()


@needs_dot
def test_drawing_object_shows_itself_as_svg(rms):
    b = mi.draw(rms, "thread")._repr_mimebundle_()
    assert "image/svg+xml" in b and "thread chain" in html.unescape(b["image/svg+xml"])


# --------------------------------------------------------------------------- without dot
@pytest.fixture
def no_dot(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))   # an empty directory: no `dot` anywhere
    assert not dot_available()


def test_missing_dot_render_raises_package_error(no_dot, rms, tmp_path):
    d = mi.draw(rms, "all")             # building the drawing needs no binary
    for render in (lambda: render_svg(d), lambda: d.pipe(format="svg"), lambda: d.render(directory=tmp_path, format="png")):
        with pytest.raises(mi.GraphvizMissingError) as info:
            render()
        msg = str(info.value)
        assert "Graphviz's `dot` program is not installed" in msg
        assert "apt-get install graphviz" in msg and "brew install graphviz" in msg
        assert isinstance(info.value, mi.MirageLabError)


def test_missing_dot_mimebundle_degrades_to_text(no_dot, rms):
    b = rms._repr_mimebundle_()
    assert "image/svg+xml" not in b
    assert b[mi.MIME_TYPE]["format"] == "mirage_lab.mugraph"
    assert b["text/plain"].startswith(repr(rms))
    note = b["text/plain"][len(repr(rms)):]
    assert note.startswith("\n(drawing unavailable: Graphviz's `dot` program is not installed")
    assert "apt-get install graphviz" in note
    assert rms._repr_svg_() is None
    b2 = mi.draw(rms, "block")._repr_mimebundle_()
    assert list(b2) == ["text/plain"] and "apt-get install graphviz" in b2["text/plain"]


def test_missing_dot_in_a_fresh_process(tmp_path):
    code = (
        "import mirage_lab as mi\n"
        "from mirage_lab.examples import gqa_flashdecoding\n"
        "g = gqa_flashdecoding()\n"
        "b = g._repr_mimebundle_()\n"
        "print(sorted(b))\n"
        "try:\n"
        "    mi.viz.render_svg(mi.draw(g, 'thread'))\n"
        "except mi.GraphvizMissingError as e:\n"
        "    print('ERR', e)\n"
    )
    env = dict(os.environ, PATH=str(tmp_path))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == str(sorted([mi.MIME_TYPE, "text/plain"]))
    assert lines[1].startswith("ERR Graphviz's `dot` program is not installed") and "apt-get install graphviz" in lines[1]


def test_without_the_graphviz_python_package(tmp_path):
    """``import mirage_lab`` works without the graphviz package (a GPU box that only runs kernels);
    drawing then says how to install it, and a graph still shows itself as text."""
    code = (
        "import sys; sys.modules['graphviz'] = None\n"
        "import mirage_lab as mi\n"
        "from mirage_lab.examples import rms_norm_linear_fused\n"
        "g = rms_norm_linear_fused()\n"
        "b = g._repr_mimebundle_()\n"
        "print(sorted(b))\n"
        "print('(drawing unavailable: drawing μGraphs needs the graphviz Python package' in b['text/plain'])\n"
        "try:\n"
        "    mi.draw(g)\n"
        "except mi.GraphvizMissingError as e:\n"
        "    print('ERR', e)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == str(sorted([mi.MIME_TYPE, "text/plain"]))
    assert lines[1] == "True"
    assert lines[2].startswith("ERR drawing μGraphs needs the graphviz Python package") and "pip install graphviz" in lines[2]
