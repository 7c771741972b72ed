"""The quickstart notebook in a real JupyterLab, run top to bottom in headless Chromium.

The test starts JupyterLab (with a Python kernel from this environment) on a copy of
notebooks/00_quickstart.ipynb, runs all cells, and checks what a person would see: the search
widget rendered by the ipywidgets front end, the search finished with candidates in the table,
a candidate selected with its drawing shown, the progress plot (plotly's FigureWidget through
anywidget) drawn; then it clicks another row and the level switch and checks that the detail
pane follows. Screenshots go to test-artifacts/; the widget's goes to docs/img/ for the README.

The JupyterLab start-up follows tests/browser/test_extension_inspector.py.
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

REPO = Path(__file__).resolve().parents[2]
NOTEBOOK = REPO / "notebooks" / "00_quickstart.ipynb"
CHROMIUM = os.environ.get("MIRAGE_LAB_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = REPO / "test-artifacts"
DOC_SHOT = REPO / "docs" / "img" / "quickstart_widget.png"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
WIDGET_EXTENSIONS = ("@jupyter-widgets/jupyterlab-manager", "anywidget")


def _requirements() -> str | None:
    if not Path(CHROMIUM).exists():
        return f"no Chromium at {CHROMIUM} (apt-get install chromium, or set MIRAGE_LAB_CHROMIUM)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright Python package is not installed (pip install playwright)"
    if shutil.which("dot") is None:
        return "Graphviz's dot is not installed (apt-get install graphviz): the widget's drawing needs it"
    return None


_missing = _requirements()
if _missing:
    pytestmark.append(pytest.mark.skip(reason=_missing))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """JupyterLab on a copy of the quickstart, isolated from the user's config; the app exposed to tests."""
    base = tmp_path_factory.mktemp("lab")
    root, config = base / "root", base / "config"
    for d in (root, config / "labconfig"):
        d.mkdir(parents=True)
    (config / "labconfig" / "page_config.json").write_text(
        json.dumps({"disabledExtensions": {"@jupyterlab/apputils-extension:announcements": True}})
    )
    shutil.copyfile(NOTEBOOK, root / NOTEBOOK.name)
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(config), JUPYTERLAB_SETTINGS_DIR=str(base / "settings"),
               JUPYTERLAB_WORKSPACES_DIR=str(base / "ws"), JUPYTER_RUNTIME_DIR=str(base / "runtime"),
               JUPYTER_PLATFORM_DIRS="1", OMP_NUM_THREADS="1", PYTHONPATH=str(REPO))

    listed = subprocess.run([sys.executable, "-m", "jupyterlab.labextensions", "list"], env=env,
                            capture_output=True, text=True, timeout=120)
    listing = listed.stdout + listed.stderr
    for ext in WIDGET_EXTENSIONS:
        line = next((ln for ln in listing.splitlines() if ext in ln), "")
        assert "enabled" in line and "OK" in line, f"{ext} is not enabled in JupyterLab:\n{listing}"

    port, token = _free_port(), "mirage-lab-quickstart-test"
    log = (base / "lab.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}", "--ServerApp.ip=127.0.0.1",
         f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}", "--ServerApp.port_retries=0",
         "--allow-root", "--LabApp.extension_manager=readonly", "--LabApp.expose_app_in_browser=True",
         "--LabApp.news_url=None", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"],
        env=env, stdout=log, stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"jupyter lab exited early:\n{(base / 'lab.log').read_text()}")
            try:
                with urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"jupyter lab did not start in 90 s:\n{(base / 'lab.log').read_text()}")
            time.sleep(0.5)
        yield {"url": url, "token": token, "log": base / "lab.log", "root": root}
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@pytest.fixture(scope="module")
def page(lab):
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": 1440, "height": 1500})  # the whole widget in view
        pg = context.new_page()
        pg.errors = []
        pg.on("pageerror", lambda e: pg.errors.append(str(e)))
        pg.goto(f"{lab['url']}/lab/tree/{NOTEBOOK.name}?token={lab['token']}", wait_until="domcontentloaded")
        pg.locator(".jp-Notebook .jp-Cell").first.wait_for(timeout=90_000)
        # Wait for the kernel, then run every cell as Run > Run All Cells does.
        pg.wait_for_function("""() => {
            const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;
            const k = w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel;
            return !!k && k.connectionStatus === 'connected' && k.status === 'idle';
        }""", timeout=90_000)
        # More room for the notebook: fold the file browser, as a user would.
        pg.evaluate("""() => {
            const app = window.jupyterapp;
            if (!app.shell.leftCollapsed) { app.commands.execute('application:toggle-left-area'); }
            app.commands.execute('notebook:run-all-cells');
        }""")
        yield pg
        context.close()
        browser.close()


def _explorer(page):
    return page.locator(".mlab-explorer").first


def test_notebook_runs_and_the_widget_shows_a_selected_candidate(page):
    ex = _explorer(page)
    ex.wait_for(timeout=90_000)
    # The search ends (the widget's status), and the notebook's last cell prints.
    end = ex.locator('.mlab-status[data-state="finished"], .mlab-status[data-state="error"], '
                     '.mlab-status[data-state="stopped"]')
    end.wait_for(state="attached", timeout=180_000)
    assert end.get_attribute("data-state") == "finished", end.text_content()
    last = page.locator(".jp-Notebook .jp-CodeCell").last.locator(".jp-OutputArea-output")
    last.filter(has_text="No GPU here").wait_for(state="attached", timeout=120_000)
    errors = page.locator('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.error"]')
    assert errors.count() == 0, errors.first.inner_text()

    # JupyterLab skips rendering cells out of view (content-visibility): bring the widget into view.
    ex.scroll_into_view_if_needed()
    rows = ex.locator(".mlab-row")
    assert rows.count() >= 2
    stats = ex.locator(".mlab-stat")
    assert stats.count() >= 8 and int(ex.locator('[data-stat="states"]').text_content()[len("states"):]
                                      .replace(",", "")) > 0
    # select_best() in the notebook selected a candidate; its drawing and code are shown.
    title = ex.locator(".mlab-detail").first.text_content()
    assert "candidate #" in title and "grid" in title
    drawing = ex.locator(".mlab-drawing-pane svg.mlab-drawing")
    drawing.wait_for(state="visible", timeout=30_000)
    assert drawing.bounding_box()["width"] > 100
    assert "equivalent" in ex.locator(".mlab-detail").first.text_content()
    # The progress plot is a live plotly figure (FigureWidget through anywidget).
    ex.locator(".js-plotly-plot").first.wait_for(state="visible", timeout=30_000)
    page.screenshot(path=str(ARTIFACTS / "quickstart_notebook.png"))


def test_clicking_a_row_the_level_switch_and_export(page, lab):
    ex = _explorer(page)
    ex.scroll_into_view_if_needed()
    rows = ex.locator(".mlab-row")
    before = ex.locator(".mlab-detail").first.text_content()
    # A candidate with a for-loop (accumulators, divide after the loop) draws the richer block graph.
    texts = [rows.nth(i).text_content().replace("\u00a0", " ").split() for i in range(rows.count())]
    pick = next((t for t in texts if t[4] == "4"), texts[-1])
    rows.nth(texts.index(pick)).click()
    detail = ex.locator(".mlab-detail").first
    page.wait_for_function("([el, idx]) => el.textContent.includes('candidate #' + idx + ' ')",
                           arg=[detail.element_handle(), pick[0]], timeout=20_000)
    assert detail.text_content() != before
    svg = ex.locator(".mlab-drawing-pane svg.mlab-drawing")
    svg.wait_for(state="visible")
    block_svg = svg.inner_html()
    assert "accum" in block_svg
    pane = ex.locator(".mlab-drawing-pane").element_handle()  # persists; its content is replaced
    ex.locator(".mlab-detail .widget-toggle-button", has_text="kernel").click()
    page.wait_for_function("(el) => !el.innerHTML.includes('accum')", arg=pane, timeout=20_000)
    assert "customized" in ex.locator(".mlab-drawing-pane svg.mlab-drawing").inner_html()
    ex.locator(".mlab-detail .widget-toggle-button", has_text="block").click()
    page.wait_for_function("(el) => el.innerHTML.includes('accum')", arg=pane, timeout=20_000)
    page.locator(".mlab-detail").first.locator("text=✓ equivalent").wait_for(timeout=60_000)
    # Export writes the selected candidate next to the notebook (the kernel's working directory).
    ex.locator("button", has_text="Export").click()
    ex.locator("text=✓ wrote").wait_for(timeout=30_000)
    written = lab["root"] / f"mirage_candidate_{pick[0]}_"
    assert [p for p in lab["root"].glob(written.name + "*.py") if "def forward(" in p.read_text()]

    ex.scroll_into_view_if_needed()
    ex.screenshot(path=str(ARTIFACTS / "quickstart_widget.png"))
    if DOC_SHOT.parent.is_dir():
        shutil.copyfile(ARTIFACTS / "quickstart_widget.png", DOC_SHOT)


def test_no_uncaught_errors(page):
    assert page.errors == []
