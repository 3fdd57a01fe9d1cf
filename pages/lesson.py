"""Lesson: the views kept with "Add this view to the lesson" (every page's sidebar), as slides to reorder, retitle,
annotate, save as a file and present.

Storyboard: the presenter view (`?presenter=<id>`: another tab's presentation, followed every second) or the lesson
of this session (ui.lesson_session) -> its title, Present, its slides (each: open, move, duplicate, delete, title and
notes) -> download / save on the server / open a lesson (an upload, or a file the server offers, by name; a link
`?lesson=<name>&slide=<n>` opens one and presents it). A lesson opened from a file is never written over: editing
makes a new value, saving on the server makes a new file. Titles, notes and state are shown as text only.
"""

from __future__ import annotations

import streamlit as st

from core.io import lessons as ls
from core.text import markdown_escape as plain
from core.text import shortened
from ui import lesson_session as session
from ui import page_by_name
from ui.handout_view import handout_section
from ui.model_picker import PageModels, checkpoint_picker
from ui.page_state import DIGITS, link_text


def widget(what: str, index: int | None = None) -> str:
    """A slide's widget key: new for every version of the lesson, so a moved slide's widgets hold its own values."""
    version = st.session_state.get(session.LESSON_VERSION, 0)
    return f"lesson_{what}_{version}" + ("" if index is None else f"_{index}")


def change(edit, *args, **kwargs) -> None:
    """A callback: the lesson edited by `edit` (core.io.lessons), or its refusal as one sentence."""
    try:
        session.set_lesson(edit(session.current_lesson(), *args, **kwargs),
                           renumber=edit not in (ls.edited, ls.retitled))  # typed text: the same boxes
    except ls.LessonError as exc:
        session.flash("warning", str(exc))


def retitle_lesson(key: str) -> None:
    change(ls.retitled, st.session_state.get(key, ""))


def edit_slide(index: int, field: str, key: str) -> None:
    change(ls.edited, index, **{field: st.session_state.get(key, "")})


def opened_upload(key: str) -> None:
    """The uploader's callback: the uploaded lesson replaces this one only when it reads."""
    uploaded = st.session_state.get(key)
    if uploaded is None:
        return
    try:
        lesson = ls.parse_lesson(uploaded.getvalue())
    except ls.LessonError as exc:
        session.flash("warning", f"{exc} The lesson you had is kept.")
        return
    session.set_lesson(lesson, source=None, keep_source=False)
    session.flash("success", f"Opened '{lesson.title}' ({len(lesson)} slides).")


def opened_file(name: str | None) -> ls.Lesson | None:
    """A lesson the server offers, by name; None and a sentence when there is none or it does not read."""
    path = session.offered_lessons().get(name or "")
    if path is None:
        session.flash("warning", f"There is no lesson named {name!r} on this server.")
        return None
    try:
        lesson = ls.read_lesson(path)
    except ls.LessonError as exc:
        session.flash("warning", f"{exc} The lesson you had is kept.")
        return None
    session.set_lesson(lesson, source=name, keep_source=False)
    return lesson


def open_picked(key: str) -> None:
    if (lesson := opened_file(st.session_state.get(key))) is not None:
        session.flash("success", f"Opened '{lesson.title}' ({len(lesson)} slides).")


def save_here() -> None:
    try:
        path = session.save_on_server(session.current_lesson())
    except ls.LessonError as exc:
        session.flash("warning", str(exc))
        return
    session.flash("success", f"Saved on the server as {path.name}.")


def state_summary(state: dict[str, str]) -> str:
    return shortened(", ".join(f"{k}={shortened(' '.join(v.split()), 40)}" for k, v in state.items()) or
                     "(the page's defaults)", 200)


@st.fragment(run_every=1)
def presenter_view(presenter: str) -> None:
    """Another tab's presentation, followed every second: this slide's number, title and notes, the next title."""
    found = session.presentations().follow(presenter)
    if found is None:
        st.info("This presentation has ended, or was started on another server.")
        return
    lesson, index = found
    slide = lesson.slides[index]
    st.markdown(f"**{index + 1} / {len(lesson)}** " + plain(slide.heading(index + 1)))
    st.caption(plain(f"{session.page_titles().get(slide.page, slide.page)} · {lesson.title}"))
    if slide.notes:
        st.text(slide.notes)
    else:
        st.caption("No notes for this slide.")
    if index + 1 < len(lesson):
        st.markdown("Next: " + plain(lesson.slides[index + 1].heading(index + 2)))
    else:
        st.caption("This is the last slide.")


checkpoint_picker(PageModels("lesson"))

presenter = st.query_params.get("presenter")
if presenter is not None:
    st.title("Presenter view")
    if session.PRESENTER_ID.fullmatch(presenter):
        presenter_view(presenter)
    else:
        st.warning("This presenter link is not valid; open it again from the presenting tab.")
    st.stop()

if (linked := st.query_params.get("lesson")) is not None:  # ?lesson=<name>&slide=<n>: open it and present
    number = st.query_params.get("slide", "1")
    for key in ("lesson", "slide"):
        st.query_params.pop(key, None)
    if (lesson := opened_file(linked[:200])) is not None:
        session.start_presenting(lesson, int(number) - 1 if DIGITS.fullmatch(number) else 0)

st.title("Lesson")
session.show_flash()
lesson = session.current_lesson()
if session.presenting() is None:
    st.caption("Add views with the button at the top of any page's sidebar; each keeps that page exactly as it was. "
               "Present steps through them: Right or Page Down for the next slide, Left or Page Up for the previous.")

top = st.columns([4, 1], vertical_alignment="bottom")
top[0].text_input("Title", value=lesson.title, key=widget("title"), on_change=retitle_lesson,
                  args=(widget("title"),), max_chars=ls.MAX_TITLE_CHARS)
if top[1].button("Present", key="lesson_present", type="primary", icon=":material/slideshow:",
                 disabled=not lesson.slides, width="stretch"):
    session.start_presenting(lesson, 0)
source = st.session_state.get(session.LESSON_SOURCE)
if source:
    st.caption(plain(f"Opened from the lesson file {source!r} (never written over). This page's address followed by "
                     f"this opens it and presents it from slide 1 (another number: another slide):"))
    st.code("?" + link_text("lesson", {"lesson": source, "slide": "1"}).split("?", 1)[1], language=None)

if not lesson.slides:
    offered = sorted(session.offered_lessons())
    st.info("No slides yet: open a page, set it up, and click \"Add this view to the lesson\" in its sidebar"
            + (plain(f"; or open a lesson of this server under \"Save and open\" ({', '.join(offered[:6])}).")
               if offered else "."))
for index, slide in enumerate(lesson.slides):
    page = page_by_name(slide.page)
    with st.container(border=True, key=widget("slide", index)):
        st.markdown(f"**{index + 1}.** " + plain(slide.heading(index + 1)) + " · "
                    + plain(page.title if page else slide.page))
        with st.container(horizontal=True, gap="small"):  # one row at 1024 px beside the sidebar: no icons
            if st.button("Open", key=widget("open", index), disabled=page is None,
                         help="This page in the slide's state."):
                session.open_slide(lesson.resolved().slides[index])  # its ${name} variables filled in
            if st.button("From here", key=widget("present", index), disabled=page is None,
                         help="Present the lesson from this slide."):
                session.start_presenting(lesson, index)
            st.button("Up", key=widget("up", index), disabled=index == 0,
                      on_click=change, args=(ls.moved, index, index - 1))
            st.button("Down", key=widget("down", index), disabled=index == len(lesson) - 1,
                      on_click=change, args=(ls.moved, index, index + 1))
            st.button("Duplicate", key=widget("duplicate", index), on_click=change, args=(ls.duplicated, index))
            st.button("Delete", key=widget("delete", index), on_click=change, args=(ls.removed, index))
        st.caption(plain(state_summary(slide.state)))
        if page is None:
            st.info(plain(f"This slide shows the page {slide.page!r}, which is not in this app: it cannot be "
                          f"opened here."))
        if slide.notes:
            st.text(slide.notes)
        with st.expander("Title and notes"):
            st.text_input("Slide title", value=slide.title, key=widget("slide_title", index),
                          max_chars=ls.MAX_TITLE_CHARS, on_change=edit_slide,
                          args=(index, "title", widget("slide_title", index)))
            st.text_area("Notes (for the presenter; shown as plain text)", value=slide.notes,
                         key=widget("notes", index), max_chars=ls.MAX_NOTES_CHARS, on_change=edit_slide,
                         args=(index, "notes", widget("notes", index)))

st.subheader("Save and open")
files = st.columns(2)
with files[0]:
    st.download_button("Download the lesson", data=ls.dump_lesson(lesson), file_name=ls.file_name(lesson.title),
                       mime="application/yaml", on_click="ignore", icon=":material/download:",
                       disabled=not lesson.slides)
    if session.save_folder() is not None:
        st.button("Save on the server", key="lesson_save", on_click=save_here, disabled=not lesson.slides,
                  help="Writes a new lesson file in the folder this server keeps lessons in; never over a file.")
with files[1]:
    upload_key = "lesson_upload"
    st.file_uploader("Open a lesson file", type=["yaml", "yml"], key=upload_key, on_change=opened_upload,
                     args=(upload_key,), max_upload_size=1,  # MB, the limit the widget states (a lesson: 256 KB)
                     help=f"A .lesson.yaml file (at most {ls.MAX_LESSON_BYTES // 1000} KB); it replaces the lesson "
                          "above only if it reads.")
    offered = sorted(session.offered_lessons())
    if offered:
        pick = st.columns([3, 1], vertical_alignment="bottom")
        pick[0].selectbox("Or a lesson on this server", offered, key="lesson_pick")
        pick[1].button("Open", key="lesson_open_file", on_click=open_picked, args=("lesson_pick",),
                       width="stretch")

if lesson.slides:
    handout_section(lesson)  # Hand it out: HTML, PDF and a zip of figures and tables, made in their own process
