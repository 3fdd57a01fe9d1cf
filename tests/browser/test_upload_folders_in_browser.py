"""An upload's session folder goes with its session in a real server: a reloaded (or closed) tab's session is
dropped by Streamlit after server.disconnectedSessionTTL without being ended, so the lab's sweeper removes a folder
its session stopped touching; an open tab, even idle, keeps touching it (issue 52, item 6: a reloaded session's
folder was still there 17 minutes later)."""

from __future__ import annotations

import time

import pytest

from bench.tiny_checkpoints import save_tiny_checkpoint, tiny_checkpoint_folder
from core.io import uploads
from serve.streamlit_process import start_healthy, stop_process
from tests.browser.conftest import ARTIFACTS, VIEWPORT, browser_page, open_page, wait_idle

pytestmark = pytest.mark.browser
GRACE_S = 8  # a folder nothing touched this long is swept (5 minutes when served); heartbeats every 1.6 s


def session_folders(root) -> list:
    return sorted(root.glob(uploads.SESSION_PREFIX + "*"))


def test_a_reloaded_sessions_upload_folder_is_removed_soon_after_its_reconnect_time(browser, tmp_path):
    temp = tmp_path / "tmp"
    temp.mkdir()
    server = start_healthy(ARTIFACTS / "upload-folders-server.log",
                           extra_env={"ATTENTION_LAB_CHECKPOINTS": str(tiny_checkpoint_folder(tmp_path / "ckpts")),
                                      "TMPDIR": str(temp), uploads.GRACE_ENV: str(GRACE_S)})
    try:
        upload = save_tiny_checkpoint(tmp_path / "mine.safetensors", "lm")
        with browser_page(browser, VIEWPORT) as tab:
            open_page(tab, server.url + "/open_model")
            tab.get_by_role("tab", name="Attention Lab checkpoint").click()
            wait_idle(tab)
            tab.locator('.st-key-upload_checkpoint input[type="file"]').set_input_files(str(upload))
            button = tab.get_by_role("button", name="Add to the picker")
            button.wait_for()
            tab.wait_for_function("() => !document.evaluate(\"//button[normalize-space()='Add to the picker']\","
                                  " document, null, 9, null).singleNodeValue.disabled")
            button.click()
            wait_idle(tab)
            started = time.monotonic()
            while not session_folders(temp) and time.monotonic() - started < 10:
                time.sleep(0.1)
            assert session_folders(temp), tab.locator('[data-testid="stMain"]').inner_text()[:800]
            (folder,) = session_folders(temp)
            assert (folder / "mine.safetensors").is_file()
            time.sleep(1.5 * GRACE_S)  # an open tab, idle: its heartbeat keeps the folder
            assert (folder / "mine.safetensors").is_file()
            started = time.monotonic()
            tab.reload()  # a new session; the old one is disconnected, never ended (without the janitor its
            wait_idle(tab)  # folder was still there after these 30 s: measured with the janitor's timer off)
            while folder.exists() and time.monotonic() - started < 4 * GRACE_S:
                time.sleep(0.25)
            gone_after = time.monotonic() - started
            assert not folder.exists(), "the reloaded session's upload folder is still there"
            assert gone_after >= GRACE_S - 2 * GRACE_S / 5  # not before its grace time (from its last heartbeat)
            print(f"removed {gone_after:.1f} s after the reload (grace {GRACE_S} s)")
    finally:
        stop_process(server.process)
