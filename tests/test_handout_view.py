"""The Lesson page's "Hand it out" part (ui.handout_view.handout_section), drawn by a tiny page under AppTest: the
button runs `python -m ui.handout` in its own process and offers the HTML, PDF and zip; a bad server URL is one
sentence and runs nothing."""

from __future__ import annotations

import sys

from streamlit.testing.v1 import AppTest

from bench.tiny_checkpoints import tiny_checkpoint_folder
from tests.conftest import ROOT

PAGE = f"""
import sys
sys.path.insert(0, {str(ROOT)!r})
from core.io.lessons import Lesson, Slide
from ui.handout_view import handout_section

handout_section(Lesson("View <lesson>", (Slide("attention", {{"model": "tiny-lm", "text": "Ada was in London."}},
                                                 "One head", "<b>notes</b>"),
                                           Slide("probe", {{"model": "nobody-here"}}, "Missing"))))
"""


def open_page(tmp_path, monkeypatch) -> AppTest:
    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(tiny_checkpoint_folder(tmp_path / "ckpts")))
    script = tmp_path / "lesson_page.py"
    script.write_text(PAGE)
    at = AppTest.from_file(str(script), default_timeout=300)
    at.run()
    assert not at.exception
    return at


def test_the_button_makes_the_handout_in_its_own_process_and_offers_three_downloads(tmp_path, monkeypatch):
    import ui.handout_view as view

    at = open_page(tmp_path, monkeypatch)
    assert not at.get("download_button")  # nothing made yet, nothing run
    at.text_input(key="handout_server").input("http://teach.example:8501")
    at.button(key="handout_make").click().run()
    assert not at.exception and not at.error
    made = at.session_state["handout_made"]
    assert isinstance(made, view.Made) and made.error is None
    from ui.handout import chromium_missing

    missing = chromium_missing()
    if missing is None:
        assert set(made.files) == {"html", "pdf", "zip"} and made.files["pdf"].startswith(b"%PDF")
    else:  # no Chromium here: the HTML and the zip (tables only), and the one sentence saying so
        assert set(made.files) == {"html", "zip"} and missing in made.notes
    text = made.files["html"].decode("utf-8")
    assert "View &lt;lesson&gt;" in text and "&lt;b&gt;notes&lt;/b&gt;" in text
    assert "http://teach.example:8501/attention?model=tiny-lm" in text
    assert made.files["zip"].startswith(b"PK")
    assert [n for n in made.notes if n.startswith("Slide 2 (Missing): This slide names the model 'nobody-here'")]
    labels = [b.proto.label for b in at.get("download_button")]
    assert labels[0] == "Download HTML" and "Download Figures and tables (zip)" in labels
    (status,) = [c for c in at.main.children.values() if c.type == "status"]
    assert status.label == "Handout made." and status.icon == ":material/check:"
    assert at.get("progress")[0].proto.value == 100
    assert [i.value for i in at.info if i.value.startswith("Slide 2 (Missing)")]


def test_a_bad_server_is_one_sentence_and_starts_nothing(tmp_path, monkeypatch):
    import ui.handout_view as view

    started = []
    monkeypatch.setattr(view, "make_in_process", lambda *a, **k: started.append(a))
    at = open_page(tmp_path, monkeypatch)
    at.text_input(key="handout_server").input("javascript:alert(1)")
    at.button(key="handout_make").click().run()
    assert [e.value for e in at.error] == ["The server 'javascript:alert(1)' must be an http:// or https:// address "
                                           "like http://host:8501."]
    assert started == [] and not at.get("download_button")



def test_a_handout_process_reads_folders_only_where_the_browser_may(tmp_path, monkeypatch):
    """The handout's own process sees no browser, so its pages would take any folder a slide names as local. For a
    browser that may not open any folder (a remote one, or behind `make serve`) it runs with ATTENTION_LAB_ANY_FOLDER=0;
    and a folder the operator did not allow is refused there in one sentence, nothing of it read."""
    import subprocess as sp

    import ui.handout_view as view
    from core.io.folders import ALLOWED_DIRS_ENV, ANY_FOLDER_ENV, NOT_ALLOWED
    from core.io.lessons import Lesson, Slide

    secret = tmp_path / "private"
    secret.mkdir()
    (secret / "notes.txt").write_text("Kilroy Zanzibar was here . " * 40)
    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(ROOT / "checkpoints"))
    monkeypatch.delenv(ALLOWED_DIRS_ENV, raising=False)
    monkeypatch.delenv(ANY_FOLDER_ENV, raising=False)
    lesson = Lesson("Folders", (Slide("errors", {"model": "lm-learned", "err_source": "folder",
                                                 "err_folder": str(secret), "err_paths": "notes.txt",
                                                 "err_view": "documents", "err_unit": "file"}, "A folder"),))
    envs, real = [], sp.Popen

    def popen(*args, **kwargs):
        envs.append(kwargs.get("env"))
        return real(*args, **kwargs)

    monkeypatch.setattr(view.subprocess, "Popen", popen)
    refused = view.make_in_process(lesson, None, anywhere=False)
    assert envs[-1][ANY_FOLDER_ENV] == "0"
    text = refused.files["html"].decode("utf-8").replace("&#x27;", "'")
    assert NOT_ALLOWED in text and "Kilroy" not in text
    monkeypatch.setattr(view, "_command", lambda *a: [sys.executable, "-c", "pass"])  # the env alone, quickly
    view.make_in_process(lesson, None, anywhere=True)
    assert ANY_FOLDER_ENV not in envs[-1]
