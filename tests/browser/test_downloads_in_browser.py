"""The probe's "Where from" CSV downloads in a real browser: the files are made when a button is clicked (issue 45:
five tables were built and sent with every new name), two buttons clicked one after the other both download, and a
download reruns nothing (its on_click is "ignore")."""

from __future__ import annotations

import csv
import io
import time

import pytest

from core.io.checkpoint import list_checkpoints
from tests.browser.conftest import VIEWPORT, WAIT_MS, open_page, wait_idle

pytestmark = pytest.mark.browser


def test_where_from_csvs_download_one_after_the_other_without_a_rerun(server, browser, first_visit):
    if not any(i.task == "birthplace" and not i.error for i in list_checkpoints(server.checkpoints)):
        pytest.skip(f"no birthplace checkpoint in {server.checkpoints}")
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
        open_page(page, f"{server.url}/probe?tab=ask&name=Max+Born&wf=1")
        wait_idle(page)
        assert runs, "the page's own run was not seen"
        runs.clear()
        wanted = {"Logit lens (CSV)": "answer probability", "Causal trace (CSV)": "share recovered",
                  "Attribution (CSV)": "", "Input attribution (CSV)": ""}
        for label, column in wanted.items():  # no wait between the clicks
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
