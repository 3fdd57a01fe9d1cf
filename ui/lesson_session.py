"""The lesson of this browser session and its presentation: what "Add this view to the lesson" keeps, the bar every
page draws while presenting, and the registry a presenter's second tab follows.

The lesson is a `core.io.lessons.Lesson` value in `st.session_state[LESSON]` (a new value on every edit; a file it
was opened from is never written over). A slide is a page's name (`ui.AppPage.name`) and its URL query parameters as
the page last wrote them: in a button's on_click callback `st.query_params` holds exactly the running page's state.
Presenting is `st.session_state[PRESENTING]` (which slide, the presentation's id); each slide is the live page opened
with `st.switch_page(file, query_params=slide.state)`, and `ui.page_state.restore` reads URL values the page did not
write last as a link, so the page opens exactly as saved.

Everything here is drawn from `ui.model_picker.checkpoint_picker`, which every page calls first (so AppTest sees it
too). User text (titles, notes, state values) reaches the browser only escaped (`markdown_escape`) or as `st.text`.
"""

from __future__ import annotations

import os
import re
import secrets
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import streamlit as st

from core.io import lessons as ls
from core.io.checkpoint import checkpoint_dir
from core.text import markdown_escape as plain
from core.text import shortened
from ui import APP_PAGES, AppPage, page_by_name, page_state

LESSON = "lesson"  # session_state: this session's Lesson
LESSON_SOURCE = "lesson_source"  # session_state: the name of the lesson file it was opened from (None: built here)
LESSON_VERSION = "lesson_version"  # session_state: bumped when slides move, so per-slide widgets start afresh
PRESENTING = "lesson_presenting"  # session_state: a Presenting while presenting
SIDEBAR_BACK = "lesson_sidebar_back"  # session_state: a presentation ended, the sidebar it collapsed comes back
FLASH = "lesson_flash"  # session_state: (kind, sentence) shown once on the next run
ROOT = Path(__file__).resolve().parent.parent
LESSONS_DIR = ROOT / "lessons"  # the repository's lessons
FOLDER_ENV, SAVE_ENV = "ATTENTION_LAB_LESSONS", "ATTENTION_LAB_LESSONS_SAVE"
LESSON_PAGE = "pages/lesson.py"
PRESENTER_ID = re.compile(r"[A-Za-z0-9_-]{8,40}")
MAX_PRESENTATIONS = 256  # in the registry at once (the oldest is dropped): a few per class, far below this
# a few words of the state that say which view a slide is, per page (the first one present wins)
SUMMARY_KEYS = {"attention": ("text",), "positional": ("pos_text", "pos_section"), "probe": ("name", "tab"),
                "curves": ("metric",), "errors": ("err_view", "err_file")}


# --- this session's lesson ----------------------------------------------------------------------------------

def current_lesson() -> ls.Lesson:
    lesson = st.session_state.get(LESSON)
    return lesson if isinstance(lesson, ls.Lesson) else ls.Lesson()


def set_lesson(lesson: ls.Lesson, source: str | None = None, keep_source: bool = True, renumber: bool = True) -> None:
    """The session's lesson from now on (`source`: the name of the file it came from; an edit keeps it). `renumber`:
    the slides' widgets start afresh (slides moved, added, removed, another lesson opened); a title or notes typed
    into a slide's own box keeps the boxes (their keys stay, so the box being typed in is the same widget)."""
    st.session_state[LESSON] = lesson
    if not keep_source or source is not None:
        st.session_state[LESSON_SOURCE] = source
    if renumber:
        st.session_state[LESSON_VERSION] = st.session_state.get(LESSON_VERSION, 0) + 1
    if (now := presenting()) is not None:
        publish(now.presenter, lesson.resolved(), now.index)


def flash(kind: str, sentence: str) -> None:
    st.session_state[FLASH] = (kind, sentence)


def show_flash() -> None:
    if (message := st.session_state.pop(FLASH, None)) is not None:
        kind, sentence = message
        getattr(st, kind)(plain(sentence))


def default_title(page: AppPage, state: dict[str, str]) -> str:
    """The page's title and a few words of its state (the sentence, the name, the metric): plain text."""
    summary = next((state[k] for k in SUMMARY_KEYS.get(page.name, ()) if state.get(k, "").strip()), "")
    summary = " ".join(summary.split())
    return shortened(f"{page.title}: {summary}" if summary else page.title, 80)


def url_state() -> dict[str, str]:
    """st.query_params as strings (a repeated key: its last value, as ui.page_state reads it)."""
    params = st.query_params.to_dict()
    return {k: v[-1] if isinstance(v, list) else v for k, v in params.items() if isinstance(v, (str, list)) and v}


def add_current_view(page_name: str) -> None:
    """The on_click callback: the running page's state as the lesson's next slide."""
    page = page_by_name(page_name)
    if page is None:
        flash("warning", "This page cannot be added to a lesson.")
        return
    state = url_state()
    lesson = current_lesson()
    try:
        lesson = ls.added(lesson, ls.Slide(page=page.name, state=state, title=default_title(page, state)))
    except ls.LessonError as exc:
        flash("warning", str(exc))
        return
    set_lesson(lesson)
    flash("success", f"Added as slide {len(lesson)} of '{lesson.title}'.")


def add_view_button(page_name: str) -> None:
    """The sidebar's "Add this view to the lesson" (not on the Lesson page itself: it is no view of a model)."""
    if page_by_name(page_name) is None or page_name == "lesson":
        return
    st.button("Add this view to the lesson", key="lesson_add", icon=":material/add_to_queue:",
              on_click=add_current_view, args=(page_name,), width="stretch",
              help="Keeps this page exactly as it is now (its link) as the next slide of the lesson; "
                   "the Lesson page lists, edits, saves and presents it.")
    show_flash()


# --- lesson files the server offers (names only: no browser names a path) --------------------------------------

def lesson_folders() -> list[Path]:
    """The repository's lessons/, the checkpoints folder, ATTENTION_LAB_LESSONS and the save folder, if set."""
    folders = [LESSONS_DIR, checkpoint_dir()]
    folders += [Path(v) for v in (os.environ.get(FOLDER_ENV), os.environ.get(SAVE_ENV)) if v]
    return folders


def offered_lessons() -> dict[str, Path]:
    return ls.lesson_files(lesson_folders())


def save_folder() -> Path | None:
    value = os.environ.get(SAVE_ENV)
    return Path(value) if value else None


def save_on_server(lesson: ls.Lesson) -> Path:
    """A NEW file in the operator's save folder, named from the title (-2, -3, ... where that name is taken)."""
    folder = save_folder()
    if folder is None or not folder.is_dir():
        raise ls.LessonError("This server has no folder to save lessons in.")
    base = ls.file_name(lesson.title)[: -len(ls.SUFFIX)]
    for n in range(1, 100):
        path = folder / f"{base if n == 1 else f'{base}-{n}'}{ls.SUFFIX}"
        if not path.exists():
            try:
                return ls.save_lesson(lesson, path)
            except ls.LessonError:
                continue  # taken in between
            except OSError as exc:
                raise ls.LessonError(f"The lesson could not be saved ({exc.strerror or exc}).") from None
    raise ls.LessonError("Too many lessons of this title are saved already; retitle this one to save it.")


# --- the presentations' registry (the presenter tab follows the presenting one) --------------------------------

@dataclass(frozen=True)
class Presenting:
    index: int  # the slide shown, from 0
    presenter: str  # the presentation's id in the registry


class Presentations:
    """Each presentation's lesson and current slide, by a random id; shared by the server's sessions."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.shown: OrderedDict[str, tuple[ls.Lesson, int, float]] = OrderedDict()

    def publish(self, presenter: str, lesson: ls.Lesson, index: int) -> None:
        with self.lock:
            self.shown[presenter] = (lesson, index, time.time())
            self.shown.move_to_end(presenter)
            while len(self.shown) > MAX_PRESENTATIONS:
                self.shown.popitem(last=False)

    def follow(self, presenter: str) -> tuple[ls.Lesson, int] | None:
        with self.lock:
            found = self.shown.get(presenter)
        return None if found is None else found[:2]

    def end(self, presenter: str) -> None:
        with self.lock:
            self.shown.pop(presenter, None)


@st.cache_resource(show_spinner=False)
def presentations() -> Presentations:
    return Presentations()


def publish(presenter: str, lesson: ls.Lesson, index: int) -> None:
    presentations().publish(presenter, lesson, index)


# --- presenting ------------------------------------------------------------------------------------------------

def presenting() -> Presenting | None:
    value = st.session_state.get(PRESENTING)
    return value if isinstance(value, Presenting) else None


def start_presenting(lesson: ls.Lesson, index: int = 0) -> None:
    """From slide `index` (clipped): the slide's page opens (this call does not return)."""
    if not lesson.slides:
        flash("info", "The lesson has no slides yet: add views from the pages first.")
        return
    previous = presenting()
    presenter = previous.presenter if previous else secrets.token_urlsafe(12)
    go_to(lesson, max(0, min(index, len(lesson) - 1)), presenter)


def go_to(lesson: ls.Lesson, index: int, presenter: str) -> None:
    """Slide `index` of the lesson, its `${name}` variables filled in (core.io.lessons: Lesson.resolved)."""
    st.session_state[PRESENTING] = Presenting(index, presenter)
    shown = lesson.resolved()
    publish(presenter, shown, index)
    open_slide(shown.slides[index])


def open_slide(slide: ls.Slide) -> None:
    """The slide's page in its saved state; a page this app lacks: the Lesson page, which says so."""
    page = page_by_name(slide.page)
    if page is None:
        st.switch_page(LESSON_PAGE)
    page_state.forget_all()  # the slide's state alone, as its link opens in a new session
    st.switch_page(page.file, query_params=dict(slide.state))


def end_presenting() -> None:
    if (now := presenting()) is not None:
        presentations().end(now.presenter)
    if st.session_state.pop(PRESENTING, None) is not None:
        st.session_state[SIDEBAR_BACK] = True


# Constant CSS (no user text): the second key of Next and Previous (Page Down, Page Up: what presentation clickers send)
# on buttons nobody sees, and while presenting the page's top padding just clear of Streamlit's header and its title
# smaller, so the bar costs the main figure little height at 1024x768.
BAR_CSS = """<style>
.st-key-present_next_page, .st-key-present_prev_page { display: none; }
.st-key-present_bar { padding: 0.2rem 0.6rem; }
.st-key-present_bar p { margin: 0; }
.st-key-present_bar [data-testid="stMarkdownContainer"], .st-key-present_bar [data-testid="stMarkdown"] > div {
    margin-bottom: 0; }
[data-testid="stMainBlockContainer"] { padding-top: 3.9rem; }
[data-testid="stMain"] h1 { font-size: 2rem; padding: 0.2rem 0 0.4rem 0; }
</style>"""


def present_bar() -> None:
    """While presenting: "3 / 7", the slide's title, Previous / Next (Left, Page Up / Right, Page Down), Back to the
    slide (its saved state again), the presenter's notes link and End. Drawn at the top of every page, one row."""
    now = presenting()
    if now is None:
        return
    lesson = current_lesson()
    if not lesson.slides:
        end_presenting()
        return
    st.set_page_config(initial_sidebar_state="collapsed")  # the projected page: the figure, not the controls
    index = max(0, min(now.index, len(lesson) - 1))
    slide, first, last = lesson.resolved().slides[index], index == 0, index == len(lesson) - 1
    st.html(BAR_CSS)
    with st.container(key="present_bar", border=True, horizontal=True, vertical_alignment="center", gap="small"):
        st.markdown(f"**{index + 1} / {len(lesson)}**", width="content")
        # short enough that the bar stays one row at 1024 px (the presenter view has it whole)
        st.markdown(plain(shortened(slide.heading(index + 1), 34)), width="stretch")
        previous = st.button("Previous", key="present_prev", shortcut="Left", disabled=first,
                             icon=":material/chevron_left:")
        following = st.button("Next", key="present_next", shortcut="Right", disabled=last,
                              icon=":material/chevron_right:", icon_position="right")
        back = st.button("Back to the slide", key="present_back", icon=":material/undo:",
                         help="This slide as saved again (undoes what was typed or picked since).")
        st.link_button("Notes", f"lesson?presenter={now.presenter}", type="tertiary", icon=":material/notes:",
                       help="The presenter view (this slide's notes and the next slide's title), in a new tab.")
        end = st.button("End", key="present_end", type="tertiary", icon=":material/close:")
        previous |= st.button("Previous slide", key="present_prev_page", shortcut="PageUp", disabled=first)
        following |= st.button("Next slide", key="present_next_page", shortcut="PageDown", disabled=last)
    if page_by_name(slide.page) is None:
        st.info(plain(f"Slide {index + 1} shows the page {slide.page!r}, which is not in this app."))
    if end:
        end_presenting()
        st.switch_page(LESSON_PAGE)
    if previous or following:
        go_to(lesson, max(0, min(index + (1 if following else -1), len(lesson) - 1)), now.presenter)
    if back:
        go_to(lesson, index, now.presenter)


def lesson_controls(page_name: str) -> None:
    """What checkpoint_picker draws for lessons on every page: the presenting bar (top of the page) and the
    sidebar's add button. Before the picker's own early returns (no checkpoints), so every page has them."""
    present_bar()
    if st.session_state.pop(SIDEBAR_BACK, False) and presenting() is None:
        st.set_page_config(initial_sidebar_state="expanded")  # once: afterwards the person's own choice holds
    with st.sidebar:
        add_view_button(page_name)


def page_titles() -> dict[str, str]:
    return {page.name: page.title for page in APP_PAGES}
