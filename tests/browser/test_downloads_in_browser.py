"""Downloads in a real browser (issue 45): the files are made when a button is clicked (the probe's "Where from"
built and sent five tables with every new name; the Errors page wrote every piece of a language model's file on
every run), buttons clicked one after the other all download, and a download reruns nothing (on_click="ignore":
with the file made on the click, a second button clicked during the first click's rerun never downloaded)."""

from __future__ import annotations

import csv
import io
import time

import pytest

from core.io.checkpoint import list_checkpoints
from tests.browser.conftest import VIEWPORT, WAIT_MS, open_page, wait_idle

pytestmark = pytest.mark.browser


def download_without_reruns(browser, url: str, wanted: dict[str, str]) -> None:
    """Click each button of `wanted` (label -> a column its CSV has, or '') with no wait between the clicks."""
    context = browser.new_context(viewport=VIEWPORT, accept_downloads=True)
    context.set_default_timeout(WAIT_MS)
    try:
        page = context.new_page()
        runs: list[str] = []  # the reruns the page asks the server for

        def sent(payload) -> None:
            from streamlit.proto.BackMsg_pb2 import BackMsg

            message = BackMsg()
            if isinstance(payload, bytes):
                message.ParseFromString(payload)
                if message.WhichOneof("type") == "rerun_script":
                    runs.append("rerun")

        page.on("websocket", lambda ws: ws.on("framesent", sent))
        open_page(page, url)
        wait_idle(page)
        assert runs, "the page's own run was not seen"
        runs.clear()
        for label, column in wanted.items():
            with page.expect_download() as download:
                page.get_by_role("button", name=label, exact=True).click()
            text = open(download.value.path(), encoding="utf-8").read()
            rows = list(csv.DictReader(io.StringIO(text)))
            assert rows, label
            assert column in rows[0] if column else len(rows[0]) > 1, (label, list(rows[0]))
        time.sleep(0.5)
        assert not runs, f"{len(runs)} reruns asked for: a download reran the page"
    finally:
        context.close()


def first_of(server, task: str, preferred: str) -> str:
    names = [i.name for i in list_checkpoints(server.checkpoints) if i.task == task and not i.error]
    if not names:
        pytest.skip(f"no {task} checkpoint in {server.checkpoints}")
    return preferred if preferred in names else names[0]


def test_where_from_csvs_download_one_after_the_other_without_a_rerun(server, browser, first_visit):
    first_of(server, "birthplace", "birth-vanilla-pretrained")
    download_without_reruns(browser, f"{server.url}/probe?tab=ask&name=Max+Born&wf=1",
                            {"Logit lens (CSV)": "answer probability", "Causal trace (CSV)": "share recovered",
                             "Attribution (CSV)": "", "Input attribution (CSV)": ""})


def test_error_tables_download_one_after_the_other_without_a_rerun(server, browser, first_visit):
    model = first_of(server, "classify", "names-pretrained")
    download_without_reruns(browser, f"{server.url}/errors?model={model}",
                            {"These rows (CSV)": "example", "Every example (CSV)": "example"})
