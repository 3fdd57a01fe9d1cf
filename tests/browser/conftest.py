"""One `streamlit run app.py` server and one headless Debian Chromium for the whole test session.

The server listens on 127.0.0.1 on a free port, reads ATTENTION_LAB_CHECKPOINTS = the bundled
checkpoints/ when it holds readable checkpoints (ATTENTION_LAB_BROWSER_FIXTURES=1 forces the fixtures),
else tiny random ones built here (one per task), and is killed with
its whole process group at the end (serve/streamlit_process.py). Chromium is Debian's (`apt-get install
chromium`), driven by Playwright's sync API as the benchmarks drive it (bench/browser_driver.py);
`playwright install` is never used. Outside CI these tests skip when no Chromium is found; with CI=true a
missing Chromium is a failure.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from bench import browser_driver
from bench.browser_driver import CHARTS_JS, CHROMIUM_ARGS, IDLE_JS, VIEWPORT, chromium_path
from bench.tiny_checkpoints import bundled_has_checkpoints, tiny_checkpoint_folder
from serve.streamlit_process import StreamlitServer, free_port, start_healthy
from serve.streamlit_process import stop_process as stop
from tests.conftest import ROOT

__all__ = ["CHARTS_JS", "CHROMIUM_ARGS", "IDLE_JS", "VIEWPORT", "bundled_has_checkpoints", "chromium_path", "free_port",
           "stop"]
ARTIFACTS = ROOT / "test-artifacts" / "browser"
WAIT_MS = 60_000  # a loaded 2-core box: generous


def require_chromium() -> str:
    path = chromium_path()
    if os.path.isfile(path) and os.access(path, os.X_OK):
        return path
    message = (f"no Chromium at {path} (apt-get install chromium, or set CHROMIUM); "
               "never `playwright install`")
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true but {message}")
    pytest.skip(message)


@dataclass
class Server(StreamlitServer):
    """A test server (url, process, log, log_tail()) and the checkpoints folder it reads."""

    checkpoints: Path = ROOT / "checkpoints"


def start_server(checkpoints: Path, log: Path, root: Path = ROOT) -> Server:
    """`streamlit run app.py` of the tree at `root` (default this one) on a free loopback port, healthy."""
    # the Edit tab's key statistics beside the log, not in the user's cache folder (core.lens.edit.key_statistics)
    started = start_healthy(log, root=root, extra_env={"ATTENTION_LAB_CHECKPOINTS": str(checkpoints),
                                                       "ATTENTION_LAB_EDIT_CACHE": str(log.parent / "edit-cache")})
    return Server(started.url, started.process, log, checkpoints)


# --------------------------------------------------------------------------- page helpers

TRACES_JS = """() => Array.from(document.querySelectorAll('.js-plotly-plot')).map(
    g => (g.data || []).map(t => t.name || ''))"""


def wait_idle(page, timeout_ms: int = WAIT_MS, settle_s: float = 0.7) -> None:
    """Until no script run is in progress and every chart has drawn, twice in a row `settle_s` apart."""
    browser_driver.wait_idle(page, timeout_ms / 1000, settle_s)


def open_page(page, url: str) -> None:
    browser_driver.open_and_wait(page, url, WAIT_MS / 1000, settle_s=0.7)


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
    height = browser_driver.full_height(page)
    page.set_viewport_size({"width": VIEWPORT["width"], "height": min(max(height + 40, 900), 12_000)})
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
    return tiny_checkpoint_folder(tmp_path_factory.mktemp("browser") / "ckpts")


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
