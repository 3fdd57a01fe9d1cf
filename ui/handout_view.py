"""The Lesson page's "Hand it out" part (`handout_section(lesson)`): a button that makes the lesson's handout, with
its progress, and download buttons for the HTML, the PDF and the zip. Not a page.

The handout runs every slide's page under Streamlit's AppTest, which must not happen inside the live server, so it
runs as its own process, `python -m ui.handout` (as core.train.job runs training): the lesson saved to a temporary
folder, the process's stderr read line by line for its progress (`slide n/N ...`), its files read back once it
ends and the folder removed. A bad server URL is one sentence and starts nothing.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import streamlit as st

from core.io import folders
from core.io.handout import HandoutError, server_url
from core.io.lessons import Lesson, file_name, save_lesson

ROOT = Path(__file__).resolve().parent.parent
PROGRESS = re.compile(r"^slide (\d+)/(\d+) (.*)$")
NOT_DRAWN = re.compile(r"^slide (\d+)/\d+ (.*) \([a-z0-9_]+\): [\d.]+ s — (.*)$")  # a slide's one sentence
TIMEOUT_S = 900  # a lesson of 100 slides on a busy 2-core box; the process is ended past this
KINDS = {"html": ("HTML", "text/html"), "pdf": ("PDF", "application/pdf"), "zip": ("Figures and tables (zip)",
                                                                                   "application/zip")}


@dataclass
class Made:
    files: dict[str, bytes] = field(default_factory=dict)  # kind -> content
    notes: list[str] = field(default_factory=list)  # sentences the command said (no Chromium, a slide not drawn)
    error: str | None = None


def _command(lesson_path: Path, out: Path, server: str | None) -> list[str]:
    from core.io.checkpoint import checkpoint_dir

    command = [sys.executable, "-m", "ui.handout", str(lesson_path), "-o", str(out), "--pdf", "--zip",
               "--checkpoints", str(checkpoint_dir())]
    return command + (["--server", server] if server else [])


def make_in_process(lesson: Lesson, server: str | None, on_line=None, timeout_s: float = TIMEOUT_S,
                    anywhere: bool = False) -> Made:
    """Run `python -m ui.handout` on `lesson` in its own process; `on_line(text)` for each line it writes.
    `anywhere`: the browser that asked may have the pages read any folder of this machine (it is on this machine,
    folders.any_folder_allowed); else the process may read only the operator's allowed folders, whatever folder a
    slide of an uploaded lesson names (the pages run there see no browser, so they would take it as local)."""
    folder = Path(tempfile.mkdtemp(prefix="attention-lab-handout-"))
    made = Made()
    process = None
    try:
        path = save_lesson(lesson, folder / "lesson.lesson.yaml")
        out = folder / "handout.html"
        env = {**os.environ, **({} if anywhere else {folders.ANY_FOLDER_ENV: "0"})}
        process = subprocess.Popen(_command(path, out, server), cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE, text=True, encoding="utf-8", errors="replace",
                                   start_new_session=True)
        deadline = time.monotonic() + timeout_s
        lines = []
        assert process.stderr is not None
        for line in process.stderr:
            line = line.rstrip("\n")
            lines.append(line)
            if on_line is not None:
                on_line(line)
            if time.monotonic() > deadline:
                os.killpg(process.pid, signal.SIGKILL)
                made.error = f"Making the handout took longer than {timeout_s / 60:.0f} minutes and was stopped."
                break
        process.wait(timeout=30)
        errors = [line[len("error: "):] for line in lines if line.startswith("error: ")]
        if made.error is None and (process.returncode != 0 or errors):
            made.error = errors[-1] if errors else f"Making the handout failed (exit status {process.returncode})."
        made.notes = [line[len("note: "):] for line in lines if line.startswith("note: ")]
        made.notes += [f"Slide {m.group(1)} ({m.group(2)}): {m.group(3)}" for m in map(NOT_DRAWN.match, lines) if m]
        for kind in KINDS:
            produced = out.with_suffix(f".{kind}")
            if made.error is None and produced.is_file():
                made.files[kind] = produced.read_bytes()
    finally:  # also when the page's run is stopped midway (a click reruns it): the process goes with it
        if process is not None and process.poll() is None:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            process.wait(timeout=10)
        shutil.rmtree(folder, ignore_errors=True)
    return made


def handout_section(lesson: Lesson, key: str = "handout") -> None:
    """Draw "Make the handout" for `lesson` (the Lesson page's lesson as it stands, edits included)."""
    st.subheader("Hand it out")
    st.caption("One HTML file that opens anywhere without a network: every slide drawn by its page, its notes, "
               "the model and data it used, and a link back to the live view. Also a PDF (one slide per page) and "
               "a zip of every figure (PNG, SVG) and table (CSV).")
    typed = st.text_input("Server for the live links (optional)", key=f"{key}_server",
                          placeholder="http://host:8501")
    stem = file_name(lesson.title).removesuffix(".lesson.yaml")
    if st.button("Make the handout", key=f"{key}_make", disabled=not lesson.slides, type="primary"):
        try:
            server = server_url(typed) if typed.strip() else None
        except HandoutError as exc:
            st.error(str(exc))
            server = False
        if server is not False:
            st.session_state.pop(f"{key}_made", None)
            with st.status(f"Making the handout of {len(lesson.slides)} slides…", expanded=True) as status:
                bar = st.progress(0.0, text="Starting…")

                def on_line(line: str) -> None:
                    found = PROGRESS.match(line)
                    if found:
                        done, total = int(found.group(1)), int(found.group(2))
                        bar.progress(done / max(total, 1), text=f"Slide {done} of {total}: {found.group(3)}")
                    elif line.startswith("chromium: ") or line.startswith("wrote "):
                        bar.progress(1.0, text="Printing the PDF and the figures…" if "chromium" in line
                                     else "Written.")

                made = make_in_process(lesson, server, on_line,
                                       anywhere=folders.any_folder_allowed(client_ip=st.context.ip_address))
                if made.error:
                    status.update(label="The handout could not be made.", state="error")
                else:
                    status.update(label="Handout made.", state="complete", expanded=False)
            st.session_state[f"{key}_made"] = made
    made = st.session_state.get(f"{key}_made")
    if made is None:
        return
    if made.error:
        st.error(made.error)
        return
    for note in made.notes:
        st.info(note)
    columns = st.columns(len(KINDS))
    for column, (kind, (label, mime)) in zip(columns, KINDS.items(), strict=True):
        if kind in made.files:
            column.download_button(f"Download {label}", made.files[kind], file_name=f"{stem}-handout.{kind}",
                                   mime=mime, key=f"{key}_download_{kind}", on_click="ignore")
