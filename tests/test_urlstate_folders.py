"""Page state in the URL (ui/page_state.py): the model, the probe, every page's
declaration, old links; and the allowed-folder rule
(core.io.folders, core.io.uploads.destination_folder): traversal, symlink escapes and the default of none."""

from __future__ import annotations

import os
from dataclasses import fields
from pathlib import Path

import pytest

from core.io import folders, uploads
from core.lens.probe.questions import MAX_INPUT_CHARS
from tests.conftest import ROOT
from ui.page_state import (
    MAX_MODEL_NAME,
    AttentionState,
    CurvesState,
    PositionalState,
    ProbeState,
    WhereFromState,
    from_url,
    model_from_url,
    model_to_url,
    to_url,
)

# --- URL codec ------------------------------------------------------------------------------------


def test_model_round_trips_and_bad_values_are_ignored():
    assert model_from_url(model_to_url("lm-rope")) == "lm-rope"
    assert model_from_url({"model": ["old", "new"]}) == "new"  # repeated keys: the last
    assert model_from_url({}) is None and model_from_url({"model": "  "}) is None
    assert len(model_from_url({"model": "x" * 5000})) == MAX_MODEL_NAME


@pytest.mark.parametrize("state", [
    ProbeState(),
    ProbeState(tab="ask", name="Where was Zoë <b>&amp; born?", focus="birth-vanilla"),
    ProbeState(tab="fabricate", focus="birth, synth"),
    ProbeState(tab="dev"),
])
def test_probe_state_round_trips(state):
    params = to_url(state)
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in params.items())
    assert from_url(ProbeState, params)[0] == state


def test_probe_state_survives_bad_links():
    bad = from_url(ProbeState, {"tab": "../../etc", "name": "", "focus": ["", "m"]})[0]
    assert bad == ProbeState(tab="ask", name=None, focus="m")
    assert from_url(ProbeState, {"tab": " DEV "})[0].tab == "dev"
    assert len(from_url(ProbeState, {"name": "y" * 9000})[0].name) == MAX_INPUT_CHARS


# --- one declaration per page: the generic codec ---------------------------------------------------


@pytest.mark.parametrize("cls", [AttentionState, ProbeState, CurvesState, PositionalState, WhereFromState])
def test_every_page_state_declares_each_field_once_and_round_trips_its_defaults(cls):
    keys = [f.metadata["url"] for f in fields(cls)]
    assert len(keys) == len(set(keys)) == len(fields(cls))  # every field has its own URL key
    widgets = [f.metadata["widget"] for f in fields(cls) if f.metadata["widget"]]
    assert len(widgets) == len(set(widgets))
    assert from_url(cls, to_url(cls())) == (cls(), [])
    assert from_url(cls, {key: "\x00<script>" for key in keys})[0].__class__ is cls  # never raises


def test_no_two_states_share_a_url_key():
    """The "Where from" view's keys sit in the probe's and the attention page's URLs: every key is one field's."""
    keys = [f.metadata["url"] for cls in (AttentionState, ProbeState, CurvesState, PositionalState, WhereFromState)
            for f in fields(cls)]
    assert len(keys) == len(set(keys))


def test_old_links_decode_as_they_did():
    """Links written by the four codecs this replaced (issue 37) open the same state."""
    attention = from_url(AttentionState, {"text": "Ada was born in", "layer": "1", "head": "2", "view": "qk",
                                          "vs": "lm-rope", "hidefirst": "1", "window": "10-40", "step": "640"})[0]
    assert attention == AttentionState(text="Ada was born in", layer=1, head=2, view="qk", compare="lm-rope",
                                       hide_first=True, window=(10, 40), step=640)
    positional = from_url(PositionalState, {"pos_section": "rope", "pos_length": "128", "pos_train": "1",
                                            "pos_layer": "64"})[0]
    assert (positional.section, positional.length, positional.train, positional.layer) == ("rope", 128, True, 0)
    assert from_url(CurvesState, {"runs": "a%2Cb,c", "logy": "on"})[0].runs == ("a,b", "c")
    assert from_url(CurvesState, {"logy": "on"})[0].logy is True


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


def test_run_locally_any_folder_is_allowed_and_hosted_only_the_operators(tree):
    """Issue 53: "a folder on the server inside ATTENTION_LAB_ALLOWED_DIRS (and, run locally, any folder typed)".
    Local: the switch unset and the browser on this machine (Streamlit's ip_address is None for localhost);
    hosted: make serve sets the switch to 0, and a browser from another machine is kept to the allowed folders."""
    assert folders.any_folder_allowed({}) and folders.any_folder_allowed({}, "127.0.0.1")
    assert folders.any_folder_allowed({}, "::1") and folders.any_folder_allowed({folders.ANY_FOLDER_ENV: "1"})
    for off in ("0", "off", " False "):
        assert not folders.any_folder_allowed({folders.ANY_FOLDER_ENV: off})
    assert not folders.any_folder_allowed({}, "192.168.1.20") and not folders.any_folder_allowed({}, "not an ip")
    assert folders.resolve_any(str(tree["secret"])) == tree["secret"]
    assert folders.resolve_any(f"{tree['allowed']}/../secret") == tree["secret"]
    assert folders.resolve_any("secret", tree["root"]) == tree["secret"]  # relative: inside the base
    assert folders.resolve_any("~") == Path.home().resolve()
    for typed, words in (("", "Type the path"), (f"{tree['allowed']}/nope", "does not exist"),
                         (f"{tree['allowed']}/notes.txt", "is a file"), ("a\x00b", "not a folder path"),
                         ("~no-such-user-here/runs", "a user this machine does not know")):
        with pytest.raises(folders.FolderError, match=words):
            folders.resolve_any(typed)


def test_make_serve_keeps_typed_folders_to_the_allowed_ones():
    import serve.__main__ as serve_main

    assert serve_main.ANY_FOLDER_ENV == folders.ANY_FOLDER_ENV
    source = (ROOT / "serve" / "__main__.py").read_text()
    assert 'env.setdefault(ANY_FOLDER_ENV, "0")' in source


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
