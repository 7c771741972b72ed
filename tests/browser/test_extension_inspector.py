"""The JupyterLab μGraph inspector (extension/) in a real JupyterLab, driven by headless Chromium.

The test writes a notebook whose outputs are *saved* MIME bundles of the fused RMSNorm+Linear
and the two-kernel GQA μGraphs (plus one broken bundle), starts JupyterLab on a free port with
no kernel, and checks what a person would: the kernel graph is drawn, expanding a customized op
shows its block graph and a fusion chain its thread graph, clicking a node fills the side panel,
search highlights, metric colouring has a legend, Export SVG downloads the view, and bad data
shows a message instead of breaking the page. Screenshots go to test-artifacts/.

It uses the built extension in mirage_lab/labextension/ (`cd extension && npm ci && npm run build`)
through JUPYTER_PATH, so it tests the current build whether or not the package is pip-installed.
"""
from __future__ import annotations

import json
import os
import shutil
import urllib.request
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from browser_support import ARTIFACTS, REPO, browser_missing, browser_page, jupyterlab

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]

BUILT = REPO / "mirage_lab" / "labextension"
EXT_NAME = "mirage-lab-mugraph"
DOC_SHOT = REPO / "docs" / "img" / "extension_inspector.png"
GQA_METRICS = {"op3": {"latency_us": 31.5, "bytes": 134217728}, "op4": {"latency_us": 6.2, "bytes": 1572864}}
# Illustrative per-op numbers for the browser checks (not measurements).
COMPARE_METRICS = [{"op2": {"latency_us": 24.0}}, {"op2": {"latency_us": 16.0}}]
PUBLIC_INSPECT = "mi.inspect(ex.gqa_flashdecoding(), metrics=GQA_METRICS, expand='block', summary={'latency_us': 37.7})"
PUBLIC_COMPARE = "mi.compare(rms_grid64, rms_grid256, metrics=COMPARE_METRICS, labels=('grid 64', 'grid 256'))"


def _requirements() -> str | None:
    if not (BUILT / "package.json").is_file():
        return f"extension not built ({BUILT} missing): run `cd extension && npm ci && npm run build`"
    return None


_missing = _requirements() or browser_missing()
if _missing:
    pytestmark.append(pytest.mark.skip(reason=_missing))


def _notebook(path: Path) -> None:
    import nbformat

    from mirage_lab import examples as ex
    from mirage_lab.ir.serialize import MIME_TYPE
    from mirage_lab.viz.mime import mimebundle

    nb = nbformat.v4.new_notebook()
    cells = [nbformat.v4.new_markdown_cell("# μGraph inspector (saved outputs, no kernel)")]
    import mirage_lab as mi

    sources = [
        ("from mirage_lab import examples as ex\nex.rms_norm_linear_fused()", mimebundle(ex.rms_norm_linear_fused())),
        ("ex.gqa_flashdecoding()  # with measured metrics", mimebundle(ex.gqa_flashdecoding(), metrics=GQA_METRICS)),
        ("broken", {MIME_TYPE: {"format": "not-a-mugraph"}, "text/plain": "KernelGraph(broken on purpose)"}),
        # The public API (test_extension_views.py): colouring by a metric, and the compare view.
        (PUBLIC_INSPECT, mi.inspect(ex.gqa_flashdecoding(), metrics=GQA_METRICS, expand="block",
                                    summary={"latency_us": 37.7})._repr_mimebundle_()),
        (PUBLIC_COMPARE, mi.compare(ex.rms_norm_linear_fused(grid=64), ex.rms_norm_linear_fused(grid=256),
                                    metrics=COMPARE_METRICS, labels=("grid 64", "grid 256"))._repr_mimebundle_()),
    ]
    for n, (src, bundle) in enumerate(sources, start=1):
        cell = nbformat.v4.new_code_cell(src, execution_count=n)
        cell.outputs = [nbformat.v4.new_output("execute_result", data=bundle, execution_count=n)]
        cells.append(cell)
    nb.cells = cells
    nbformat.validate(nb)
    path.write_text(nbformat.writes(nb), encoding="utf-8")


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A JupyterLab server with only the built extension added, isolated from the user's config."""
    base = tmp_path_factory.mktemp("lab")
    root, data = base / "root", base / "data"
    for d in (root, data / "labextensions"):
        d.mkdir(parents=True)
    # What `jupyter labextension develop` does: the extension dir links to the build output.
    (data / "labextensions" / EXT_NAME).symlink_to(BUILT, target_is_directory=True)
    _notebook(root / "inspector.ipynb")
    with jupyterlab(base, root, token="mirage-lab-browser-test", extensions=[EXT_NAME],
                    env={"JUPYTER_PATH": str(data)}) as server:
        yield server


def _kernels(lab) -> list:
    with urllib.request.urlopen(f"{lab['url']}/api/kernels?token={lab['token']}", timeout=5) as r:
        return json.loads(r.read())


@pytest.fixture(scope="module")
def page(lab):
    url = f"{lab['url']}/lab/tree/inspector.ipynb?token={lab['token']}"
    with browser_page(url, viewport={"width": 1500, "height": 1000}, accept_downloads=True) as pg:
        # The notebook has no kernelspec: answer JupyterLab's kernel dialog with "No Kernel".
        dialog = pg.locator(".jp-Dialog")
        try:
            dialog.get_by_role("button", name="No Kernel").click(timeout=30_000)
            dialog.wait_for(state="detached")
        except Exception:  # a JupyterLab that asks nothing: fine, no kernel either way
            pass
        pg.locator(".mlg-root .mlg-svg").nth(1).wait_for(timeout=60_000)
        yield pg


def _inspector(page, n: int):
    return page.locator(".mlg-root:has(.mlg-toolbar)").nth(n)


def _panel_text(insp) -> str:
    return insp.locator(".mlg-panel").inner_text()


def _node(insp, node_id: str):
    return insp.locator(f'[data-id="{node_id}"]')


def test_kernel_graphs_render_from_saved_outputs_without_a_kernel(page, lab):
    # two inspectors, the broken bundle's message, the public API's inspector and its comparison
    assert page.locator(".mlg-root").count() == 5
    assert page.locator(".mlg-root:has(.mlg-toolbar)").count() == 4
    rms = _inspector(page, 0)
    for nid in ("k0", "k1", "k2", "out2"):
        assert _node(rms, nid).count() == 1, nid
    assert _node(rms, "k2/b0").count() == 0  # collapsed at first
    assert "customized #2" in rms.locator('[data-id="k2"] > text').first.text_content()
    gqa = _inspector(page, 1)
    for nid in ("k0", "k1", "k2", "k3", "k4", "out5"):
        assert _node(gqa, nid).count() == 1, nid
    # The inspector, not the SVG fallback, renders the bundle.
    assert page.locator(".jp-RenderedSVG").count() == 0
    assert _kernels(lab) == []
    page.screenshot(path=str(ARTIFACTS / "inspector_notebook.png"))


def test_expand_customized_op_then_chain_and_inspect_nodes(page):
    rms = _inspector(page, 0)
    rms.locator('[data-toggle="k2"]').click()
    _node(rms, "k2/b0").wait_for()
    for nid in ("k2/b0", "k2/b1", "k2/b2", "k2/b5", "k2/b6", "k2/c3"):
        assert _node(rms, nid).count() == 1, nid
    assert "k2/c3/b3" not in rms.inner_html()  # the thread level is still folded

    _node(rms, "k2/b1").click()
    text = _panel_text(rms)
    assert "loader 1" in text and "imap" in text and "[1,-1,-1]" in text and "{x→1}" in text
    assert "fmap (forloop_dim)" in text and "t1: 4096×4096 float16" in text
    assert rms.locator('.mlg-selected[data-id="k2/b1"]').count() == 1

    _node(rms, "k2/b6").click()
    text = _panel_text(rms)
    assert "saver 0" in text and "omap" in text and "out_dims" in text and "[16,4096]" in text

    _node(rms, "k2/b2").click()
    text = _panel_text(rms)
    assert "accum rms" in text and "kind (acc)" in text and "after_accum" in text

    rms.locator('[data-toggle="k2/c3"]').click()
    _node(rms, "k2/c3/b3").wait_for()
    _node(rms, "k2/c3/b4").click()
    text = _panel_text(rms)
    assert "thread level" in text and "none (plain sum)" in text

    _node(rms, "k2").locator("rect.mlg-header").click()
    text = _panel_text(rms)
    assert "grid_dim" in text and "[256,1,1]" in text and "forloop_range" in text and "matmul → accum(none)" in text
    rms.screenshot(path=str(ARTIFACTS / "rms_norm_linear_expanded.png"))


def test_search_highlights_matches_and_hidden_ones(page):
    gqa = _inspector(page, 1)
    box = gqa.locator(".mlg-search")
    box.fill("sum_todimx")
    # The matching accumulator is inside collapsed op 4: the op is marked as containing it.
    assert gqa.locator('.mlg-contains[data-id="k4"]').count() == 1
    assert "1 match (1 hidden" in gqa.locator(".mlg-count").inner_text()
    box.press("Enter")  # reveals the hidden match
    gqa.locator('.mlg-match[data-id="k4/b3"]').wait_for()
    assert gqa.locator(".mlg-match").count() == 1
    assert "sum_todimx" in _panel_text(gqa)
    box.fill("")
    assert gqa.locator(".mlg-match, .mlg-contains, .mlg-dim").count() == 0


def test_metric_colouring_and_legend(page):
    gqa = _inspector(page, 1)
    gqa.locator('[data-action="collapse-all"]').click()
    _node(gqa, "k4/b0").wait_for(state="detached")
    gqa.locator(".mlg-metric").select_option("latency_us")
    legend = gqa.locator(".mlg-legend")
    assert legend.is_visible()
    assert "latency_us" in legend.inner_text() and "6.2" in legend.inner_text() and "31.5" in legend.inner_text()
    fill = lambda nid: gqa.locator(f'[data-id="{nid}"] > rect.mlg-box').first.get_attribute("style")  # noqa: E731
    assert fill("k3") == "fill: #fde725"  # the slowest op: top of the scale
    assert fill("k4") == "fill: #440154"  # the fastest: bottom
    assert gqa.locator('.mlg-nometric[data-id="k0"]').count() == 1  # inputs carry no latency

    # The view for the docs: the slow kernel opened into its block graph, a loader selected.
    gqa.locator('[data-toggle="k3"]').click()
    _node(gqa, "k3/b1").wait_for()
    assert gqa.locator('[data-id="k3"] > rect.mlg-header').get_attribute("style") == "fill: #fde725"
    _node(gqa, "k3/b1").click()
    assert "imap" in _panel_text(gqa)
    gqa.locator('[data-action="zoom-out"]').click()
    gqa.locator(".mlg-body").evaluate("e => { e.style.height = '720px'; }")  # as dragging its resize handle
    gqa.scroll_into_view_if_needed()
    gqa.screenshot(path=str(ARTIFACTS / "gqa_latency.png"))
    if os.environ.get("MIRAGE_LAB_UPDATE_DOC_IMAGES") == "1":  # a test run leaves the tracked docs alone
        shutil.copyfile(ARTIFACTS / "gqa_latency.png", DOC_SHOT)


def test_export_svg_downloads_the_current_view(page):
    gqa = _inspector(page, 1)
    with page.expect_download() as dl:
        gqa.locator('[data-action="export"]').click()
    out = ARTIFACTS / "gqa_export.svg"
    dl.value.save_as(out)
    text = out.read_text(encoding="utf-8")
    root = ET.fromstring(text.split("?>", 1)[1])
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    assert "customized #3 · grid 2×8×16" in text and "customized #4" in text and "loader 1" in text
    assert ".mlg-svg" in text and "fill: #fde725" in text  # styles and metric colours travel with it
    assert float(root.get("width")) > 100


def test_double_click_toggles_a_container(page):
    gqa = _inspector(page, 1)
    _node(gqa, "k4").locator("rect.mlg-box").first.dblclick()
    _node(gqa, "k4/b3").wait_for()
    assert "sum_todimx" in _node(gqa, "k4/b3").text_content()
    _node(gqa, "k4").locator("rect.mlg-header").dblclick()
    _node(gqa, "k4/b3").wait_for(state="detached")


def test_bad_data_shows_a_message_and_the_text_fallback(page):
    err = page.locator(".mlg-error")
    assert err.count() == 1
    text = err.inner_text()
    assert 'Cannot show this μGraph: format: expected "mirage_lab.mugraph"' in text
    assert "KernelGraph(broken on purpose)" in text


# ---------------------------------------------------------------------- navigation, export, compare
DOC_IMG = REPO / "docs" / "img"


def _doc_shot(name: str) -> None:
    """Refresh docs/img/<name> from this run's artifact when asked (a plain test run leaves docs alone)."""
    if os.environ.get("MIRAGE_LAB_UPDATE_DOC_IMAGES") == "1":
        shutil.copyfile(ARTIFACTS / name, DOC_IMG / name)


def _zoom(insp) -> float:
    return float(insp.get_attribute("data-zoom"))


def _viewbox(insp) -> list[float]:
    return [float(x) for x in insp.locator("svg.mlg-svg").first.get_attribute("viewBox").split()]


def _wait_layout(page, insp, before: int) -> None:
    page.wait_for_function("([el, n]) => Number(el.getAttribute('data-layouts')) > n",
                           arg=[insp.element_handle(), before], timeout=20_000)


def _layouts(insp) -> int:
    return int(insp.get_attribute("data-layouts") or 0)


def test_wheel_zooms_drag_pans_fit_shows_the_whole_graph_and_the_minimap_follows(page):
    insp = _inspector(page, 0).locator(".mlg-inspector")
    insp.locator('[data-action="collapse-all"]').click()
    _node(insp, "k2/b0").wait_for(state="detached")
    insp.locator('[data-action="zoom-fit"]').click()
    canvas = insp.locator(".mlg-canvas")
    canvas.scroll_into_view_if_needed()
    assert insp.locator(".mlg-minimap").is_hidden()  # the whole graph is in view
    box = canvas.bounding_box()
    z0 = _zoom(insp)
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.mouse.wheel(0, -400)
    page.wait_for_function("([el, z]) => Number(el.getAttribute('data-zoom')) > z * 1.5", arg=[insp.element_handle(), z0])
    assert insp.locator(".mlg-minimap").is_visible()  # part of the graph is out of view now
    # Drag on the background (a corner of the canvas, clear of nodes) pans by the distance dragged.
    x0, y0 = _viewbox(insp)[:2]
    z = _zoom(insp)
    sx, sy = box["x"] + 6, box["y"] + 6
    page.mouse.move(sx, sy)
    page.mouse.down()
    page.mouse.move(sx + 60, sy + 40, steps=6)
    page.mouse.up()
    x1, y1 = _viewbox(insp)[:2]
    assert abs((x0 - x1) * z - 60) < 2 and abs((y0 - y1) * z - 40) < 2
    canvas.screenshot(path=str(ARTIFACTS / "inspector_zoomed.png"))
    # Fit: the whole graph is inside the view again.
    insp.locator('[data-action="zoom-fit"]').click()
    vb = _viewbox(insp)
    w, h = (float(insp.locator("svg.mlg-svg rect.mlg-bg").get_attribute(k)) for k in ("width", "height"))
    assert vb[0] <= 0 and vb[1] <= 0 and vb[0] + vb[2] >= w and vb[1] + vb[3] >= h
    assert insp.locator(".mlg-minimap").is_hidden()


def test_png_export_downloads_the_whole_graph_at_twice_its_size(page):
    insp = _inspector(page, 1)
    with page.expect_download() as dl:
        insp.locator('[data-action="export-png"]').click()
    out = ARTIFACTS / "gqa_export.png"
    dl.value.save_as(out)
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    bg = insp.locator("svg.mlg-svg rect.mlg-bg")
    assert (width, height) == tuple(2 * int(bg.get_attribute(k)) for k in ("width", "height"))
    assert dl.value.suggested_filename == "mugraph.png"


def test_keyboard_walks_the_graph_highlights_neighbours_and_enter_expands_with_auto_height(page):
    insp = _inspector(page, 0).locator(".mlg-inspector")
    insp.locator('[data-action="collapse-all"]').click()
    _node(insp, "k2/b0").wait_for(state="detached")
    assert insp.locator("[data-id][tabindex='0']").count() == 4   # every node is focusable
    _node(insp, "k0").focus()
    assert "input 0" in _panel_text(insp)  # focus selects
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.getAttribute('data-id')") == "k1"
    assert "input 1" in _panel_text(insp)
    page.keyboard.press("ArrowDown")
    assert insp.locator(".mlg-selected").get_attribute("data-id") == "k2"
    assert page.evaluate("document.activeElement.getAttribute('data-id')") == "k2"
    # The selected op's neighbours (its inputs and its output) are highlighted, with their links.
    assert sorted(e.get_attribute("data-id") for e in insp.locator(".mlg-neighbour").all()) == ["k0", "k1", "out2"]
    assert insp.locator(".mlg-edge-hot").count() == 3
    before_h = insp.locator(".mlg-body").bounding_box()["height"]
    n = _layouts(insp)
    page.keyboard.press("Enter")
    _wait_layout(page, insp, n)
    _node(insp, "k2/b0").wait_for()
    assert page.evaluate("document.activeElement.getAttribute('data-id')") == "k2"  # focus survives the redraw
    after_h = insp.locator(".mlg-body").bounding_box()["height"]
    assert after_h > before_h + 100, (before_h, after_h)  # the canvas grew with the expanded graph
    # Search: Enter and Shift+Enter step through the matches, each selected in turn.
    box = insp.locator(".mlg-search")
    box.fill("loader")
    box.press("Enter")
    assert insp.locator(".mlg-count").inner_text().startswith("1/2 matches")
    assert insp.locator(".mlg-selected").get_attribute("data-id") == "k2/b0"
    insp.locator('[data-action="match-next"]').click()
    assert insp.locator(".mlg-count").inner_text().startswith("2/2")
    assert insp.locator(".mlg-selected").get_attribute("data-id") == "k2/b1"
    box.press("Shift+Enter")
    assert insp.locator(".mlg-selected").get_attribute("data-id") == "k2/b0"
    box.press("Escape")
    insp.scroll_into_view_if_needed()
    _node(insp, "k2/b1").click()
    insp.screenshot(path=str(ARTIFACTS / "inspector_keyboard_neighbours.png"))


def test_clicking_an_edge_shows_its_tensor(page):
    insp = _inspector(page, 0).locator(".mlg-inspector")
    insp.locator('[data-action="zoom-fit"]').click()
    edge = insp.locator('[data-edge^="k1->"]').first
    # A point on the drawn polyline, in page coordinates (its box centre may be off the line).
    x, y = edge.locator("path.mlg-edge-hit").evaluate(
        "p => { const l = p.getTotalLength(); const q = p.getPointAtLength(l / 2).matrixTransform(p.getScreenCTM());"
        " return [q.x, q.y]; }")
    page.mouse.click(x, y)
    text = _panel_text(insp)
    assert "tensor 4096×4096 f16" in text and "from" in text and "(k1)" in text
    assert insp.locator(".mlg-edge-selected").count() == 1


def test_full_screen_covers_the_window_and_escape_returns(page):
    insp = _inspector(page, 1).locator(".mlg-inspector")
    insp.locator('[data-action="fullscreen"]').click()
    page.wait_for_function("el => el.classList.contains('mlg-full')", arg=insp.element_handle())
    page.wait_for_function("el => el.getBoundingClientRect().height >= window.innerHeight - 2", arg=insp.element_handle())
    body = insp.locator(".mlg-body").bounding_box()
    assert body["width"] >= 1400 and body["height"] > 800
    page.screenshot(path=str(ARTIFACTS / "inspector_fullscreen.png"))
    insp.locator('[data-action="fullscreen"]').click()
    page.wait_for_function("el => !el.classList.contains('mlg-full')", arg=insp.element_handle())
    assert insp.locator(".mlg-body").bounding_box()["height"] < 900


def test_public_api_colours_by_a_metric_and_opens_the_graph(page):
    insp = _inspector(page, 2)
    insp.scroll_into_view_if_needed()
    # mi.inspect(..., metrics=..., expand="block"): coloured and open without a click.
    assert insp.locator(".mlg-metric").input_value() == "latency_us"
    _node(insp, "k3/b1").wait_for()
    # Both ops are open (expand="block"): their header strips carry the colour.
    fill = lambda nid: insp.locator(f'[data-id="{nid}"] > rect.mlg-header').get_attribute("style")  # noqa: E731
    assert fill("k3") == "fill: #fde725" and fill("k4") == "fill: #440154"
    legend = insp.locator(".mlg-legend").inner_text()
    assert "latency_us" in legend and "31.5" in legend and "6.2" in legend
    assert "latency_us 37.7" in insp.locator(".mlg-summary").inner_text()
    insp.screenshot(path=str(ARTIFACTS / "inspector_public_api_latency.png"))
    _doc_shot("inspector_public_api_latency.png")


def test_compare_view_shows_two_candidates_with_their_numbers(page):
    cmp_ = page.locator(".mlg-compare")
    assert cmp_.count() == 1
    cmp_.scroll_into_view_if_needed()
    cells = cmp_.locator(".mlg-compare-cell")
    assert cells.count() == 2
    assert [cells.nth(i).locator(".mlg-compare-label").inner_text() for i in range(2)] == ["grid 64", "grid 256"]
    table = cmp_.locator(".mlg-compare-table").inner_text()
    assert "latency_us (sum)" in table and "24" in table and "16" in table and "0.67×" in table
    for i in range(2):
        _node(cells.nth(i), "k2").wait_for()
    # One scale over both: the slower candidate's op is the top colour, the faster one's the bottom.
    style = lambda i: _node(cells.nth(i), "k2").locator("rect.mlg-box").first.get_attribute("style")  # noqa: E731
    assert style(0) == "fill: #fde725" and style(1) == "fill: #440154"
    # Picking a metric on one side colours the other side by it too.
    cells.nth(0).locator(".mlg-metric").select_option("")
    assert cells.nth(1).locator(".mlg-metric").input_value() == ""
    assert _node(cells.nth(1), "k2").locator("rect.mlg-box").first.get_attribute("style") is None
    cells.nth(1).locator(".mlg-metric").select_option("latency_us")
    assert cells.nth(0).locator(".mlg-metric").input_value() == "latency_us"
    cmp_.screenshot(path=str(ARTIFACTS / "inspector_compare.png"))
    _doc_shot("inspector_compare.png")
    # Each side is a whole inspector: opening one op leaves the other side as it was.
    cells.nth(0).locator('[data-toggle="k2"]').click()
    _node(cells.nth(0), "k2/b0").wait_for()
    assert _node(cells.nth(1), "k2/b0").count() == 0
    assert "256" in cells.nth(1).locator('[data-id="k2"]').first.text_content()


def test_no_uncaught_errors(page):
    assert page.errors == []
