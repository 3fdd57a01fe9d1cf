"""One `streamlit run app.py` server and one headless Debian Chromium for the whole test session.

The server listens on 127.0.0.1 on a free port, reads ATTENTION_LAB_CHECKPOINTS = the bundled
checkpoints/ when it holds readable checkpoints (ATTENTION_LAB_BROWSER_FIXTURES=1 forces the fixtures),
else tiny random ones built here (one per task), and is killed with
its whole process group at the end. Chromium is Debian's (`apt-get install chromium`), driven by
Playwright's sync API; `playwright install` is never used. Outside CI these tests skip when no
Chromium is found; with CI=true a missing Chromium is a failure.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import ROOT, save_tiny_checkpoint

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
ARTIFACTS = ROOT / "test-artifacts" / "browser"
WAIT_MS = 60_000  # a loaded 2-core box: generous
VIEWPORT = {"width": 1400, "height": 900}


def chromium_path() -> str:
    return os.environ.get("CHROMIUM", "/usr/bin/chromium")


def require_chromium() -> str:
    path = chromium_path()
    if os.path.isfile(path) and os.access(path, os.X_OK):
        return path
    message = (f"no Chromium at {path} (apt-get install chromium, or set CHROMIUM); "
               "never `playwright install`")
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true but {message}")
    pytest.skip(message)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def bundled_has_checkpoints() -> bool:
    from core.io.checkpoint import DEFAULT_DIR, list_checkpoints

    return any(info.error is None for info in list_checkpoints(DEFAULT_DIR))


@dataclass
class Server:
    url: str
    process: subprocess.Popen
    checkpoints: Path
    log: Path

    def log_tail(self, chars: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else ""


def wait_healthy(url: str, process: subprocess.Popen, log: Path, timeout_s: float = 90) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"streamlit exited with {process.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=5) as response:
                if response.status == 200 and response.read().strip() == b"ok":
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"streamlit was not healthy after {timeout_s:.0f} s:\n{log.read_text()[-3000:]}")


def stop(process: subprocess.Popen) -> None:
    """SIGTERM to the server's process group, SIGKILL if it lingers."""
    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=15)
    except ProcessLookupError:
        pass


def start_server(checkpoints: Path, log: Path, root: Path = ROOT) -> Server:
    """`streamlit run app.py` of the tree at `root` (default this one) on a free loopback port, healthy."""
    port = free_port()
    env = {**os.environ, "ATTENTION_LAB_CHECKPOINTS": str(checkpoints), "PYTHONUNBUFFERED": "1"}
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true",
             "--server.port", str(port), "--server.address", "127.0.0.1"],
            cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    server = Server(f"http://127.0.0.1:{port}", process, checkpoints, log)
    try:
        wait_healthy(server.url, process, log)
    except BaseException:
        stop(process)
        raise
    return server


# --------------------------------------------------------------------------- page helpers

IDLE_JS = """() => {
    if (!document.querySelector('[data-testid="stApp"]')) return false;
    if (document.querySelector('[data-testid="stStatusWidget"]')) return false;  // "Running..."
    if (document.querySelector('[data-stale="true"]')) return false;  // elements of a rerun in progress
    if (document.querySelector('[data-testid="stSkeleton"]')) return false;
    return !!document.querySelector('[data-testid="stMain"] h1');
}"""
CHARTS_JS = """() => JSON.stringify(Array.from(document.querySelectorAll('.js-plotly-plot')).map(
    g => (g.data || []).map(t => [t.type, t.name, t.x, t.y, t.z])))"""
TRACES_JS = """() => Array.from(document.querySelectorAll('.js-plotly-plot')).map(
    g => (g.data || []).map(t => t.name || ''))"""


def wait_idle(page, timeout_ms: int = WAIT_MS, settle_s: float = 0.7) -> None:
    """Until no script run is in progress, twice in a row `settle_s` apart (a rerun may start late)."""
    deadline = time.monotonic() + timeout_ms / 1000
    while True:
        page.wait_for_function(IDLE_JS, timeout=max(1000, int((deadline - time.monotonic()) * 1000)))
        time.sleep(settle_s)
        if page.evaluate(IDLE_JS) or time.monotonic() > deadline:
            return


def open_page(page, url: str) -> None:
    page.goto(url, wait_until="domcontentloaded", timeout=WAIT_MS)
    wait_idle(page)


def nav_labels(page) -> list[str]:
    """The sidebar navigation's visible labels (icons' ligature names removed)."""
    labels = page.eval_on_selector_all('[data-testid="stSidebarNav"] a',
                                       "els => els.map(e => e.innerText.split('\\n').filter(Boolean).pop())")
    return [label.strip() for label in labels]


def charts_data(page) -> str:
    return page.evaluate(CHARTS_JS)


def trace_names(page) -> list[list[str]]:
    return page.evaluate(TRACES_JS)


def exception_boxes(page) -> int:
    return page.locator('[data-testid="stException"]').count()


def screenshot(page, name: str) -> Path:
    """The whole page: Streamlit scrolls inside its main section, so grow the viewport to fit it."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    height = page.evaluate("""() => Math.max(...['stMain', 'stSidebarContent'].map(id => {
        const e = document.querySelector(`[data-testid="${id}"]`); return e ? e.scrollHeight : 0; }))""")
    page.set_viewport_size({"width": VIEWPORT["width"], "height": min(max(int(height) + 40, 900), 12_000)})
    time.sleep(1.0)  # plotly charts re-lay themselves out to the new size
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    page.set_viewport_size(VIEWPORT)
    return path


@pytest.fixture(scope="session")
def chromium() -> str:
    return require_chromium()


@pytest.fixture(scope="session")
def checkpoint_folder(tmp_path_factory) -> Path:
    from core.io.checkpoint import DEFAULT_DIR

    if os.environ.get("ATTENTION_LAB_BROWSER_FIXTURES") != "1" and bundled_has_checkpoints():
        return DEFAULT_DIR
    folder = tmp_path_factory.mktemp("browser") / "ckpts"
    for name, task in (("tiny-lm", "lm"), ("tiny-birthplace", "birthplace"), ("tiny-classifier", "classify")):
        save_tiny_checkpoint(folder / f"{name}.safetensors", task)
    return folder


@pytest.fixture(scope="session")
def server(chromium, checkpoint_folder) -> Iterator[Server]:
    running = start_server(checkpoint_folder, ARTIFACTS / "server.log")
    try:
        yield running
    finally:
        stop(running.process)


@pytest.fixture(scope="session")
def browser(chromium) -> Iterator:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture(scope="session")
def first_visit(server, browser) -> dict[str, list[str]]:
    """What the very first visitor of a fresh server sees when arriving by a shared deep link (before
    anyone opened "/"): the sidebar navigation's labels. Recorded before any other page is opened."""
    context = browser.new_context(viewport=VIEWPORT)
    try:
        page = context.new_page()
        open_page(page, server.url + "/attention")
        return {"labels": nav_labels(page)}
    finally:
        context.close()


@contextmanager
def browser_page(browser, viewport: dict) -> Iterator:
    """A fresh page in its own context (no shared cookies or storage), closed afterwards."""
    context = browser.new_context(viewport=viewport)
    context.set_default_timeout(WAIT_MS)
    try:
        yield context.new_page()
    finally:
        context.close()


@pytest.fixture
def page(server, browser, first_visit) -> Iterator:
    with browser_page(browser, VIEWPORT) as fresh:
        yield fresh
