"""The lesson file (core.io.lessons): its round trip through every page's state, its refusals, its editing, and the
lessons that ship in lessons/."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from core.io import lessons
from core.io.lessons import Lesson, LessonError, Slide, dump_lesson, parse_lesson
from ui import page_by_name
from ui.page_state import (
    MODEL_KEY,
    AttentionState,
    CurvesState,
    ErrorsState,
    PositionalState,
    ProbeState,
    RepresentationsState,
    WhereFromState,
    from_url,
    to_url,
    url_keys,
)

ROOT = Path(__file__).resolve().parents[1]

# Every field of every page's state away from its default, with text a link must survive: commas, percent signs,
# quotes, YAML's own markers, accents, newlines.
AWAY_FROM_DEFAULTS = {
    AttentionState: AttentionState(
        text="Héllo, 100% \"yes\": - [no] #x\nsecond line", layer=3, head=2, view="qk", token=5, combine="rollout",
        compare="lm-rope", past=True, hide_first=True, hide_special=True, key=4, window=(10, 73), step=338,
        words=True),
    ProbeState: ProbeState(tab="fabricate", name="Zqwx Vblorpt, Jr.", focus="birth-vanilla-scratch"),
    CurvesState: CurvesState(runs=("names-pretrained", "a,b %run", "names-scratch"), metric="accuracy", x="epoch",
                             smoothing=0.25, logy=True),
    PositionalState: PositionalState(section="extrapolation", text="Karl: no, yes!", layer=1, head=3, length=96,
                                     dim=64, heads=4, metric="perplexity", train=True),
    WhereFromState: WhereFromState(open=True, corruption="swap", samples=7, seed=42),
    ErrorsState: ErrorsState(
        source="folder", file="names_test.tsv", folder="/data/course", path="test_LM_obama.txt",
        paths=("test_LM_obama.txt", "test_LM_hbush.txt"), view="calibration", gold=("A", "B, C"),
        predicted=("C",), outcome="wrong", search="50% off", sort="loss", descending=True, example=17,
        pins=("3", "9"), edit="An edited, example", pattern=r"\bthe\b", regex=True, compare="names-scratch",
        attention=True, layer=1, head=1, unit="file", document=2, token=40, piece_layer=1),
    RepresentationsState: RepresentationsState(source="tags", world="world", label="place", at="piece",
                                               file="world/names_train.tsv", layer=1, colour="prediction", view="map"),
}


def test_every_state_class_is_covered():
    import ui.page_state as page_state

    declared = {v for v in vars(page_state).values()
                if isinstance(v, type) and dataclasses.is_dataclass(v) and url_keys(v)}
    assert declared == set(AWAY_FROM_DEFAULTS)


@pytest.mark.parametrize("cls", list(AWAY_FROM_DEFAULTS), ids=lambda c: c.__name__)
def test_every_field_survives_a_slide(cls):
    state = AWAY_FROM_DEFAULTS[cls]
    default = cls()
    for f in dataclasses.fields(cls):
        assert getattr(state, f.name) != getattr(default, f.name), f"{cls.__name__}.{f.name} is at its default"
    params = {MODEL_KEY: "lm-learned", **to_url(state)}
    lesson = Lesson("Round trip", (Slide("attention", params, "A slide", "notes: <b>not html</b>\n- a list"),))
    again = parse_lesson(dump_lesson(lesson))
    assert again == lesson
    restored, notes = from_url(cls, again.slides[0].state)
    assert notes == [] and restored == state


def test_refusals_are_one_sentence_each():
    cases = {
        b"\xff\xfe": "not UTF-8",
        "slides: [a, b": "not valid YAML (line 1)",
        "- just a list": "no `slides:` list",
        "lesson: 2\nslides: []": "newer Attention Lab (format 2",
        "lesson: one\nslides: []": "version must be a whole number",
        "slides: 3": "must be a list",
        "slides:\n- page: Attention Page": "names no page",
        "slides:\n- page: attention\n  state: [1, 2]": "state must be",
        "slides:\n- page: attention\n  state: {text: {a: 1}}": "must be text",
        "slides:\n- page: attention\n  state: {'1x': a}": "not a URL parameter",
        "x" * (lessons.MAX_LESSON_BYTES + 1): "a lesson is at most",
        "slides:\n" + "- page: home\n" * (lessons.MAX_SLIDES + 1): f"at most {lessons.MAX_SLIDES} are allowed",
        f"slides:\n- page: home\n  notes: {'n' * (lessons.MAX_NOTES_CHARS + 1)}": "notes has",
    }
    for text, said in cases.items():
        with pytest.raises(LessonError) as caught:
            parse_lesson(text)
        message = str(caught.value)
        assert said in message and message.count(". ") == 0 and message.endswith(("." , ")")), message


def test_yaml_is_never_evaluated():
    hostile = "slides:\n- page: home\n  title: !!python/object/apply:os.system ['echo owned']\n"
    with pytest.raises(LessonError, match="not valid YAML"):
        parse_lesson(hostile)


def test_flags_and_numbers_written_by_hand_read_as_the_url_writes_them():
    lesson = parse_lesson("slides:\n- page: attention\n  state: {past: yes, layer: 1, smoothing: 0.5}\n")
    assert lesson.slides[0].state == {"past": "1", "layer": "1", "smoothing": "0.5"}
    assert from_url(AttentionState, lesson.slides[0].state)[0].past is True


def test_editing_returns_new_lessons_and_keeps_the_old():
    one, two, three = (Slide("home", {}, t) for t in "abc")
    lesson = Lesson("L", (one, two))
    grown = lessons.added(lesson, three)
    assert [s.title for s in lesson.slides] == ["a", "b"]
    assert [s.title for s in grown.slides] == ["a", "b", "c"]
    assert [s.title for s in lessons.moved(grown, 2, 0).slides] == ["c", "a", "b"]
    assert [s.title for s in lessons.moved(grown, 0, 99).slides] == ["b", "c", "a"]
    assert [s.title for s in lessons.duplicated(grown, 1).slides] == ["a", "b", "b", "c"]
    assert [s.title for s in lessons.removed(grown, 1).slides] == ["a", "c"]
    edited = lessons.edited(grown, 1, title="B", notes="<script>alert(1)</script>")
    assert edited.slides[1] == Slide("home", {}, "B", "<script>alert(1)</script>") and grown.slides[1] == two
    assert lessons.retitled(grown, "Week 3").title == "Week 3"
    assert lessons.retitled(grown, "").title == "Untitled lesson"
    with pytest.raises(LessonError, match="has no slide 4"):
        lessons.removed(grown, 3)
    with pytest.raises(LessonError, match="at most"):
        lessons.edited(grown, 0, title="t" * (lessons.MAX_TITLE_CHARS + 1))


def test_variables_fill_titles_notes_and_states():
    lesson = parse_lesson("variables: {model: lm-learned, text: a b}\nslides:\n"
                          "- page: attention\n  title: ${model} reads it\n"
                          "  state: {model: '${model}', text: '${text}'}\n"
                          "  notes: costs $5 and ${missing}\n")
    shown = lesson.resolved()
    assert shown.slides[0].state == {"model": "lm-learned", "text": "a b"}
    assert shown.slides[0].title == "lm-learned reads it" and shown.slides[0].notes == "costs $5 and ${missing}"
    assert lesson.resolved({"model": "mine"}).slides[0].state["model"] == "mine"


def test_saving_never_writes_over_a_file(tmp_path):
    path = tmp_path / "a.lesson.yaml"
    path.write_text("the teacher's own file")
    with pytest.raises(LessonError, match="exists already"):
        lessons.save_lesson(Lesson("L"), path)
    assert path.read_text() == "the teacher's own file"
    new = lessons.save_lesson(Lesson("L", (Slide("home"),)), tmp_path / "b.lesson.yaml")
    assert lessons.read_lesson(new) == Lesson("L", (Slide("home"),))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.lesson.yaml", "b.lesson.yaml"]  # no temporary left
    assert lessons.lesson_files([tmp_path, tmp_path / "missing"]) == {"a": path, "b": new}
    assert lessons.file_name("Five minutes: in front of a class!") == "five-minutes-in-front-of-a-class.lesson.yaml"


# --- the lessons that ship -----------------------------------------------------------------------------------------

STATE_OF_PAGE = {"attention": (AttentionState, WhereFromState), "probe": (ProbeState, WhereFromState),
                 "curves": (CurvesState,), "positional": (PositionalState,), "errors": (ErrorsState,),
                 "representations": (RepresentationsState,)}
SHIPPED = sorted((ROOT / "lessons").glob("*.lesson.yaml"))


def test_the_lessons_ship():
    assert {lessons.lesson_name(p) for p in SHIPPED} >= {"tour", "induction", "write-up"}


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_a_shipped_lesson_opens_on_the_bundled_checkpoints(path):
    lesson = lessons.read_lesson(path).resolved()
    bundled = {p.name.removesuffix(".safetensors") for p in (ROOT / "checkpoints").glob("*.safetensors")}
    assert len(lesson) >= 3
    for number, slide in enumerate(lesson.slides, 1):
        assert slide.title and page_by_name(slide.page) is not None, (number, slide.page)
        assert "$" not in "".join(slide.state.values()), (number, slide.state)
        if MODEL_KEY in slide.state:
            assert slide.state[MODEL_KEY] in bundled, (number, slide.state[MODEL_KEY])
        classes = STATE_OF_PAGE.get(slide.page, ())
        known = set().union(*(url_keys(c) for c in classes)) | {MODEL_KEY}
        assert set(slide.state) <= known, (number, set(slide.state) - known)
        for cls in classes:  # every value is one the page accepts, and says the same written back
            state, notes = from_url(cls, slide.state)
            assert notes == [], (number, notes)
            for f in dataclasses.fields(cls):
                if f.metadata.get("url") in slide.state:  # accepted, not silently the default
                    assert f.metadata["parse"](slide.state[f.metadata["url"]]) == getattr(state, f.name), number
        if slide.page == "curves":
            assert set(slide.state["runs"].split(",")) <= bundled, number
