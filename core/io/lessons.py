"""A lesson: an ordered list of slides, each one page's state exactly as its URL says, with a title and notes.

The file is small, human-readable YAML that a teacher edits by hand and keeps in a course repository:

    lesson: 1                      # the format's version (a newer one is refused with one sentence)
    title: Five minutes in front of a class
    variables:                     # optional: ${name} in any slide's title, notes or state is replaced by these
      model: lm-learned            #   (the write-up lesson: `--set model=my-checkpoint` on the command line)
    slides:
    - title: Heads that look at different things
      page: attention              # the page's name in the app's URL (attention, positional, curves, probe, ...)
      state:                       # the page's URL query parameters, as the page writes them (ui/page_state.py)
        model: ${model}
        text: The cat sat on the mat .
        view: model
      notes: |
        Plain text or Markdown, always shown as text (never as HTML).

Reading never unpickles or evaluates anything (`yaml.safe_load` on at most MAX_LESSON_BYTES), and every refusal is
one sentence (`LessonError`). A lesson is a frozen value: the editing functions return a new one, so a lesson opened
from a file is never written over; saving is the caller's choice of a new file (`save_lesson`, atomic).
"""

from __future__ import annotations

import os
import re
import string
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

import yaml

VERSION = 1  # the format this code writes and the newest it reads
SUFFIX = ".lesson.yaml"
MAX_LESSON_BYTES = 256_000  # a lesson is text a person writes: far below this
MAX_SLIDES = 100
MAX_TITLE_CHARS = 200
MAX_NOTES_CHARS = 20_000
MAX_VALUE_CHARS = 4_000  # one URL parameter (ui.page_state.MAX_URL_TEXT)
MAX_STATE_KEYS = 64
PAGE_NAME = re.compile(r"[a-z][a-z0-9_]{0,39}")
STATE_KEY = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,39}")
VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,39}")


class LessonError(ValueError):
    """A lesson file or value this code does not accept; its message is one sentence for the person."""


@dataclass(frozen=True)
class Slide:
    """One view: `page` (its name in the app's URL), `state` (its query parameters, strings), a title and notes."""

    page: str
    state: Mapping[str, str] = field(default_factory=dict)
    title: str = ""
    notes: str = ""

    def __post_init__(self) -> None:  # a plain dict, whatever was given (frozen: set through object)
        object.__setattr__(self, "state", dict(self.state))

    def heading(self, number: int) -> str:
        return self.title or f"Slide {number}: {self.page}"


@dataclass(frozen=True)
class Lesson:
    title: str = "Untitled lesson"
    slides: tuple[Slide, ...] = ()
    variables: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "slides", tuple(self.slides))
        object.__setattr__(self, "variables", dict(self.variables))

    def __len__(self) -> int:
        return len(self.slides)

    def resolved(self, overrides: Mapping[str, str] | None = None) -> Lesson:
        """The lesson with every `${name}` replaced by its variable (`overrides` win; an unknown name is left
        as written, so the slide that uses it says what it could not find)."""
        values = {**self.variables, **(overrides or {})}
        if not values:
            return self

        def sub(text: str) -> str:
            return string.Template(text).safe_substitute(values)

        slides = tuple(replace(s, title=sub(s.title), notes=sub(s.notes),
                               state={k: sub(v) for k, v in s.state.items()}) for s in self.slides)
        return Lesson(title=sub(self.title), slides=slides, variables=values)


# --- editing: each returns a new lesson ---------------------------------------------------------------------

def _index(lesson: Lesson, index: int) -> int:
    if not 0 <= index < len(lesson.slides):
        raise LessonError(f"The lesson has no slide {index + 1} (it has {len(lesson.slides)}).")
    return index


def added(lesson: Lesson, slide: Slide, at: int | None = None) -> Lesson:
    if len(lesson.slides) >= MAX_SLIDES:
        raise LessonError(f"A lesson holds at most {MAX_SLIDES} slides; this one is full.")
    slide = _checked_slide(slide.page, slide.state, slide.title, slide.notes, len(lesson.slides) + 1)
    slides = list(lesson.slides)
    slides.insert(len(slides) if at is None else max(0, min(at, len(slides))), slide)
    return replace(lesson, slides=tuple(slides))


def removed(lesson: Lesson, index: int) -> Lesson:
    slides = list(lesson.slides)
    del slides[_index(lesson, index)]
    return replace(lesson, slides=tuple(slides))


def duplicated(lesson: Lesson, index: int) -> Lesson:
    return added(lesson, lesson.slides[_index(lesson, index)], at=index + 1)


def moved(lesson: Lesson, index: int, to: int) -> Lesson:
    """Slide `index` put at position `to` (clipped to the lesson)."""
    slides = list(lesson.slides)
    slide = slides.pop(_index(lesson, index))
    slides.insert(max(0, min(to, len(slides))), slide)
    return replace(lesson, slides=tuple(slides))


def edited(lesson: Lesson, index: int, *, title: str | None = None, notes: str | None = None) -> Lesson:
    old = lesson.slides[_index(lesson, index)]
    new = _checked_slide(old.page, old.state, old.title if title is None else title,
                         old.notes if notes is None else notes, index + 1)
    slides = list(lesson.slides)
    slides[index] = new
    return replace(lesson, slides=tuple(slides))


def retitled(lesson: Lesson, title: str) -> Lesson:
    return replace(lesson, title=_text(title, MAX_TITLE_CHARS, "The lesson's title") or "Untitled lesson")


# --- reading and writing ------------------------------------------------------------------------------------

def _text(value, limit: int, what: str) -> str:
    if value is None:
        return ""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise LessonError(f"{what} must be text.")
    value = str(value)
    if len(value) > limit:
        raise LessonError(f"{what} has {len(value):,} characters; at most {limit:,} are allowed.")
    return value


def _checked_slide(page, state, title, notes, number: int) -> Slide:
    where = f"Slide {number}"
    if not isinstance(page, str) or not PAGE_NAME.fullmatch(page):
        raise LessonError(f"{where} names no page (write `page: attention`, `page: curves`, ...).")
    if state is None:
        state = {}
    if not isinstance(state, Mapping):
        raise LessonError(f"{where}'s state must be a list of `name: value` lines.")
    if len(state) > MAX_STATE_KEYS:
        raise LessonError(f"{where}'s state has {len(state)} values; at most {MAX_STATE_KEYS} are allowed.")
    values = {}
    for key, value in state.items():
        if not isinstance(key, str) or not STATE_KEY.fullmatch(key):
            raise LessonError(f"{where}'s state has a name that is not a URL parameter: {str(key)[:40]!r}.")
        if isinstance(value, bool):  # YAML reads `yes`/`true` as booleans: the URL writes flags as 1/0
            value = "1" if value else "0"
        values[key] = _text(value, MAX_VALUE_CHARS, f"{where}'s value {key!r}")
    return Slide(page=page, state=values, title=_text(title, MAX_TITLE_CHARS, f"{where}'s title"),
                 notes=_text(notes, MAX_NOTES_CHARS, f"{where}'s notes"))


def parse_lesson(data: bytes | str) -> Lesson:
    """A lesson file's bytes -> Lesson, or LessonError with one sentence saying what is wrong."""
    raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    if len(raw) > MAX_LESSON_BYTES:
        raise LessonError(f"This lesson file is {len(raw):,} bytes; a lesson is at most {MAX_LESSON_BYTES:,}.")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise LessonError("This is not a lesson file: it is not UTF-8 text.") from None
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise LessonError(f"This is not a lesson file: it is not valid YAML{where}.") from None
    if not isinstance(document, dict) or "slides" not in document:
        raise LessonError("This is not a lesson file: it has no `slides:` list.")
    version = document.get("lesson", VERSION)
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise LessonError("This lesson file's `lesson:` version must be a whole number (1).")
    if version > VERSION:
        raise LessonError(f"This lesson was written by a newer Attention Lab (format {version}; this one reads "
                          f"format {VERSION} and older).")
    slides = document.get("slides") or []
    if not isinstance(slides, list):
        raise LessonError("This lesson file's `slides:` must be a list.")
    if len(slides) > MAX_SLIDES:
        raise LessonError(f"This lesson has {len(slides)} slides; at most {MAX_SLIDES} are allowed.")
    variables = document.get("variables") or {}
    if not isinstance(variables, dict) or not all(isinstance(k, str) and VARIABLE.fullmatch(k) for k in variables):
        raise LessonError("This lesson file's `variables:` must be `name: value` lines.")
    variables = {k: _text(v, MAX_VALUE_CHARS, f"The variable {k!r}") for k, v in variables.items()}
    out = []
    for number, slide in enumerate(slides, 1):
        if not isinstance(slide, dict):
            raise LessonError(f"Slide {number} must be a list of `name: value` lines (page, state, title, notes).")
        out.append(_checked_slide(slide.get("page"), slide.get("state"), slide.get("title"), slide.get("notes"),
                                  number))
    title = _text(document.get("title"), MAX_TITLE_CHARS, "The lesson's title") or "Untitled lesson"
    return Lesson(title=title, slides=tuple(out), variables=variables)


class _Dumper(yaml.SafeDumper):
    """Multi-line text (notes) written as a `|` block a person can edit."""


def _text_representer(dumper: yaml.SafeDumper, value: str):
    style = "|" if "\n" in value and not any(c in value for c in "\r\t") and value == value.rstrip(" ") else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _text_representer)


def dump_lesson(lesson: Lesson) -> str:
    document: dict = {"lesson": VERSION, "title": lesson.title}
    if lesson.variables:
        document["variables"] = dict(lesson.variables)
    document["slides"] = [{"title": s.title, "page": s.page, "state": dict(s.state),
                           **({"notes": s.notes} if s.notes else {})} for s in lesson.slides]
    header = "# An Attention Lab lesson (python -m ui.handout FILE -o handout.html makes its handout)\n"
    return header + yaml.dump(document, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100)


def read_lesson(path: Path) -> Lesson:
    """A lesson file on disk (at most MAX_LESSON_BYTES read)."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_LESSON_BYTES + 1)
    except OSError as exc:
        raise LessonError(f"The lesson file {Path(path).name!r} cannot be read ({exc.strerror or exc}).") from None
    return parse_lesson(data)


def save_lesson(lesson: Lesson, path: Path, overwrite: bool = False) -> Path:
    """Written atomically (a temporary file renamed), and never over an existing file unless `overwrite`."""
    path = Path(path)
    if path.exists() and not overwrite:
        raise LessonError(f"{path.name} exists already; the lesson was not written over it.")
    text = dump_lesson(lesson)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".lesson-", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return path


def lesson_name(path: Path) -> str:
    name = Path(path).name
    return name[: -len(SUFFIX)] if name.endswith(SUFFIX) else Path(path).stem


def lesson_files(folders: Iterable[Path]) -> dict[str, Path]:
    """The lesson files (`*.lesson.yaml`) directly in these folders, by name (the first folder wins a name)."""
    found: dict[str, Path] = {}
    for folder in folders:
        try:
            paths = sorted(Path(folder).glob(f"*{SUFFIX}"))
        except OSError:
            continue
        for path in paths:
            if path.is_file():
                found.setdefault(lesson_name(path), path)
    return found


def file_name(title: str) -> str:
    """A file name for a lesson's download, from its title."""
    stem = re.sub(r"[^A-Za-z0-9]+", "-", title).strip("-").lower()[:60] or "lesson"
    return stem + SUFFIX

