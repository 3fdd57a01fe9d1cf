"""`python -m ui.handout LESSON.lesson.yaml -o handout.html [--server URL] [--pdf] [--zip] [--checkpoints DIR]
[--allow DIR ...] [--set NAME=VALUE ...]`: a lesson's handout, one self-contained HTML file (core.io.handout writes it).

Every slide is drawn by THE SAME CODE THE PAGE RUNS: its page script runs headlessly under Streamlit's AppTest at
the slide's state (its URL query parameters; ATTENTION_LAB_CHECKPOINTS = --checkpoints), and what the page drew in
its main area (not the sidebar) is read from the element tree in order: charts (the figure JSON the browser would
get), Markdown and captions, tables (the data the page sent), metrics, and the current value of the widgets that
say what is shown (the sentence, the layer). Closed expanders stay closed; of a page's tabs only the one it shows
is kept (Streamlit sends the others' content only when they are lazy). A slide whose page, model or run fails
says in one sentence which, and the others are still drawn.

The issue asks for `python -m core...`; core never imports streamlit and the handout runs the pages, so the
command lives here in ui/. `--pdf` prints the handout with Debian's Chromium (/usr/bin/chromium, or $CHROMIUM,
driven by Playwright), one slide per landscape page after every chart has drawn; `--zip` adds every figure as PNG
and SVG (Plotly.toImage in the same Chromium) and every table as CSV (core.io.tables.table_csv). Without Chromium
one sentence says so and the HTML is still written. Outputs are written atomically, never over the lesson file.
Progress: one line per slide on stderr (`slide n/N title (page): s`; `note: ...`, `error: ...` sentences), which
ui.handout_view reads.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # the page scripts import core and ui
    sys.path.insert(0, str(ROOT))

from core.io.handout import (  # noqa: E402
    CapturedSlide,
    Chart,
    Columns,
    FileHash,
    Handout,
    HandoutError,
    Metric,
    Section,
    Setting,
    Table,
    Text,
    live_link,
    numbered,
    render_html,
    server_url,
    sha256_file,
    table_files,
    write_atomically,
    zip_bytes,
)
from core.io.lessons import Lesson, LessonError, Slide, read_lesson  # noqa: E402

CHECKPOINTS_ENV = "ATTENTION_LAB_CHECKPOINTS"
PAGE_TIMEOUT_S = 180  # one page run on a loaded 2-core box: the slowest page takes seconds
TEXT_ELEMENTS = {"title", "header", "subheader", "markdown", "caption", "text", "code", "latex", "info", "warning",
                 "error", "success"}
# widgets whose value says what the page shows; toggles and checkboxes only when on
SHOWN_WIDGETS = {"text_area", "text_input", "selectbox", "radio", "select_slider", "slider", "number_input",
                 "multiselect", "toggle", "checkbox", "button_group", "date_input", "time_input", "color_picker"}
MAX_SETTING_CHARS = 600
# what a handout leaves out without a word: actions (buttons, links to other pages, uploads) and passing notices
SKIPPED = {"button", "download_button", "form_submit_button", "file_uploader", "page_link", "link_button",
           "progress", "toast", "balloons", "snow", "spinner", "empty", "chat_input", "camera_input", "audio_input",
           "popover", "dialog", "exception"}


# --- reading what a page drew ----------------------------------------------------------------------------

def _children(node) -> list:
    children = getattr(node, "children", None)
    return list(children.values()) if isinstance(children, dict) else []


def _setting(node) -> Setting | None:
    kind = node.type
    proto = node.proto
    label = str(getattr(proto, "label", "") or "")
    try:
        if kind in ("selectbox", "radio"):
            index = node.index
            options = list(proto.options)
            value = options[index] if index is not None and index < len(options) else None
        elif kind == "multiselect":
            options = list(proto.options)
            value = ", ".join(options[i] for i in node.indices if i < len(options)) or None
        elif kind == "button_group":
            value = ", ".join(str(v) for v in node.formatted_values) or None
        elif kind in ("toggle", "checkbox"):
            value = "on" if node.value else None
        else:
            value = node.value
            if isinstance(value, (list, tuple)):
                value = " – ".join(str(v) for v in value)
            if isinstance(value, float):
                value = f"{value:g}"
    except (AttributeError, IndexError, TypeError, ValueError):
        return None
    if value is None or str(value) == "":
        return None
    value = str(value)
    if len(value) > MAX_SETTING_CHARS:
        value = value[:MAX_SETTING_CHARS] + "…"
    return Setting(label or kind.replace("_", " "), value)


def _column_config(proto) -> dict:
    try:
        return json.loads(proto.columns) if proto.columns else {}
    except (ValueError, AttributeError):
        return {}


def _table(node) -> Table | None:
    frame = node.value
    if frame is None:
        return None
    config = _column_config(node.proto) if node.type == "dataframe" else {}
    order = list(getattr(node.proto, "column_order", []) or [])
    columns = [c for c in (order or list(frame.columns)) if c in frame.columns]
    columns = [c for c in columns if not (config.get(str(c)) or {}).get("hidden")]
    frame = frame[columns]
    labels = {c: (config.get(str(c)) or {}).get("label") for c in columns}
    frame = frame.rename(columns={c: label for c, label in labels.items() if label})
    index_hidden = (config.get("_index") or {}).get("hidden")
    import pandas as pd

    plain_index = isinstance(frame.index, pd.RangeIndex) and frame.index.start == 0 and frame.index.step == 1
    return Table(frame.reset_index(drop=True) if plain_index else frame,
                 index=not index_hidden and not plain_index and node.type == "dataframe" or
                 (node.type == "table" and not plain_index))


def _metric(node) -> Metric:
    proto = node.proto
    return Metric(str(proto.label), str(proto.body), str(getattr(proto, "delta", "") or ""))


def read_blocks(nodes: Sequence) -> tuple:
    """The page's main area (AppTest's element tree) as handout blocks, in the order the page shows them."""
    out: list = []
    for node in nodes:
        kind = getattr(node, "type", "")
        if kind == "plotly_chart":
            spec = json.loads(node.proto.spec)
            try:
                config = json.loads(node.proto.config) if node.proto.config else {}
            except ValueError:
                config = {}
            out.append(Chart({"data": spec.get("data") or [], "layout": spec.get("layout") or {},
                              "config": config}))
        elif kind in TEXT_ELEMENTS:
            value = node.value if kind != "code" else node.value
            if value:
                out.append(Text(kind, str(value)))
        elif kind in ("dataframe", "table"):
            table = _table(node)
            if table is not None:
                out.append(table)
        elif kind == "metric":
            out.append(_metric(node))
        elif kind in SHOWN_WIDGETS:
            setting = _setting(node)
            if setting is not None:
                out.append(setting)
        elif kind == "tab_container":
            tabs = _children(node)
            shown = next((t for t in tabs if _children(t)), None)
            if shown is not None:
                out.append(Section("tab", str(shown.label), read_blocks(_children(shown)),
                                   others=tuple(str(t.label) for t in tabs if t is not shown)))
        elif kind == "expander":
            out.append(Section("expander", str(node.proto.label or ""), read_blocks(_children(node)),
                               expanded=bool(node.proto.expanded)))
        elif kind == "divider":
            out.append(Text("markdown", "---"))
        elif kind in SKIPPED:
            continue  # popovers and dialogs are drawn only when someone opens them
        else:
            children = _children(node)
            if not children and not isinstance(getattr(node, "children", None), dict):
                # an element this reader does not turn into HTML (an image, a map...): said, not silently dropped
                what = kind.replace("_", " ") or "element"
                out.append(Text("caption", f"(The page shows {'an' if what[0] in 'aeiou' else 'a'} {what} here; it "
                                           "is not in the handout.)"))
                continue
            if children and all(getattr(c, "type", "") == "column" for c in children):
                columns = tuple((float(getattr(c.proto, "weight", 0) or 1.0), read_blocks(_children(c)))
                                for c in children)
                if all(all(isinstance(b, Setting) for b in inner) for _, inner in columns):
                    out.extend(b for _, inner in columns for b in inner)  # a row of widgets: one line of values
                elif any(inner for _, inner in columns):
                    out.append(Columns(tuple((w, inner) for w, inner in columns)))
            elif children:
                out.extend(read_blocks(children))
    return tuple(out)


# --- running one slide --------------------------------------------------------------------------------------

@dataclass
class Folder:
    """The checkpoints folder the pages read, its models' names (listed once) and their files' hashes."""

    path: Path

    def __post_init__(self) -> None:
        from core.io.checkpoint import list_checkpoints

        self.infos = {i.name: i for i in list_checkpoints(self.path)}
        self._hashes: dict[Path, str] = {}

    def sha256(self, path: Path) -> str | None:
        path = Path(path)
        if path not in self._hashes:
            if path.is_file():
                self._hashes[path] = sha256_file(path)
            elif path.is_dir():  # a Hugging Face folder: its weights, in name order
                import hashlib

                digest = hashlib.sha256()
                for part in sorted(path.glob("*.safetensors")):
                    digest.update(sha256_file(part).encode())
                self._hashes[path] = digest.hexdigest()
            else:
                return None
        return self._hashes[path]


def _data_files(metadata: Mapping) -> tuple[FileHash, ...]:
    """The checkpoint's `data` entry (files with sha256, recorded at training time), checked against the files
    here where they are found (relative to the project)."""
    out = []
    for item in metadata.get("data") or []:
        if not isinstance(item, Mapping) or not item.get("path"):
            continue
        name, recorded = str(item["path"]), str(item.get("sha256") or "") or None
        path = Path(name) if Path(name).is_absolute() else ROOT / name
        if path.is_file() and recorded:
            from core.io.handout import sha256_file as digest

            note = "the file here matches" if digest(path) == recorded else "the file here differs"
        else:
            note = "recorded at training; not found here"
        out.append(FileHash(name, recorded, note))
    return tuple(out)


def named_checkpoints(state: Mapping[str, str], folder: Folder) -> list[str]:
    """The checkpoints of the folder a slide's state names (`model`, a compare view's `vs`, the curves' `runs`, ...):
    every value, and each name of a comma-separated list, that is a checkpoint's name."""
    names: list[str] = []
    for value in state.values():
        for name in dict.fromkeys([value, *(unquote(n) for n in value.split(",") if n)]):
            if name in folder.infos and not folder.infos[name].error and name not in names:
                names.append(name)
    return names


def provenance(slide: Slide, picked, folder: Folder) -> tuple[tuple[FileHash, ...], tuple[FileHash, ...]]:
    """(models, data files) a slide used: the checkpoints its state names, else the sidebar's model (said so, as a
    page may not read it); each with sha256, and the data files their metadata records."""
    names = named_checkpoints(slide.state, folder)
    infos = [folder.infos[n] for n in names]
    note = {}
    if not names and picked is not None:
        infos, note = [picked], {picked.name: "the sidebar's model"}
    models = tuple(FileHash(i.name, folder.sha256(i.path), note.get(i.name, "")) for i in infos)
    data: dict[str, FileHash] = {}
    for info in infos:
        for item in _data_files(info.metadata or {}):
            data.setdefault(item.name, item)
    return models, tuple(data.values())


def capture_slide(number: int, slide: Slide, folder: Folder, server: str | None,
                  timeout_s: float = PAGE_TIMEOUT_S) -> CapturedSlide:
    """Run the slide's page at its state and read what it drew; a problem becomes the slide's one sentence."""
    from ui import page_by_name

    started = time.monotonic()
    base = dict(number=number, title=slide.heading(number), notes=slide.notes, page=slide.page)
    page = page_by_name(slide.page)
    if page is None or not (ROOT / page.file).is_file():
        return CapturedSlide(**base, problem=f"This slide names the page {slide.page!r}, which this app does not "
                                             f"have.")
    base.update(page_title=page.title,
                link=live_link(server, page.url_path, slide.state) if server else None)
    wanted = slide.state.get("model")
    if wanted is not None and (wanted not in folder.infos or folder.infos[wanted].error):
        why = "which is not in" if wanted not in folder.infos else "which cannot be read from"
        return CapturedSlide(**base, models=(FileHash(wanted, None, "not here"),), seconds=time.monotonic() - started,
                             problem=f"This slide names the model {wanted!r}, {why} the checkpoints folder "
                                     f"{folder.path.name!r}.")  # its name: a posted handout shows no home folders
    from streamlit.testing.v1 import AppTest

    try:
        at = AppTest.from_file(str(ROOT / page.file), default_timeout=timeout_s)
        for key, value in slide.state.items():
            at.query_params[key] = value
        at.run()
    except Exception as exc:  # a page that never finishes, or AppTest's own refusal
        return CapturedSlide(**base, seconds=time.monotonic() - started,
                             problem=f"The {page.title} page could not be run for this slide "
                                     f"({type(exc).__name__}: {_first_line(str(exc))}).")
    try:
        info = at.session_state["checkpoint"] if "checkpoint" in at.session_state else None
    except Exception:
        info = None
    models, data = provenance(slide, info, folder)
    if at.exception:
        kind = getattr(at.exception[0].proto, "type", "") or "an exception"
        return CapturedSlide(**base, models=models, data=data, seconds=time.monotonic() - started,
                             problem=f"The {page.title} page stopped with an error for this slide ({kind}; the "
                                     "terminal that made the handout shows the traceback).")
    try:
        blocks = read_blocks(_children(at.main))
    except Exception as exc:  # an element this reader does not know how to read: the slide says so
        return CapturedSlide(**base, models=models, data=data, seconds=time.monotonic() - started,
                             problem=f"What the {page.title} page drew could not be read for this slide "
                                     f"({type(exc).__name__}: {_first_line(str(exc))}).")
    return CapturedSlide(**base, models=models, data=data, blocks=blocks, seconds=time.monotonic() - started)


def _first_line(text: str, limit: int = 200) -> str:
    line = (text or "").strip().splitlines()[0] if (text or "").strip() else "no message"
    return line[:limit] + ("…" if len(line) > limit else "")


def _no_context_warning(record) -> bool:
    return "missing ScriptRunContext" not in record.getMessage()


def _quiet_app_test() -> None:
    """AppTest's "missing ScriptRunContext" warning, one per page run, left out of the progress lines: a filter on
    every Streamlit logger (their levels are reset from Streamlit's config on every run; which module logs it is
    not public)."""
    import logging

    import streamlit.testing.v1  # noqa: F401 - its loggers exist once it is imported

    for name, logger in list(logging.root.manager.loggerDict.items()):
        if name.startswith("streamlit") and isinstance(logger, logging.Logger) \
                and _no_context_warning not in logger.filters:
            logger.addFilter(_no_context_warning)


def capture(lesson: Lesson, checkpoints: Path, server: str | None = None,
            progress: Callable[[int, int, CapturedSlide], None] | None = None,
            allow: Sequence[Path] = ()) -> Handout:
    """Every slide of a (resolved) lesson, its page run with the checkpoints folder `checkpoints`; `allow`: folders
    the pages may read files from besides the operator's (ATTENTION_LAB_ALLOWED_DIRS; the Errors page's test files)."""
    from streamlit import config as st_config

    from core.io.folders import ALLOWED_DIRS_ENV

    _quiet_app_test()
    before = os.environ.get(CHECKPOINTS_ENV)
    before_allowed = os.environ.get(ALLOWED_DIRS_ENV)
    os.environ[CHECKPOINTS_ENV] = str(checkpoints)  # what every page's model picker reads
    if allow:
        os.environ[ALLOWED_DIRS_ENV] = os.pathsep.join([*(str(Path(a)) for a in allow),
                                                        *([before_allowed] if before_allowed else [])])
    # The app shows no error details (.streamlit/config.toml); a slide that fails names its exception's type, and
    # the traceback goes to this command's terminal, not into the handout.
    details = st_config.get_option("client.showErrorDetails")
    st_config.set_option("client.showErrorDetails", "type")
    try:
        folder = Folder(Path(checkpoints))
        slides = []
        for number, slide in enumerate(lesson.slides, 1):
            captured = capture_slide(number, slide, folder, server)
            slides.append(captured)
            if progress is not None:
                progress(number, len(lesson.slides), captured)
    finally:
        st_config.set_option("client.showErrorDetails", details)
        if before is None:
            os.environ.pop(CHECKPOINTS_ENV, None)
        else:
            os.environ[CHECKPOINTS_ENV] = before
        if before_allowed is None:
            os.environ.pop(ALLOWED_DIRS_ENV, None)
        else:
            os.environ[ALLOWED_DIRS_ENV] = before_allowed
    return Handout(title=lesson.title, slides=tuple(slides), server=server, checkpoints=str(checkpoints))


# --- Chromium: the PDF and the figures' images ----------------------------------------------------------------

PRINT_WIDTH_PX, PRINT_HEIGHT_PX = 1047, 700  # A4 landscape less 10 mm margins, in CSS px (96 per inch), a little spare
READY_JS = "() => window.handoutReady === true"
IMAGES_JS = """async (format) => {
  const out = [];
  for (const div of document.querySelectorAll('.chart.js-plotly-plot')) {
    const w = Math.round(div._fullLayout.width), h = Math.round(div._fullLayout.height);
    out.push([div.id, await Plotly.toImage(div, {format: format, width: w, height: h})]);
  }
  return out;
}"""


def chromium_path() -> str:
    return os.environ.get("CHROMIUM", "/usr/bin/chromium")


def chromium_missing() -> str | None:
    """One sentence when this machine cannot print (no Chromium, or no Playwright), else None."""
    path = chromium_path()
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        return f"No Chromium at {path} (apt-get install chromium, or set CHROMIUM), so no PDF or images were made."
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "Playwright is not installed (pip install playwright), so no PDF or images were made."
    return None


def _data_url(url: str) -> bytes:
    head, _, body = url.partition(",")
    return base64.b64decode(body) if head.endswith(";base64") else unquote(body).encode("utf-8")


def print_handout(html_path: Path, pdf: bool, images: bool, timeout_s: float = 120) -> tuple[bytes | None, dict]:
    """(PDF bytes or None, {chart div id: {"png": bytes, "svg": bytes}}) from the handout file in Chromium."""
    from playwright.sync_api import sync_playwright

    args = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
            "--disable-sync"]
    shots: dict[str, dict[str, bytes]] = {}
    pdf_bytes = None
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_path(), args=args)
        try:
            page = browser.new_page(viewport={"width": PRINT_WIDTH_PX, "height": PRINT_HEIGHT_PX})
            url = Path(html_path).resolve().as_uri()
            page.route("**/*", lambda route: route.continue_() if route.request.url == url else route.abort())
            page.goto(url, wait_until="load", timeout=int(timeout_s * 1000))
            page.wait_for_function(READY_JS, timeout=int(timeout_s * 1000))
            if images:
                for fmt in ("png", "svg"):
                    for div, data in page.evaluate(IMAGES_JS, fmt):
                        shots.setdefault(div, {})[fmt] = _data_url(data)
            if pdf:
                page.emulate_media(media="print")
                page.evaluate(f"async () => await window.fitForPrint({PRINT_WIDTH_PX}, {PRINT_HEIGHT_PX})")
                page.wait_for_timeout(300)
                pdf_bytes = page.pdf(landscape=True, print_background=True, format="A4", prefer_css_page_size=True,
                                     margin={"top": "10mm", "bottom": "10mm", "left": "10mm", "right": "10mm"})
        finally:
            browser.close()
    return pdf_bytes, shots


def zip_files(handout: Handout, shots: Mapping[str, Mapping[str, bytes]], html_text: str) -> dict[str, bytes | str]:
    """handout.html, slide-NN-figure-MM.png/.svg (chart div ids chart-NN-MM, in order) and slide-NN-table-MM.csv."""
    files: dict[str, bytes | str] = {"handout.html": html_text}
    for slide in handout.slides:
        if slide.problem:
            continue
        for n, (stem, _) in enumerate(numbered(slide, Chart), 1):
            for fmt, data in shots.get(f"chart-{slide.number:02d}-{n:02d}", {}).items():
                files[f"{stem}.{fmt}"] = data
    files.update({name: text for name, text in table_files(handout).items()
                  if not next(s for s in handout.slides if name.startswith(f"slide-{s.number:02d}-")).problem})
    return files


# --- the command ----------------------------------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m ui.handout", description=__doc__.split("\n\n")[0])
    parser.add_argument("lesson", type=Path, help="the lesson file (*.lesson.yaml)")
    parser.add_argument("-o", "--output", type=Path, required=True, help="the handout's HTML file")
    parser.add_argument("--server", help="the server the live links open, e.g. http://host:8501")
    parser.add_argument("--pdf", action="store_true", help="also a PDF beside it (Chromium)")
    parser.add_argument("--zip", action="store_true", help="also a zip of every figure (PNG, SVG) and table (CSV)")
    parser.add_argument("--checkpoints", type=Path, help="the checkpoints folder the pages read "
                                                         f"(default ${CHECKPOINTS_ENV} or checkpoints/)")
    parser.add_argument("--allow", action="append", default=[], type=Path, metavar="FOLDER",
                        help="a folder the pages may read files from, e.g. your test files (repeatable)")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="a value for the lesson's ${NAME} (repeatable)")
    return parser


def _overrides(pairs: Sequence[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name.strip():
            raise HandoutError(f"--set {pair!r} must be NAME=VALUE.")
        out[name.strip()] = value
    return out


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def make_handout(lesson_path: Path, output: Path, *, server: str | None = None, pdf: bool = False,
                 want_zip: bool = False, checkpoints: Path | None = None, overrides: Mapping[str, str] = (),
                 progress: Callable[[int, int, CapturedSlide], None] | None = None,
                 allow: Sequence[Path] = ()) -> dict[str, Path]:
    """The command's work: the files written, by kind ("html", "pdf", "zip"). `allow`: folders the pages may read
    files from (the command's --allow)."""
    from core.io.checkpoint import checkpoint_dir

    lesson_path, output = Path(lesson_path), Path(output)
    server = server_url(server) if server else None
    if output.suffix.lower() not in (".html", ".htm"):
        raise HandoutError(f"The output {output.name} must end in .html.")
    outputs = {"html": output, **({"pdf": output.with_suffix(".pdf")} if pdf else {}),
               **({"zip": output.with_suffix(".zip")} if want_zip else {})}
    for path in outputs.values():
        if lesson_path.exists() and path.exists() and path.resolve() == lesson_path.resolve():
            raise HandoutError(f"{path.name} is the lesson file itself; the handout is never written over it.")
    lesson = read_lesson(lesson_path).resolved(dict(overrides))
    if not lesson.slides:
        raise HandoutError(f"The lesson {lesson_path.name} has no slides.")
    folder = Path(checkpoints) if checkpoints else checkpoint_dir()
    for path in allow:
        if not Path(path).is_dir():
            raise HandoutError(f"--allow {str(path)!r} is not a folder.")
    handout = capture(lesson, folder, server, progress, allow=allow)
    text = render_html(handout)
    written = {"html": write_atomically(output, text.encode("utf-8"), never_over=[lesson_path])}
    if pdf or want_zip:
        missing = chromium_missing()
        pdf_bytes, shots = (None, {})
        if missing:
            say(f"note: {missing}")
        else:
            started = time.monotonic()
            try:
                pdf_bytes, shots = print_handout(output, pdf=pdf, images=want_zip)
                say(f"chromium: {'PDF' if pdf else ''}{' and ' if pdf and want_zip else ''}"
                    f"{'images' if want_zip else ''} in {time.monotonic() - started:.1f} s")
            except Exception as exc:  # Playwright's errors (a crash, a timeout): the HTML is written already
                say(f"note: Chromium could not print the handout ({type(exc).__name__}: "
                    f"{_first_line(str(exc), 160)}), so no PDF or images were made; the HTML is written.")
        if pdf and pdf_bytes is not None:
            written["pdf"] = write_atomically(outputs["pdf"], pdf_bytes, never_over=[lesson_path])
        if want_zip:
            written["zip"] = write_atomically(outputs["zip"], zip_bytes(zip_files(handout, shots, text)),
                                              never_over=[lesson_path])
    return written


def _progress(number: int, total: int, slide: CapturedSlide) -> None:
    state = f" — {slide.problem}" if slide.problem else ""
    say(f"slide {number}/{total} {slide.title} ({slide.page}): {slide.seconds:.1f} s{state}")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        written = make_handout(args.lesson, args.output, server=args.server, pdf=args.pdf, want_zip=args.zip,
                               checkpoints=args.checkpoints, overrides=_overrides(args.set), progress=_progress,
                               allow=args.allow)
    except (HandoutError, LessonError) as exc:
        say(f"error: {exc}")
        return 2
    except OSError as exc:  # a folder that cannot be written, a full disk
        say(f"error: {Path(exc.filename).name if exc.filename else 'A file'} could not be written "
            f"({exc.strerror or exc}).")
        return 2
    for kind, path in written.items():
        say(f"wrote {kind}: {path} ({path.stat().st_size / 1e6:.2f} MB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
