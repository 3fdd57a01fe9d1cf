"""Shared by the browser benchmarks and the screenshot tool: Debian Chromium, the app's pages, and
"the page has finished drawing" as the browser sees it."""

from __future__ import annotations

import os
import time

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
APP_PAGES = ("", "attention", "positional", "curves", "probe", "playground", "anatomy", "open_model")

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


def wait_idle(page, timeout_s: float = 60.0, settle_s: float = 0.3) -> None:
    """Until the page is finished twice in a row `settle_s` apart (a rerun may start late)."""
    deadline = time.monotonic() + timeout_s
    while True:
        page.wait_for_function(IDLE_JS, timeout=max(1000, int((deadline - time.monotonic()) * 1000)),
                               polling=20)
        time.sleep(settle_s)
        if page.evaluate(IDLE_JS) or time.monotonic() > deadline:
            return


def open_and_wait(page, url: str, timeout_s: float = 60.0) -> None:
    page.goto(url, wait_until="domcontentloaded", timeout=int(timeout_s * 1000))
    wait_idle(page, timeout_s)
