"""The URL codec for the model, the probe and the curves (core.urlstate), and the allowed-folder rule
(core.io.folders, core.io.uploads.destination_folder): traversal, symlink escapes and the default of none."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from core import urlstate
from core.io import folders, uploads
from tests.conftest import ROOT

# --- URL codec ------------------------------------------------------------------------------------


def test_model_round_trips_and_bad_values_are_ignored():
    assert urlstate.decode_model(urlstate.encode_model("lm-rope")) == "lm-rope"
    assert urlstate.decode_model({"model": ["old", "new"]}) == "new"  # repeated keys: the last
    assert urlstate.decode_model({}) is None and urlstate.decode_model({"model": "  "}) is None
    assert len(urlstate.decode_model({"model": "x" * 5000})) == urlstate.MAX_MODEL_NAME


@pytest.mark.parametrize("state", [
    urlstate.ProbePageState(),
    urlstate.ProbePageState(tab="ask", name="Where was Zoë <b>&amp; born?", focus="birth-vanilla"),
    urlstate.ProbePageState(tab="fabricate", focus="birth, synth"),
    urlstate.ProbePageState(tab="dev"),
])
def test_probe_state_round_trips(state):
    params = urlstate.encode_probe(state)
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in params.items())
    assert urlstate.decode_probe(params) == state


def test_probe_state_drops_the_name_off_the_ask_tab_and_survives_bad_links():
    assert "name" not in urlstate.encode_probe(urlstate.ProbePageState(tab="dev", name="Ada"))
    bad = urlstate.decode_probe({"tab": "../../etc", "name": "", "focus": ["", "m"]})
    assert bad == urlstate.ProbePageState(tab="ask", name=None, focus="m")
    assert urlstate.decode_probe({"tab": " DEV "}).tab_label == "Dev set"
    assert len(urlstate.decode_probe({"name": "y" * 9000}).name) == urlstate.MAX_PROBE_TEXT
    assert [urlstate.probe_tab(label) for label in ("Ask", "Fabricate", "Dev set", "nope", None)] == \
        ["ask", "fabricate", "dev", "ask", "ask"]


# --- allowed folders ----------------------------------------------------------------------------------


@pytest.fixture
def tree(tmp_path) -> dict[str, Path]:
    allowed = tmp_path / "class"
    (allowed / "models" / "week1").mkdir(parents=True)
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "keys.txt").write_text("do not read")
    (allowed / "escape").symlink_to(secret, target_is_directory=True)
    (allowed / "inside-link").symlink_to(allowed / "models", target_is_directory=True)
    (allowed / "models" / "leak.log.jsonl").symlink_to(secret / "keys.txt")
    (allowed / "notes.txt").write_text("a file")
    return {"allowed": allowed.resolve(), "secret": secret.resolve(), "root": tmp_path.resolve()}


def test_no_folder_is_reachable_unless_the_operator_allows_some(tree, monkeypatch):
    monkeypatch.delenv(folders.ALLOWED_DIRS_ENV, raising=False)
    assert folders.allowed_dirs() == []
    for text in (str(tree["allowed"]), "/", "/tmp", str(ROOT)):
        with pytest.raises(folders.FolderError, match=folders.ALLOWED_DIRS_ENV):
            folders.resolve_allowed(text, folders.allowed_dirs())


def test_allowed_dirs_are_read_from_the_environment(tree):
    env = {folders.ALLOWED_DIRS_ENV: os.pathsep.join([str(tree["allowed"]), "", "/no/such/dir",
                                                       str(tree["allowed"] / "notes.txt"), str(tree["allowed"])])}
    assert folders.allowed_dirs(env) == [tree["allowed"]]  # missing, empty, file and repeated entries dropped


def test_folders_inside_are_accepted(tree):
    allowed = [tree["allowed"]]
    assert folders.resolve_allowed(str(tree["allowed"]), allowed) == tree["allowed"]
    assert folders.resolve_allowed(f"  {tree['allowed']}/models/week1/ ", allowed) == \
        tree["allowed"] / "models" / "week1"
    assert folders.resolve_allowed("models", allowed) == tree["allowed"] / "models"  # relative: inside the first
    assert folders.resolve_allowed(str(tree["allowed"] / "inside-link"), allowed) == tree["allowed"] / "models"


@pytest.mark.parametrize("typed, words", [
    ("{allowed}/../secret", "'..'"),
    ("{allowed}/models/../../secret", "'..'"),
    ("../secret", "'..'"),
    ("..", "'..'"),
    ("{allowed}/escape", "outside the folders"),  # a symlink inside that leads out
    ("{allowed}/escape/", "outside the folders"),
    ("{secret}", "outside the folders"),
    ("/", "outside the folders"),
    ("/etc", "outside the folders"),
    ("{root}", "outside the folders"),  # the allowed folder's parent
    ("~", "full path"),
    ("~root/.ssh", "full path"),
    ("{allowed}/nope", "does not exist"),
    ("{allowed}/notes.txt", "is a file"),
    ("{allowed}/models\x00/etc", "not a folder path"),
    ("", "Type the path"),
])
def test_traversal_and_escapes_are_refused_with_one_sentence(tree, typed, words):
    text = typed.format(**tree)
    with pytest.raises(folders.FolderError, match=words) as refused:
        folders.resolve_allowed(text, [tree["allowed"]])
    message = str(refused.value)
    assert message.endswith(".") and "\n" not in message and "do not read" not in message


def test_files_listed_in_an_allowed_folder_must_stay_inside(tree):
    allowed = [tree["allowed"]]
    assert folders.inside_allowed(tree["allowed"] / "notes.txt", allowed)
    assert not folders.inside_allowed(tree["allowed"] / "models" / "leak.log.jsonl", allowed)
    assert not folders.inside_allowed(tree["allowed"] / "gone.txt", allowed)


def test_uploads_write_only_into_allowed_folders(tree, monkeypatch):
    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(tree["allowed"] / "models" / "week1"))
    session = tree["root"] / "session"
    assert uploads.destination_folder("", lambda: session) == session
    assert uploads.destination_folder("", lambda: session, [tree["allowed"]]) == session
    with pytest.raises(uploads.UploadError, match=folders.ALLOWED_DIRS_ENV):
        uploads.destination_folder(str(tree["allowed"]), lambda: session)
    assert uploads.destination_folder(str(tree["allowed"]), lambda: session, [tree["allowed"]]) == tree["allowed"]
    for bad, words in [(f"{tree['allowed']}/../secret", "'..'"), (f"{tree['allowed']}/escape", "outside"),
                       (f"{tree['allowed']}/models/week1", "bundled checkpoints folder"),
                       (str(ROOT / "checkpoints"), "outside")]:
        with pytest.raises(uploads.UploadError, match=words):
            uploads.destination_folder(bad, lambda: session, [tree["allowed"]])
