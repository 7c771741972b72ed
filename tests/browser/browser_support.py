"""What the browser tests share: a JupyterLab server isolated from the user's config, and a
headless Chromium page on it (Playwright). Each test module adds its own notebook and checks.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("MIRAGE_LAB_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = REPO / "test-artifacts"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]


def browser_missing() -> str | None:
    """Why the browser tests cannot run here (no Chromium, no Playwright), or None."""
    if not Path(CHROMIUM).exists():
        return f"no Chromium at {CHROMIUM} (apt-get install chromium, or set MIRAGE_LAB_CHROMIUM)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright Python package is not installed (pip install playwright)"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def jupyterlab(base: Path, root: Path, *, token: str, extensions: Sequence[str],
               env: Mapping[str, str] | None = None, args: Sequence[str] = ()) -> Iterator[dict[str, Any]]:
    """JupyterLab on ``root`` with its config, settings, workspaces and runtime files under ``base``.

    Checks that each of ``extensions`` is enabled, waits until the server answers, yields
    ``{"url", "token", "log", "root"}`` and stops the server afterwards.
    """
    config = base / "config"
    (config / "labconfig").mkdir(parents=True, exist_ok=True)
    # No news pop-up over the notebook.
    (config / "labconfig" / "page_config.json").write_text(
        json.dumps({"disabledExtensions": {"@jupyterlab/apputils-extension:announcements": True}})
    )
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(config), JUPYTERLAB_SETTINGS_DIR=str(base / "settings"),
               JUPYTERLAB_WORKSPACES_DIR=str(base / "ws"), JUPYTER_RUNTIME_DIR=str(base / "runtime"),
               JUPYTER_PLATFORM_DIRS="1", **(env or {}))

    listed = subprocess.run([sys.executable, "-m", "jupyterlab.labextensions", "list"], env=env,
                            capture_output=True, text=True, timeout=120)
    listing = listed.stdout + listed.stderr
    for ext in extensions:
        line = next((ln for ln in listing.splitlines() if ext in ln), "")
        assert "enabled" in line and "OK" in line, f"`jupyter labextension list` does not show {ext} enabled:\n{listing}"

    port = free_port()
    log_path = base / "lab.log"
    log = log_path.open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}", "--ServerApp.ip=127.0.0.1",
         f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}", "--ServerApp.port_retries=0",
         "--allow-root", "--LabApp.extension_manager=readonly", *args,
         "--LabApp.news_url=None", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"],
        env=env, stdout=log, stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"jupyter lab exited early:\n{log_path.read_text()}")
            try:
                with urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"jupyter lab did not start in 90 s:\n{log_path.read_text()}")
            time.sleep(0.5)
        yield {"url": url, "token": token, "log": log_path, "root": root}
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@contextmanager
def browser_page(url: str, **context_kw: Any) -> Iterator[Any]:
    """A headless Chromium page opened at ``url``; its uncaught errors collect in ``page.errors``."""
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        context = browser.new_context(**context_kw)
        pg = context.new_page()
        pg.errors = []  # uncaught page errors, checked at the end
        pg.on("pageerror", lambda e: pg.errors.append(str(e)))
        pg.goto(url, wait_until="domcontentloaded")
        try:
            yield pg
        finally:
            context.close()
            browser.close()
