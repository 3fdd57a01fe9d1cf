"""Every text box of every page survives every hostile input (tests/hostile_inputs.py).

Pages are discovered from app.py's PAGES (so new pages are covered without editing this file), text
inputs from each page's first run (st.text_input, st.text_area, st.chat_input). For each hostile
input, each text box in turn gets it (cut to max_chars, as the browser does) and the page reruns:
- no uncaught exception, and no element anywhere on screen mentions a "Traceback";
- user text is never interpreted as Markdown/HTML: a markup input (or a markup-bearing piece of it)
  must not appear verbatim (without a backslash escape) in a Markdown-rendering element that was not
  already on the page before the input, and no HTML tag from the input may reach a plotly figure's
  labels (plotly renders a few tags: <b>, <i>, <br>, <a href>...);
- unpaired surrogates cannot be sent at all (Streamlit's protobuf refuses them while serialising the
  widget state, before the page runs; a browser's cannot deliver them either): the test checks that
  this is what happens and that the page then works as before.

Tiny fixture checkpoints keep one rerun around 0.1 s; one AppTest session per page is reused across
inputs (as one user would type one input after another) and replaced after a failure.
"""

from __future__ import annotations

import json
import logging
import re
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.conftest import ROOT, save_tiny_checkpoint
from tests.hostile_inputs import HOSTILE_INPUTS, HostileInput, app_pages

TEXT_WIDGETS = ("text_input", "text_area", "chat_input")
# Elements whose body Streamlit renders as Markdown (with its HTML-free subset, LaTeX and directives).
MARKDOWN_ELEMENTS = ("markdown", "caption", "warning", "error", "info", "success", "title", "header",
                     "subheader", "toast")
MARKUP_SPECIALS = set("*_~<>[]()$`#|:\\&{}")
PLOTLY_TAG = re.compile(r"<\s*/?\s*(script|img|a|b|i|br|em|sup|sub|span|style)\b[^>]*>?", re.IGNORECASE)
TIMEOUT_S = 120  # one rerun takes ~0.1 s on tiny models; a loaded 2-core box can be 100x slower


PAGES = [file for file, _, _ in app_pages()]


@dataclass
class TextBox:
    kind: str  # one of TEXT_WIDGETS
    key: str | None
    index: int  # position among widgets of its kind (for widgets without a key)
    max_chars: int
    initial: str | None

    @property
    def label(self) -> str:
        return f"{self.kind}({self.key or f'#{self.index}'})"

    def find(self, at: AppTest):
        widgets = getattr(at, self.kind)
        if self.key is not None:
            return widgets(key=self.key)
        return widgets[self.index]

    def enter(self, at: AppTest, text: str | None) -> None:
        """Type into the box as a browser would: the frontend never sends more than max_chars."""
        widget = self.find(at)
        if text is not None and self.max_chars:
            text = text[: self.max_chars]
        widget.set_value(text)


def text_boxes(at: AppTest) -> list[TextBox]:
    boxes = []
    for kind in TEXT_WIDGETS:
        for index, widget in enumerate(getattr(at, kind)):
            initial = widget.value if kind != "chat_input" else None
            boxes.append(TextBox(kind, widget.key, index, int(getattr(widget, "max_chars", 0) or 0), initial))
    return boxes


@dataclass
class PageSession:
    """One AppTest user on one page, the page's text boxes, and what it showed before any input."""

    page: str
    at: AppTest
    boxes: list[TextBox]
    baseline_markdown: set[str] = field(default_factory=set)
    baseline_tags: set[str] = field(default_factory=set)


class Sessions:
    def __init__(self) -> None:
        self._open: dict[str, PageSession] = {}

    def get(self, page: str) -> PageSession:
        if page not in self._open:
            at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT_S)
            at.switch_page(page)
            at.run()
            assert not at.exception, f"{page} fails before any hostile input: {at.exception[0].message}"
            self._open[page] = PageSession(page, at, text_boxes(at), set(markdown_bodies(at)),
                                           set(figure_tags(at)))
        return self._open[page]

    def discard(self, page: str) -> None:
        self._open.pop(page, None)


class UncaughtErrors(logging.Handler):
    """The app's config redacts exception messages on screen (client.showErrorDetails = none); Streamlit
    still logs each uncaught exception with its traceback, so failures can name type, file and line."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.last: str | None = None

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info and record.exc_info[1] is not None:
            exc = record.exc_info[1]
            frames = [f for f in traceback.extract_tb(exc.__traceback__) if str(ROOT) in f.filename
                      and "/.venv/" not in f.filename]
            where = f" at {Path(frames[-1].filename).relative_to(ROOT)}:{frames[-1].lineno}" if frames else ""
            self.last = f"{type(exc).__name__}{where}: {ascii(str(exc))[:160]}"

    def take(self) -> str | None:
        last, self.last = self.last, None
        return last


ERRORS = UncaughtErrors()


@pytest.fixture(scope="module")
def sessions(tmp_path_factory) -> Iterator[Sessions]:
    folder = tmp_path_factory.mktemp("hostile") / "ckpts"
    for name, task in (("tiny-lm", "lm"), ("tiny-birthplace", "birthplace"), ("tiny-classifier", "classify")):
        save_tiny_checkpoint(folder / f"{name}.safetensors", task)
    logger = logging.getLogger("streamlit.error_util")
    logger.addHandler(ERRORS)
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("ATTENTION_LAB_CHECKPOINTS", str(folder))
            # The folder boxes appear only when the operator allows folders: allow one, so they are tried.
            mp.setenv("ATTENTION_LAB_ALLOWED_DIRS", str(folder.parent))
            yield Sessions()
    finally:
        logger.removeHandler(ERRORS)


# --------------------------------------------------------------------------- what is on screen


def nodes(at: AppTest) -> Iterator:
    for block in (at.main, at.sidebar):
        yield from block


def markdown_bodies(at: AppTest) -> Iterator[str]:
    for kind in MARKDOWN_ELEMENTS:
        for element in at.get(kind):
            value = getattr(element, "value", None)
            if isinstance(value, str):
                yield value
    for kind in ("expander", "tab"):  # their labels render Markdown too
        for element in at.get(kind):
            label = getattr(element, "label", None)
            if isinstance(label, str):
                yield label


# Figure keys plotly never draws (state keys, grouping ids); every other string may end up on screen
# (customdata and meta too, through hover templates).
UNDRAWN_KEYS = {"uirevision", "editrevision", "selectionrevision", "datarevision", "legendgroup", "uid", "ids",
                "template"}


def figure_strings(at: AppTest) -> Iterator[str]:
    def walk(value):
        if isinstance(value, str):
            yield value
        elif isinstance(value, dict):
            for key, item in value.items():
                if key not in UNDRAWN_KEYS:
                    yield from walk(item)
        elif isinstance(value, list):
            for item in value:
                yield from walk(item)

    for chart in at.get("plotly_chart"):
        spec = getattr(chart.proto, "spec", "") or ""
        if spec:
            yield from walk(json.loads(spec))


def figure_tags(at: AppTest) -> Iterator[str]:
    for text in figure_strings(at):
        for match in PLOTLY_TAG.finditer(text):
            yield match.group(0).lower()


def markup_fragments(text: str) -> list[str]:
    """The whole input and each whitespace-separated piece that carries Markdown/HTML syntax."""
    fragments = [text.strip()] if MARKUP_SPECIALS & set(text) else []
    fragments += [piece for piece in text.split() if len(piece) >= 3 and MARKUP_SPECIALS & set(piece)]
    return list(dict.fromkeys(fragments))


def unescaped_occurrence(body: str, fragment: str) -> bool:
    """`fragment` occurs in `body` other than right after a backslash (an escape) or inside backticks."""
    stripped = re.sub(r"```.*?```|`[^`\n]*`", "", body, flags=re.DOTALL)  # code spans render literally
    start = stripped.find(fragment)
    while start != -1:
        if start == 0 or stripped[start - 1] != "\\":
            return True
        start = stripped.find(fragment, start + 1)
    return False


def problems_on_screen(session: PageSession, hostile: HostileInput) -> list[str]:
    at = session.at
    logged = ERRORS.take()
    found = [f"uncaught exception: {logged or e.message[:300]}" for e in at.exception]
    for node in nodes(at):
        proto = getattr(node, "proto", None)
        if proto is not None and "Traceback" in str(proto):
            found.append(f"a traceback is on screen in a {node.type} element")
            break
    if hostile.markup:
        for body in set(markdown_bodies(at)) - session.baseline_markdown:
            for fragment in markup_fragments(hostile.text):
                if unescaped_occurrence(body, fragment):
                    found.append(f"user markup {fragment[:60]!r} rendered as Markdown in {body[:160]!r}")
                    break
        input_tags = {m.group(0).lower() for m in PLOTLY_TAG.finditer(hostile.text)}
        leaked = (set(figure_tags(at)) - session.baseline_tags) & input_tags
        if leaked:
            found.append(f"HTML tags from the input reach a plotly figure unescaped: {sorted(leaked)}")
    return found


# --------------------------------------------------------------------------- one input, every box


def try_input(session: PageSession, box: TextBox, hostile: HostileInput) -> list[str]:
    at = session.at
    ERRORS.take()
    try:
        box.find(at)
    except KeyError:  # a box drawn only for some inputs (the attention page's "Find a token", for a window):
        at.run()  # the previous box's default restored but not run yet; run it, and the box is back
    try:
        box.enter(at, hostile.text)
        at.run()
    except UnicodeEncodeError:
        if not hostile.surrogate:
            raise
        # Expected: the widget state cannot be serialised, so the script never saw the text.
        box.enter(at, box.initial)
        at.run()
        return [f"after the refused surrogate: {p}" for p in problems_on_screen(session, hostile)]
    problems = problems_on_screen(session, hostile)
    if hostile.surrogate:
        problems.append("Streamlit accepted an unpaired surrogate; check what the page did with it")
    return problems


def run_everywhere(sessions: Sessions, hostile: HostileInput) -> tuple[list[str], int]:
    """(problems as 'page box: problem', number of boxes tried)."""
    failures, tried = [], 0
    for page in PAGES:
        session = sessions.get(page)
        for box in session.boxes:
            tried += 1
            try:
                problems = try_input(session, box, hostile)
            except Exception as exc:  # the harness itself broke (e.g. a timeout): report, start afresh
                problems = [f"{type(exc).__name__} while running: {str(exc)[:300]}"]
            if problems:
                failures += [f"{page} {box.label}: {p}" for p in problems]
                sessions.discard(page)
                session = sessions.get(page)
            else:
                box.enter(session.at, box.initial)  # the next box starts from the page's default
    return failures, tried


# Known failures in pages this suite does not own, reported to their authors:
# (page, input id) -> reason. Such a combination makes its test xfail (and any other failure of the
# same input still fails it); once the page is fixed the test fails until the entry is removed.
KNOWN_FAILURES: dict[tuple[str, str], str] = {}


@pytest.mark.parametrize("hostile", [pytest.param(h, id=h.id) for h in HOSTILE_INPUTS])
def test_every_text_box_survives(sessions, hostile):
    failures, tried = run_everywhere(sessions, hostile)
    assert tried, "no page has a text input: discovery is broken"
    known = {page: reason for (page, id_), reason in KNOWN_FAILURES.items() if id_ == hostile.id}
    unexpected = [f for f in failures if f.split(" ", 1)[0] not in known]
    assert not unexpected, f"input {hostile.id!r}:\n" + "\n".join(unexpected)
    fixed = [page for page in known if not any(f.startswith(page + " ") for f in failures)]
    assert not fixed, f"{fixed} now survive {hostile.id!r}: remove them from KNOWN_FAILURES"
    if known:
        pytest.xfail("; ".join(f"{page}: {reason}" for page, reason in known.items()))


def test_discovery_finds_the_pages_and_their_text_boxes(sessions):
    """Guards the suite itself: every page in app.py opens, and the known text boxes are found."""
    assert len(PAGES) >= 8 and all((ROOT / p).is_file() for p in PAGES), PAGES
    found = {box.key for page in PAGES for box in sessions.get(page).boxes}
    assert {"attn_text", "probe_ask", "anatomy_text", "curves_folder", "open_model_folder"} <= found, found


def test_surrogates_are_refused_before_the_page_runs(sessions):
    """Documents Streamlit's behaviour: a lone surrogate cannot be serialised into the widget state."""
    session = sessions.get("pages/attention.py")
    box = next(b for b in session.boxes if b.key == "attn_text")
    box.enter(session.at, "Ada \ud800")
    with pytest.raises(UnicodeEncodeError):
        session.at.run()
    box.enter(session.at, "Ada Lovelace")
    session.at.run()
    assert not session.at.exception


def test_markup_detection_catches_unescaped_text():
    """The checker itself: raw markup is caught, backslash-escaped or code-spanned markup is not."""
    assert unescaped_occurrence("Could not open **bold**.", "**bold**")
    assert not unescaped_occurrence(r"Could not open \*\*bold\*\*.", "**bold**")
    assert not unescaped_occurrence(r"price \$x^2", "$x^2")
    assert not unescaped_occurrence("see `<script>` here", "<script>")
    assert markup_fragments("**a** plain <b>x</b>") == ["**a** plain <b>x</b>", "**a**", "<b>x</b>"]
    assert markup_fragments("plain words") == []


# Bugs in core/io/uploads.py found by the test below (input id -> reason), marked xfail(strict=True).
UPLOAD_FOLDER_BUGS: dict[str, str] = {}


@pytest.mark.parametrize("hostile", [
    pytest.param(h, id=h.id, marks=[pytest.mark.xfail(strict=True, reason=UPLOAD_FOLDER_BUGS[h.id])]
                 if h.id in UPLOAD_FOLDER_BUGS else [])
    for h in HOSTILE_INPUTS if not h.surrogate])
def test_upload_folder_box_refuses_with_a_sentence(hostile, tmp_path):
    """The open-model page's folder box feeds core.io.uploads.destination_folder when a button is clicked."""
    from core.io.uploads import UploadError, destination_folder

    try:
        folder = destination_folder(hostile.text, lambda: tmp_path, [tmp_path])
    except UploadError as exc:
        assert str(exc).strip() and "\n" not in str(exc)[:200]
    else:
        assert folder == tmp_path or folder.is_dir()


ECHO_PAGE = """
import plotly.graph_objects as go
import streamlit as st
text = st.text_input("Name", "Ada", key="name")
st.markdown(f"Hello {text}")
st.plotly_chart(go.Figure(go.Bar(x=[text], y=[1]), layout_title_text=text))
"""


def test_checker_catches_a_page_that_renders_user_markup():
    """The whole pipeline on a deliberately careless page: it must report Markdown and plotly leaks."""
    at = AppTest.from_string(ECHO_PAGE, default_timeout=TIMEOUT_S)
    at.run()
    session = PageSession("echo", at, text_boxes(at), set(markdown_bodies(at)), set(figure_tags(at)))
    problems = try_input(session, session.boxes[0], HostileInput("x", "<b>bold</b> **x**", markup=True))
    assert any("rendered as Markdown" in p for p in problems), problems
    assert any("plotly" in p for p in problems), problems
    assert not try_input(session, session.boxes[0], HostileInput("y", "plain words", markup=True))
