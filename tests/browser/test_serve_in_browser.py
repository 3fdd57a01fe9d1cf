"""Issue 29 in a real browser: a tab served through `make serve`'s HAProxy whose replica is killed comes
back on its view (Streamlit's own frontend reconnects; the URL brings back the sentence, layer and head).
Screenshots before, during and after land in test-artifacts/browser/issue29-*.png."""

from __future__ import annotations

import os
import signal
import time
from urllib.parse import parse_qs, quote_plus, urlparse

import pytest

from serve import proxy
from serve.streamlit_process import read_state, start_serve
from tests.browser.conftest import ARTIFACTS, browser_page, free_port, screenshot, stop, wait_idle

pytestmark = [pytest.mark.browser, pytest.mark.skipif(
    proxy.shutil.which("haproxy", path=proxy.SEARCH_PATH) is None, reason="HAProxy is not installed")]

SMALL = {"width": 1024, "height": 768}
SENTENCE = "Ada Lovelace was born in London ."
DISABLED_JS = "() => { const t = document.querySelector('textarea'); return !t || t.disabled; }"


def replica_cookie(page) -> str | None:
    return next((c["value"] for c in page.context.cookies() if c["name"] == "attention_lab_replica"), None)


def test_a_tab_on_a_killed_replica_comes_back_on_its_view(browser, checkpoint_folder, tmp_path):
    run_dir, port = tmp_path / "run", free_port()
    env = {**os.environ, "ATTENTION_LAB_CHECKPOINTS": str(checkpoint_folder)}
    log = ARTIFACTS / "serve-issue29.log"
    launcher, _ = start_serve(2, port, run_dir, log, env)
    try:
        with browser_page(browser, SMALL) as page:
            page.goto(f"http://127.0.0.1:{port}/attention?text={quote_plus(SENTENCE)}&layer=1&head=1&view=single")
            wait_idle(page)
            before = parse_qs(urlparse(page.url).query)
            screenshot(page, "issue29-before")
            replica = replica_cookie(page)
            replicas = read_state(run_dir)["replicas"]
            killed_pid = next(r["pid"] for r in replicas if r["name"] == replica)
            os.kill(killed_pid, signal.SIGKILL)
            killed = time.monotonic()
            page.wait_for_function(DISABLED_JS, timeout=10_000)  # the frontend saw its connection go
            screenshot(page, "issue29-during")
            page.wait_for_function(f"() => !({DISABLED_JS})()", timeout=10_000)  # connected again
            wait_idle(page)
            assert time.monotonic() - killed < 10
            screenshot(page, "issue29-after")
            now_on = replica_cookie(page)
            assert now_on is not None
            if now_on == replica:  # the launcher restarted it and HAProxy's health checks let it back in first
                assert next(r["pid"] for r in read_state(run_dir)["replicas"] if r["name"] == replica) != killed_pid
            # else: served by the other replica now
            assert page.get_by_label("Sentence", exact=True).input_value() == SENTENCE
            after = parse_qs(urlparse(page.url).query)
            assert {k: after.get(k) for k in ("text", "layer", "head", "view")} == \
                {k: before.get(k) for k in ("text", "layer", "head", "view")}
            assert page.locator(".js-plotly-plot").count() >= 1
            assert page.locator('[data-testid="stException"]').count() == 0
    finally:
        stop(launcher)
    assert launcher.returncode == 0, log.read_text()[-2000:]
