"""The search widget while the kernel is busy, and after the notebook is saved and reopened.

One notebook, run with Run All in a real JupyterLab and headless Chromium: cell 1 starts a search
that runs for a minute or more (RMSNorm + Linear X[4,256]·W[256,256], ``max_kernel_ops=4``, one
worker) and shows the widget; cell 2 blocks in ``w.wait()``. While cell 2 runs, the test

* clicks a table row and checks that the detail pane follows (the click is handled during ``wait``);
* clicks **Stop** and checks that ``wait`` returns with the search stopped within 2 s;

then saves the notebook, shuts its kernel down, reloads the page and checks the saved view: the
status, the table, the selected candidate's drawing and the progress figure, with no widget state in
the file. Screenshots go to test-artifacts/ (and docs/img/ with MIRAGE_LAB_UPDATE_DOC_IMAGES=1).
"""
from __future__ import annotations

import json
import os
import shutil
import time

import pytest

from browser_support import ARTIFACTS, REPO, browser_missing, browser_page, jupyterlab

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

WIDGET_EXTENSIONS = ("@jupyter-widgets/jupyterlab-manager", "anywidget")
NAME = "explorer_live.ipynb"
SHOTS = {"explorer_live_wait.png": "live", "explorer_saved_view.png": "saved"}

SETUP = """import mirage_lab as mi
from mirage_lab import examples as ex

w = mi.lab.explore(ex.rms_norm_linear_program(4, 256, 256), workers=1, max_kernel_ops=4,
                   title="RMSNorm + Linear, max_kernel_ops=4 (a minute or more)")
w"""
WAIT = """ended = w.wait(timeout=240)
print("waited", ended, w.state, "selected", w.selected)"""


def _requirements() -> str | None:
    if shutil.which("dot") is None:
        return "Graphviz's dot is not installed (apt-get install graphviz): the widget's drawing needs it"
    return None


_missing = browser_missing() or _requirements()
if _missing:
    pytestmark.append(pytest.mark.skip(reason=_missing))


def _notebook(path) -> None:
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(SETUP), nbformat.v4.new_code_cell(WAIT)]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, str(path))


KERNEL_IDLE = """() => {
    const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;
    const k = w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel;
    return !!k && k.connectionStatus === 'connected' && k.status === 'idle';
}"""


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    base = tmp_path_factory.mktemp("lab")
    root = base / "root"
    root.mkdir()
    _notebook(root / NAME)
    with jupyterlab(base, root, token="mirage-lab-live-test", extensions=WIDGET_EXTENSIONS,
                    env={"OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)},
                    args=["--LabApp.expose_app_in_browser=True"]) as server:
        yield server


@pytest.fixture(scope="module")
def page(lab):
    url = f"{lab['url']}/lab/tree/{NAME}?token={lab['token']}"
    with browser_page(url, viewport={"width": 1440, "height": 1400}) as pg:
        pg.locator(".jp-Notebook .jp-Cell").first.wait_for(timeout=90_000)
        pg.wait_for_function(KERNEL_IDLE, timeout=90_000)
        pg.evaluate("""() => {
            const app = window.jupyterapp;
            if (!app.shell.leftCollapsed) { app.commands.execute('application:toggle-left-area'); }
            app.commands.execute('notebook:run-all-cells');
        }""")
        yield pg


def _shot(page, locator, name):
    locator.scroll_into_view_if_needed()
    locator.screenshot(path=str(ARTIFACTS / name))
    if os.environ.get("MIRAGE_LAB_UPDATE_DOC_IMAGES") == "1":  # a test run leaves the tracked docs alone
        shutil.copyfile(ARTIFACTS / name, REPO / "docs" / "img" / name)


def _wait_output(page):
    return page.locator(".jp-Notebook .jp-CodeCell").nth(1).locator(".jp-OutputArea-output")


def test_row_click_and_stop_work_while_the_next_cell_waits(page):
    ex = page.locator(".mlab-explorer").first
    ex.wait_for(timeout=90_000)
    rows = ex.locator(".mlab-row")
    # Two candidates found; the search still running and cell 2 blocked in wait().
    page.wait_for_function("() => document.querySelectorAll('.mlab-explorer .mlab-row').length >= 2",
                           timeout=120_000)
    assert ex.locator('.mlab-status[data-state="running"]').count() == 1, "the search ended too soon for this test"
    assert _wait_output(page).count() == 0
    # While the widget is live, its saved view (in the same output area) is hidden.
    assert page.locator(".mlab-saved-view").count() == 1 and not page.locator(".mlab-saved-view").is_visible()

    detail = ex.locator(".mlab-detail").first
    page.wait_for_function("(el) => el.textContent.includes('candidate #0 ')", arg=detail.element_handle(),
                           timeout=30_000)
    ex.scroll_into_view_if_needed()
    rows.nth(1).click()                                            # candidate #1 (the order found)
    clicked = time.monotonic()
    page.wait_for_function("(el) => el.textContent.includes('candidate #1 ')", arg=detail.element_handle(),
                           timeout=10_000)
    took_select = time.monotonic() - clicked
    assert _wait_output(page).count() == 0, "wait() ended before the row click was handled"
    assert took_select < 3.0, f"the detail pane followed the click after {took_select:.1f} s"
    ex.locator(".mlab-drawing-pane svg").first.wait_for(state="visible", timeout=20_000)
    _shot(page, ex, "explorer_live_wait.png")

    ex.locator("button", has_text="Stop").click()
    clicked = time.monotonic()
    _wait_output(page).filter(has_text="waited").wait_for(timeout=10_000)
    took_stop = time.monotonic() - clicked
    text = _wait_output(page).first.text_content().split()
    assert text[:3] == ["waited", "True", "stopped"], text
    assert text[-1] == "1"                                         # the click's selection, seen by the kernel
    assert took_stop < 2.0, f"wait() returned {took_stop:.2f} s after Stop"
    ex.locator('.mlab-status[data-state="stopped"]').wait_for(timeout=10_000)


def test_saved_and_reopened_the_notebook_shows_the_saved_view(page, lab):
    page.wait_for_function(KERNEL_IDLE, timeout=60_000)
    # The saved view follows the end of the search (an update in place, from the search's thread).
    page.wait_for_function("""() => { const v = document.querySelector('.mlab-saved-view');
                                    return v && v.querySelector('[data-state="stopped"]'); }""", timeout=20_000)
    page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
    path = lab["root"] / NAME
    deadline = time.monotonic() + 30
    while "mlab-saved-view" not in path.read_text() or '"stopped' not in path.read_text():
        assert time.monotonic() < deadline, "the notebook was not saved with its saved view"
        time.sleep(0.25)
    time.sleep(1.0)  # the save's last write
    saved = json.loads(path.read_text())
    size = path.stat().st_size
    assert size < 400_000, f"the saved notebook is {size} bytes"
    assert "widgets" not in saved["metadata"] or not saved["metadata"]["widgets"]  # no widget state

    page.evaluate("() => window.jupyterapp.shell.currentWidget.sessionContext.shutdown()")
    page.reload(wait_until="domcontentloaded")
    view = page.locator(".mlab-saved-view").first
    view.wait_for(state="visible", timeout=90_000)
    assert "Saved view of the search widget" in view.text_content()
    assert view.locator('[data-state="stopped"]').count() == 1
    assert view.locator("tbody tr").count() >= 2
    assert view.locator("tr.mlab-selected td").first.text_content() == "1"   # the clicked row
    assert view.locator(".mlab-saved-drawing svg").first.is_visible()
    # The progress figure, from plotly's JSON output (no kernel needed to draw it).
    fig = page.locator(".jp-OutputArea-output.jp-RenderedPlotly").first   # plotly's renderer, kernel or not
    fig.wait_for(state="attached", timeout=30_000)
    fig.scroll_into_view_if_needed()  # JupyterLab skips rendering outputs out of view
    fig.locator(".main-svg").first.wait_for(state="visible", timeout=30_000)
    assert "Search progress" in fig.text_content()
    assert not page.get_by_text("Error displaying widget").first.is_visible()
    _shot(page, page.locator(".jp-Notebook .jp-CodeCell").first.locator(".jp-OutputArea"),
          "explorer_saved_view.png")


def test_no_uncaught_errors(page):
    assert page.errors == []
