"""Uploads stay per session and do not pile up: a session's folder goes with the session, and folders
that a killed server left behind are swept once they are a day old (only ours, never through a link)."""

from __future__ import annotations

import gc
import os
import time

from core.io import uploads


def test_a_session_folder_is_private_and_removed_with_its_session(tmp_path):
    folder = uploads.SessionFolder(tmp_path)
    path = folder.path
    (path / "model.safetensors").write_bytes(b"x")
    assert oct(path.stat().st_mode & 0o777) == "0o700" and path.name.startswith(uploads.SESSION_PREFIX)
    del folder  # Streamlit drops a session's state when the session ends
    gc.collect()
    assert not path.exists()


def test_remove_is_explicit_and_idempotent(tmp_path):
    folder = uploads.SessionFolder(tmp_path)
    folder.remove()
    folder.remove()
    assert not folder.exists


def test_stale_folders_are_swept_and_fresh_ones_kept(tmp_path):
    now = time.time()
    stale, fresh = uploads.SessionFolder(tmp_path), uploads.SessionFolder(tmp_path)
    (stale.path / "old.safetensors").write_bytes(b"x")
    for p in (stale.path / "old.safetensors", stale.path):
        os.utime(p, (now - 2 * uploads.STALE_AFTER_S, now - 2 * uploads.STALE_AFTER_S))
    other = tmp_path / "someone-elses-folder"
    other.mkdir()
    os.utime(other, (now - 10 * uploads.STALE_AFTER_S,) * 2)
    assert uploads.sweep_stale(tmp_path, now=now) == [stale.path]
    assert fresh.exists and other.exists()


def test_a_recent_file_keeps_an_old_folder(tmp_path):
    now = time.time()
    folder = uploads.SessionFolder(tmp_path)
    os.utime(folder.path, (now - 2 * uploads.STALE_AFTER_S,) * 2)
    (folder.path / "just-added.safetensors").write_bytes(b"x")  # touched now
    assert uploads.sweep_stale(tmp_path, now=now) == [] and folder.exists


def test_a_link_named_like_a_session_folder_is_never_followed(tmp_path):
    target = tmp_path / "precious"
    target.mkdir()
    (target / "keep.txt").write_text("keep")
    link = tmp_path / (uploads.SESSION_PREFIX + "evil")
    link.symlink_to(target)
    os.utime(target, (0, 0))
    assert uploads.sweep_stale(tmp_path, older_than_s=0) == []
    assert (target / "keep.txt").read_text() == "keep"


def test_a_touched_folder_is_kept_and_an_untouched_one_swept(tmp_path, monkeypatch):
    """A live session touches its folder every heartbeat; one nothing touched for the grace time (a closed or
    reloaded tab's session, which Streamlit drops without ending it) is swept, whatever its age."""
    monkeypatch.setenv(uploads.GRACE_ENV, "50")
    assert uploads.grace_s() == 50 and uploads.heartbeat_s() == 10
    now = time.time()
    alive, gone = uploads.SessionFolder(tmp_path), uploads.SessionFolder(tmp_path)
    for folder in (alive, gone):
        os.utime(folder.path, (now - 60, now - 60))
    alive.touch()
    assert uploads.sweep_stale(tmp_path) == [gone.path] and alive.exists
    alive.remove()
    alive.touch()  # its session ended meanwhile: nothing to touch, no error
    monkeypatch.setenv(uploads.GRACE_ENV, "soon")
    assert uploads.grace_s() == uploads.STALE_AFTER_S
