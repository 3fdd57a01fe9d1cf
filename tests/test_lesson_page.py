"""Lessons under AppTest: "Add this view to the lesson" on every page, the Lesson page (list, reorder, retitle,
notes as text, duplicate, delete, download and upload, server lessons by name, unknown pages) and present mode (the
bar, Next / Previous / Back to the slide / End, the presenter view)."""

from __future__ import annotations

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from core.io import lessons as ls
from tests.conftest import ROOT
from ui import APP_PAGES, lesson_session

APP = str(ROOT / "app.py")
LESSON_PAGE = str(ROOT / "pages" / "lesson.py")
HOSTILE_NOTES = "<script>alert('notes')</script>\nSay **this** [link](javascript:x)"


def assert_no_exception(at: AppTest) -> None:
    assert not at.exception, [e.message for e in at.exception]


def run_page(monkeypatch, folder, file: str, lesson: ls.Lesson | None = None, **params) -> AppTest:
    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(folder))
    at = AppTest.from_file(str(ROOT / file), default_timeout=60)
    if lesson is not None:
        at.session_state[lesson_session.LESSON] = lesson
    for key, value in params.items():
        at.query_params[key] = value
    at.run()
    assert_no_exception(at)
    return at


def add_view(at: AppTest) -> ls.Lesson:
    at.sidebar.button(key="lesson_add").click().run()
    assert_no_exception(at)
    return at.session_state[lesson_session.LESSON]


def shown_as_markup(at: AppTest) -> list[str]:
    """Every element whose text Streamlit renders as Markdown."""
    return [e.value for kind in ("markdown", "caption", "info", "warning", "success", "error", "title", "subheader")
            for e in at.get(kind)]


def key(at: AppTest, what: str, index: int | None = None) -> str:
    version = at.session_state[lesson_session.LESSON_VERSION] if lesson_session.LESSON_VERSION in \
        at.session_state else 0
    return f"lesson_{what}_{version}" + ("" if index is None else f"_{index}")


def sentences(at: AppTest) -> list[str]:
    return [e.value for e in [*at.info, *at.warning, *at.success, *at.error]]


THREE = ls.Lesson(title="Three views", slides=(
    ls.Slide("attention", {"model": "tiny-lm", "text": "Ada was born in London.", "view": "model"}, "One"),
    ls.Slide("positional", {"pos_section": "sentence"}, "Two", "second's notes"),
    ls.Slide("curves", {"metric": "loss"}, "Three"),
))


def test_slides_from_two_pages_are_kept_as_the_pages_wrote_their_state(monkeypatch, tiny_checkpoints):
    at = run_page(monkeypatch, tiny_checkpoints, "pages/attention.py", model="tiny-lm")
    at.text_area(key="attn_text").set_value("The <b>cat</b> sat.").run()
    at.selectbox(key="attn_head").select(2).run()
    written = at.query_params.to_dict() if hasattr(at.query_params, "to_dict") else dict(at.query_params)
    lesson = add_view(at)
    assert len(lesson) == 1
    (slide,) = lesson.slides
    assert slide.page == "attention" and slide.notes == ""
    assert slide.state["text"] == "The <b>cat</b> sat." and slide.state["head"] == "2"
    assert slide.state == {k: v[-1] if isinstance(v, list) else v for k, v in written.items()}
    assert slide.title == "Attention: The <b>cat</b> sat."
    assert "Added as slide 1 of \\'Untitled lesson\\'\\." in [s.value for s in at.sidebar.success]

    curves = run_page(monkeypatch, tiny_checkpoints, "pages/curves.py", lesson=lesson)
    lesson = add_view(curves)
    assert [s.page for s in lesson.slides] == ["attention", "curves"]
    assert lesson.slides[1].title.startswith("Training curves") and "metric" in lesson.slides[1].state
    assert any("slide 2 of" in s.value for s in curves.sidebar.success)

    listing = run_page(monkeypatch, tiny_checkpoints, "pages/lesson.py", lesson=lesson)
    heads = [m.value for m in listing.markdown if m.value.startswith("**")]
    assert heads == ["**1.** Attention\\: The \\<b\\>cat\\<\\/b\\> sat\\. · Attention",
                     "**2.** " + ls_plain(lesson.slides[1].title) + " · Training curves"]
    assert any("text\\=The \\<b\\>cat" in c.value for c in listing.caption)  # the state, compactly and escaped


def ls_plain(text: str) -> str:
    from core.text import markdown_escape

    return markdown_escape(text)


@pytest.mark.parametrize("page", [p for p in APP_PAGES if p.name != "lesson"], ids=lambda p: p.name)
def test_every_page_adds_itself_with_its_name(monkeypatch, tiny_checkpoints, page):
    at = run_page(monkeypatch, tiny_checkpoints, page.file)
    lesson = add_view(at)
    assert [s.page for s in lesson.slides] == [page.name]
    assert lesson.slides[0].title.startswith(page.title)


@pytest.mark.parametrize("file", ["pages/attention.py", "pages/curves.py", "pages/probe.py", "pages/home.py"])
def test_pages_without_checkpoints_still_offer_the_button(monkeypatch, tmp_path, file):
    at = run_page(monkeypatch, tmp_path / "none", file)
    assert at.sidebar.button(key="lesson_add")
    assert len(add_view(at)) == 1


def test_reorder_retitle_notes_duplicate_delete(monkeypatch, tiny_checkpoints):
    at = run_page(monkeypatch, tiny_checkpoints, "pages/lesson.py", lesson=THREE)
    at.button(key=key(at, "down", 0)).click().run()
    assert [s.title for s in at.session_state["lesson"].slides] == ["Two", "One", "Three"]
    at.button(key=key(at, "up", 2)).click().run()
    assert [s.title for s in at.session_state["lesson"].slides] == ["Two", "Three", "One"]

    at.text_input(key=key(at, "title")).input("My <i>lesson</i>").run()
    assert at.session_state["lesson"].title == "My <i>lesson</i>"
    at.text_input(key=key(at, "slide_title", 1)).input("Curves, *loss*").run()
    assert at.session_state["lesson"].slides[1].title == "Curves, *loss*"
    at.text_area(key=key(at, "notes", 2)).input(HOSTILE_NOTES).run()
    assert_no_exception(at)
    lesson = at.session_state["lesson"]
    assert lesson.slides[2].notes == HOSTILE_NOTES
    assert HOSTILE_NOTES in [t.value for t in at.text]  # shown back as text
    assert not any("<script" in value or "<i>" in value or "*loss*" in value for value in shown_as_markup(at))

    at.button(key=key(at, "duplicate", 2)).click().run()
    slides = at.session_state["lesson"].slides
    assert len(slides) == 4 and slides[3] == slides[2]
    at.button(key=key(at, "delete", 0)).click().run()
    assert [s.title for s in at.session_state["lesson"].slides] == ["Curves, *loss*", "One", "One"]
    assert THREE.slides[0].title == "One" and len(THREE) == 3  # values: the original is untouched


def test_download_then_upload_gives_the_same_lesson(monkeypatch, tiny_checkpoints):
    kept = {}
    real = st.download_button

    def recording(label, data=None, **kwargs):
        kept.update(label=label, data=data, **kwargs)
        return real(label, data, **kwargs)

    monkeypatch.setattr(st, "download_button", recording)
    lesson = ls.edited(THREE, 0, notes=HOSTILE_NOTES)
    at = run_page(monkeypatch, tiny_checkpoints, "pages/lesson.py", lesson=lesson)
    assert kept["file_name"] == "three-views.lesson.yaml"
    monkeypatch.setattr(st, "download_button", real)

    fresh = run_page(monkeypatch, tiny_checkpoints, "pages/lesson.py")
    assert len(fresh.session_state["lesson"] if "lesson" in fresh.session_state else ls.Lesson()) == 0
    fresh.file_uploader(key="lesson_upload").upload("three-views.lesson.yaml", kept["data"].encode(),
                                                    "application/yaml").run()
    assert_no_exception(fresh)
    assert fresh.session_state["lesson"] == lesson
    assert any("Opened" in s for s in sentences(fresh))
    del at


@pytest.mark.parametrize("data, said", [
    (b"slides: [unclosed", "not valid YAML"),
    (b"title: x\nslides:\n- page: attention\n  notes: '" + b"a" * ls.MAX_LESSON_BYTES + b"'\n", "bytes"),
    (b"lesson: 2\nslides: []\n", "newer Attention Lab"),
    (b"\xff\xfe\x00", "not UTF-8"),
], ids=["not-yaml", "too-large", "newer", "binary"])
def test_a_bad_upload_says_one_sentence_and_keeps_the_lesson(monkeypatch, tiny_checkpoints, data, said):
    at = run_page(monkeypatch, tiny_checkpoints, "pages/lesson.py", lesson=THREE)
    at.file_uploader(key="lesson_upload").upload("bad.lesson.yaml", data, "application/yaml").run()
    assert_no_exception(at)
    (warning,) = at.warning
    assert said in warning.value.replace("\\", "") and "kept" in warning.value
    assert warning.value.count("\\.") <= 3  # one sentence and "kept": no traceback
    assert at.session_state["lesson"] == THREE


def test_a_slide_of_a_page_this_app_lacks_says_so_and_the_others_open(monkeypatch, tiny_checkpoints):
    lesson = ls.Lesson(title="Mixed", slides=(ls.Slide("attention", {"model": "tiny-lm"}, "Here"),
                                              ls.Slide("handouts_only", {"x": "1"}, "Elsewhere")))
    at = run_page(monkeypatch, tiny_checkpoints, "pages/lesson.py", lesson=lesson)
    said = [i.value for i in at.info if "handouts" in i.value]
    assert said == [ls_plain("This slide shows the page 'handouts_only', which is not in this app: it cannot be opened "
                             "here.")]
    assert at.button(key=key(at, "open", 1)).disabled and not at.button(key=key(at, "open", 0)).disabled


def write_lesson(folder, name: str, lesson: ls.Lesson):
    folder.mkdir(parents=True, exist_ok=True)
    return ls.save_lesson(lesson, folder / f"{name}{ls.SUFFIX}")


def test_a_server_lesson_is_opened_by_name_and_never_written_over(monkeypatch, tiny_checkpoints, tmp_path):
    path = write_lesson(tmp_path / "lessons", "class", THREE)
    before = path.read_bytes()
    monkeypatch.setenv(lesson_session.FOLDER_ENV, str(tmp_path / "lessons"))
    monkeypatch.setenv(lesson_session.SAVE_ENV, str(tmp_path / "saved"))
    (tmp_path / "saved").mkdir()
    at = run_page(monkeypatch, tiny_checkpoints, "pages/lesson.py")
    assert "class" in at.selectbox(key="lesson_pick").options
    at.selectbox(key="lesson_pick").select("class")
    at.button(key="lesson_open_file").click().run()
    assert at.session_state["lesson"] == THREE
    assert any("?lesson=class&slide=1" == c.value for c in at.code)
    at.button(key=key(at, "delete", 0)).click().run()
    at.button(key="lesson_save").click().run()
    at.button(key="lesson_save").click().run()
    assert_no_exception(at)
    assert path.read_bytes() == before
    saved = sorted(p.name for p in (tmp_path / "saved").iterdir())
    assert saved == ["three-views-2.lesson.yaml", "three-views.lesson.yaml"]
    assert ls.read_lesson(tmp_path / "saved" / saved[1]) == ls.removed(THREE, 0)


def test_without_a_save_folder_nothing_is_offered_to_write(monkeypatch, tiny_checkpoints):
    monkeypatch.delenv(lesson_session.SAVE_ENV, raising=False)
    at = run_page(monkeypatch, tiny_checkpoints, "pages/lesson.py", lesson=THREE)
    assert not [b for b in at.button if b.key == "lesson_save"]


# --- present mode (through app.py: st.switch_page needs the app's navigation) ---------------------------------

def app(monkeypatch, folder, lesson: ls.Lesson) -> AppTest:
    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(folder))
    at = AppTest.from_file(APP, default_timeout=60)
    at.session_state[lesson_session.LESSON] = lesson
    at.run()
    at.switch_page("pages/lesson.py").run()
    assert_no_exception(at)
    return at


def bar(at: AppTest) -> tuple[str, str]:
    """The presenting bar's counter and title (its first two markdown elements)."""
    texts = [m.value for m in at.markdown]
    counter = next(t for t in texts if t.startswith("**") and " / " in t)
    return counter, texts[texts.index(counter) + 1]


def on_this_page(at: AppTest) -> AppTest:
    """AppTest reruns the page it last switched to itself, not one the script switched to: name it again (the page
    whose title is shown) before the next run."""
    files = {page.title: page.file for page in APP_PAGES}
    return at.switch_page(files[at.title[0].value])


def click(at: AppTest, key: str) -> AppTest:
    at.button(key=key).click()
    on_this_page(at).run()
    assert_no_exception(at)
    return at


def test_present_steps_through_live_pages_and_back_to_the_slide(monkeypatch, tiny_checkpoints):
    at = click(app(monkeypatch, tiny_checkpoints, THREE), "lesson_present")
    assert at.title[0].value == "Attention" and bar(at) == ("**1 / 3**", "One")
    assert at.text_area(key="attn_text").value == "Ada was born in London."
    assert at.radio(key="attn_view").value == "model"
    assert at.button(key="present_prev").disabled

    at.text_area(key="attn_text").set_value("Something else entirely.")
    on_this_page(at).run()
    assert at.text_area(key="attn_text").value == "Something else entirely."
    assert at.query_params["text"] == ["Something else entirely."] or at.query_params["text"] == \
        "Something else entirely."
    click(at, "present_back")
    assert at.text_area(key="attn_text").value == "Ada was born in London."  # the slide as saved
    assert bar(at) == ("**1 / 3**", "One")

    click(at, "present_next")
    assert at.title[0].value == "Positional encodings" and bar(at) == ("**2 / 3**", "Two")
    presenting = at.session_state[lesson_session.PRESENTING]
    assert lesson_session.presentations().follow(presenting.presenter) == (THREE, 1)

    click(at, "present_next_page")  # Page Down's button
    assert at.title[0].value == "Training curves" and bar(at) == ("**3 / 3**", "Three")
    assert at.button(key="present_next").disabled
    click(at, "present_prev_page")  # Page Up's
    click(at, "present_prev")
    assert at.title[0].value == "Attention" and bar(at) == ("**1 / 3**", "One")

    click(at, "present_end")
    assert at.title[0].value == "Lesson" and lesson_session.PRESENTING not in at.session_state
    assert lesson_session.presentations().follow(presenting.presenter) is None


def test_the_keys_are_bound_to_next_and_previous(monkeypatch, tiny_checkpoints):
    at = click(app(monkeypatch, tiny_checkpoints, THREE), "lesson_present")
    shortcuts = {b.key: b.proto.shortcut.lower() for b in at.button if b.key and b.key.startswith("present_")}
    assert (shortcuts["present_next"], shortcuts["present_next_page"]) == ("right", "pagedown")
    assert (shortcuts["present_prev"], shortcuts["present_prev_page"]) == ("left", "pageup")
    assert not shortcuts["present_back"] and not shortcuts["present_end"]


def test_a_link_opens_a_server_lesson_at_its_slide_and_presents(monkeypatch, tiny_checkpoints, tmp_path):
    write_lesson(tmp_path / "lessons", "class", THREE)
    monkeypatch.setenv(lesson_session.FOLDER_ENV, str(tmp_path / "lessons"))
    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(tiny_checkpoints))
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.query_params["lesson"] = "class"
    at.query_params["slide"] = "3"
    at.switch_page("pages/lesson.py").run()
    assert_no_exception(at)
    assert at.title[0].value == "Training curves" and bar(at) == ("**3 / 3**", "Three")

    at.query_params.clear()
    at.query_params["lesson"] = "nothing-here"
    at.switch_page("pages/lesson.py").run()
    assert any("no lesson named" in w.value for w in at.warning)


def test_the_presenter_view_follows_with_notes_as_text(monkeypatch, tiny_checkpoints):
    lesson = ls.edited(THREE, 1, notes=HOSTILE_NOTES)
    lesson_session.presentations().publish("presenter-test-1", lesson, 1)
    at = run_page(monkeypatch, tiny_checkpoints, "pages/lesson.py", presenter="presenter-test-1")
    assert at.title[0].value == "Presenter view"
    assert [t.value for t in at.text] == [HOSTILE_NOTES]
    assert "**2 / 3** Two" in [m.value for m in at.markdown] and "Next: Three" in [m.value for m in at.markdown]
    assert not any("<script" in value for value in shown_as_markup(at))
    lesson_session.presentations().publish("presenter-test-1", lesson, 2)
    at.run()
    assert "This is the last slide." in [c.value for c in at.caption]
    lesson_session.presentations().end("presenter-test-1")
    at.run()
    assert any("ended" in i.value for i in at.info)
    bad = run_page(monkeypatch, tiny_checkpoints, "pages/lesson.py", presenter="../../etc")
    assert any("not valid" in w.value for w in bad.warning)


def test_a_lessons_variables_are_filled_in_when_a_slide_opens(monkeypatch, tiny_checkpoints):
    lesson = ls.Lesson(title="Variables", variables={"model": "tiny-classifier"}, slides=(
        ls.Slide("attention", {"model": "${model}", "text": "Ada was born in Paris."}, "On ${model}"),))
    at = click(app(monkeypatch, tiny_checkpoints, lesson), "lesson_present")
    assert bar(at) == ("**1 / 1**", "On tiny\\-classifier")
    assert at.sidebar.selectbox(key="picker_model").value == "tiny-classifier"
    assert at.session_state[lesson_session.LESSON] == lesson  # kept as written: a download keeps ${model}


def test_the_lessons_offered_are_the_repositorys_the_checkpoints_and_the_operators(monkeypatch, tiny_checkpoints,
                                                                                    tmp_path):
    write_lesson(tmp_path / "repo-lessons", "tour", THREE)
    write_lesson(tiny_checkpoints, "beside-the-models", THREE)
    write_lesson(tmp_path / "operator", "class", THREE)
    (tmp_path / "operator" / "notes.yaml").write_text("not offered: not a .lesson.yaml file")
    monkeypatch.setattr(lesson_session, "LESSONS_DIR", tmp_path / "repo-lessons")
    monkeypatch.setenv(lesson_session.FOLDER_ENV, str(tmp_path / "operator"))
    at = run_page(monkeypatch, tiny_checkpoints, "pages/lesson.py")
    assert at.selectbox(key="lesson_pick").options == ["beside-the-models", "class", "tour"]
    assert [t.label for t in at.text_input] == ["Title"]  # no box to type a server path into


def test_present_from_a_slide(monkeypatch, tiny_checkpoints):
    at = app(monkeypatch, tiny_checkpoints, THREE)
    click(at, key(at, "present", 1))
    assert at.title[0].value == "Positional encodings" and bar(at) == ("**2 / 3**", "Two")


def test_presenting_a_slide_of_a_page_this_app_lacks_says_so_on_the_lesson_page(monkeypatch, tiny_checkpoints):
    lesson = ls.Lesson(title="Mixed", slides=(ls.Slide("curves", {}, "Here"),
                                              ls.Slide("handouts_only", {}, "Elsewhere")))
    at = click(app(monkeypatch, tiny_checkpoints, lesson), "lesson_present")
    assert at.title[0].value == "Training curves"
    click(at, "present_next")
    assert at.title[0].value == "Lesson" and bar(at) == ("**2 / 2**", "Elsewhere")
    assert ls_plain("Slide 2 shows the page 'handouts_only', which is not in this app.") in [i.value for i in at.info]
    click(at, "present_prev")
    assert at.title[0].value == "Training curves" and bar(at) == ("**1 / 2**", "Here")


def test_a_slide_opens_as_its_link_in_a_new_session_whatever_this_session_did_before(monkeypatch, tiny_checkpoints):
    """A slide names only what it saved: every other field is at its default, not at this session's last value. A
    positional view added at its defaults names no field at all (its URL had none); the person had typed another
    sentence there before presenting."""
    from ui.page_state import POSITIONAL_DEFAULT_SENTENCE

    lesson = ls.Lesson(title="Defaults", slides=(ls.Slide("positional", {}, "The encodings as they open"),))
    at = app(monkeypatch, tiny_checkpoints, lesson)
    at.query_params["pos_section"] = "sentence"
    at.switch_page("pages/positional.py").run()
    at.text_input(key="pos_text").set_value("Another sentence entirely .")
    at.run()
    assert at.text_input(key="pos_text").value == "Another sentence entirely ."
    at.query_params.clear()
    at.switch_page("pages/lesson.py").run()
    click(at, "lesson_present")
    assert at.title[0].value == "Positional encodings"
    assert at.session_state["pos_text"] == POSITIONAL_DEFAULT_SENTENCE  # the slide's (default) sentence
