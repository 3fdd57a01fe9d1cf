"""Driving Debian's Chromium against the app, in one place for the browser benchmarks, the screenshot tool and
the browser tests (tests/browser/conftest.py): where Chromium is, how it is launched, and "the page has
finished drawing" as the browser sees it. `playwright install` is never used: Playwright drives the
Chromium at $CHROMIUM (default /usr/bin/chromium, `apt-get install chromium`) by executable_path."""

from __future__ import annotations

import os
import time

# Playwright adds --headless itself; these keep a headless Chromium in a container quiet and offline.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
VIEWPORT = {"width": 1400, "height": 900}

# Finished: the app is mounted, no "Running..." widget, no stale elements of a rerun in progress, no
# skeletons, a page title, and every plotly chart on the page has drawn its main SVG layer.
IDLE_JS = """() => {
    if (!document.querySelector('[data-testid="stApp"]')) return false;
    if (document.querySelector('[data-testid="stStatusWidget"]')) return false;
    if (document.querySelector('[data-stale="true"]')) return false;
    if (document.querySelector('[data-testid="stSkeleton"]')) return false;
    if (!document.querySelector('[data-testid="stMain"] h1')) return false;
    const charts = Array.from(document.querySelectorAll('[data-testid="stPlotlyChart"]'));
    return charts.every(c => c.querySelector('.main-svg'));
}"""
# Every chart's traces (type, name, x, y, z) as one string: compare two to see that a chart changed.
CHARTS_JS = """() => JSON.stringify(Array.from(document.querySelectorAll('.js-plotly-plot')).map(
    g => (g.data || []).map(t => [t.type, t.name, t.x, t.y, t.z])))"""
# The page's full height: Streamlit scrolls inside its main section, so a screenshot grows the viewport to it.
FULL_HEIGHT_JS = """() => Math.max(...['stMain', 'stSidebarContent'].map(id => {
    const e = document.querySelector(`[data-testid="${id}"]`); return e ? e.scrollHeight : 0; }))"""


def chromium_path() -> str:
    return os.environ.get("CHROMIUM", "/usr/bin/chromium")


def launch(playwright):
    """Debian's headless Chromium through a (sync or async) Playwright instance."""
    return playwright.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)


def wait_idle(page, timeout_s: float = 60.0, settle_s: float = 0.3) -> None:
    """Until the page is finished twice in a row `settle_s` apart (a rerun may start late)."""
    deadline = time.monotonic() + timeout_s
    while True:
        page.wait_for_function(IDLE_JS, timeout=max(1000, int((deadline - time.monotonic()) * 1000)),
                               polling=20)
        time.sleep(settle_s)
        if page.evaluate(IDLE_JS) or time.monotonic() > deadline:
            return


def open_and_wait(page, url: str, timeout_s: float = 60.0, settle_s: float = 0.3) -> None:
    page.goto(url, wait_until="domcontentloaded", timeout=int(timeout_s * 1000))
    wait_idle(page, timeout_s, settle_s)


def full_height(page) -> int:
    return int(page.evaluate(FULL_HEIGHT_JS))
