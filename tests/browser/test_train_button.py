"""The Training curves page's Train button in Chromium (issue 54): Train -> progress -> Stop; the process is gone,
the log ends with whole lines, the page still works; with training off (as `make serve` sets it), no button."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.browser.conftest import ARTIFACTS, browser_page, exception_boxes, open_page, start_server, stop, wait_idle

pytestmark = pytest.mark.browser

SMALL = {"width": 1024, "height": 768}


def _server(checkpoint_folder, log: str, **env: str):
    with pytest.MonkeyPatch.context() as mp:
        for name, value in env.items():
            mp.setenv(name, value)
        return start_server(checkpoint_folder, ARTIFACTS / log)


@pytest.fixture(scope="module")
def training(chromium, checkpoint_folder, tmp_path_factory) -> Iterator:
    runs = tmp_path_factory.mktemp("runs")
    server = _server(checkpoint_folder, "server-issue54.log", ATTENTION_LAB_RUNS=str(runs),
                     ATTENTION_LAB_TRAINING="1")
    server.runs = runs
    try:
        yield server
    finally:
        stop(server.process)


def _job_processes(path: Path) -> list[int]:
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if "core.train.job" in cmdline and str(path) in cmdline:
                found.append(int(pid))
    return found


def test_train_shows_progress_and_stop_ends_the_job(training, browser):
    with browser_page(browser, SMALL) as page:
        open_page(page, training.url + "/curves")
        page.get_by_role("button", name="Train", exact=True).click()
        clicked = time.monotonic()
        page.get_by_text("of 1,500").first.wait_for(timeout=60_000)  # the progress line
        logs = list(training.runs.glob("*.log.jsonl"))
        checkpoint = next(training.runs.glob("*.err")).with_suffix(".safetensors")
        assert _job_processes(checkpoint), "the job runs in a process of its own"
        print(f"first progress after {time.monotonic() - clicked:.1f} s (busy box)")
        deadline = time.monotonic() + 120
        while not logs and time.monotonic() < deadline:
            time.sleep(0.5)
            logs = list(training.runs.glob("*.log.jsonl"))
        assert logs, "the live log is written"
        page.get_by_role("button", name="Stop", exact=True).click()
        asked = time.monotonic()
        while _job_processes(checkpoint) and time.monotonic() - asked < 5:
            time.sleep(0.05)
        assert not _job_processes(checkpoint) and time.monotonic() - asked < 3.0  # 2 s + the click's round trip
        rows = [json.loads(line) for line in logs[0].read_text().splitlines()]  # whole lines only
        assert rows
        page.get_by_text("stopped at step").first.wait_for(timeout=60_000)
        wait_idle(page)
        assert exception_boxes(page) == 0
        assert page.locator('[data-testid="stPlotlyChart"]').count() >= 1, "the curves still draw"


def test_no_train_button_where_training_is_off(chromium, checkpoint_folder, browser):
    server = _server(checkpoint_folder, "server-issue54-off.log", ATTENTION_LAB_TRAINING="0")
    try:
        with browser_page(browser, SMALL) as page:
            open_page(page, server.url + "/curves")
            assert page.get_by_role("button", name="Train", exact=True).count() == 0
            assert page.get_by_role("heading", name="Training curves").count() == 1
    finally:
        stop(server.process)
