"""The handout of a lesson of >= 6 slides over the bundled checkpoints (issue 60, part 4): how long the HTML and the
PDF take and how large the HTML is, each command run in its own process as an author runs it.

    python -m bench.handout [--lesson FILE] [--checkpoints DIR] [--keep DIR]

The lesson: lessons/tour.lesson.yaml where this tree has it, else the six slides below (attention's model view,
positional, curves, probe with an invented name, errors, playground). Baseline, measured in the same run: the same
pages run bare under AppTest in one fresh process (what any handout must spend), so the ratio says what reading the
pages, writing the HTML and printing cost on top. Targets (the issue): HTML <= 60 s, PDF <= 90 s (the whole
`--pdf` command), HTML <= 8 MB.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from core.io.lessons import Lesson, Slide, read_lesson, save_lesson

ROOT = Path(__file__).resolve().parent.parent
HTML_TARGET_S, PDF_TARGET_S, SIZE_TARGET_MB = 60.0, 90.0, 8.0
TOUR = ROOT / "lessons" / "tour.lesson.yaml"
SIX = Lesson("Handout benchmark: six pages", (
    Slide("attention", {"model": "lm-learned", "view": "model"}, "Every head", "Rows are queries."),
    Slide("positional", {"pos_section": "tables"}, "Positional tables"),
    Slide("curves", {"runs": "names-pretrained,names-scratch", "metric": "accuracy", "x": "epoch"}, "Curves"),
    Slide("probe", {"model": "birth-vanilla-pretrained", "tab": "ask", "name": "Zqwx Vblorpt"}, "An invented name"),
    Slide("errors", {}, "Errors"),
    Slide("playground", {}, "Attention by hand"),
))

BARE = """
import sys, time
sys.path.insert(0, {root!r})
from streamlit.logger import set_log_level
from streamlit.testing.v1 import AppTest
from core.io.lessons import read_lesson
from ui import page_by_name
set_log_level("error")
started = time.monotonic()
for slide in read_lesson({lesson!r}).slides:
    at = AppTest.from_file(str({root!r} + "/" + page_by_name(slide.page).file), default_timeout=300)
    for key, value in slide.state.items():
        at.query_params[key] = value
    at.run()
print(time.monotonic() - started)
"""


def timed(command: list[str], env_checkpoints: str | None) -> tuple[float, str, str]:
    import os

    env = dict(os.environ)
    if env_checkpoints:
        env["ATTENTION_LAB_CHECKPOINTS"] = env_checkpoints
    started = time.monotonic()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, env=env, timeout=900)
    seconds = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command[:4])} failed:\n{done.stderr[-3000:]}")
    return seconds, done.stdout, done.stderr


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lesson", type=Path, help=f"default {TOUR.relative_to(ROOT)} if present, else six slides")
    parser.add_argument("--checkpoints", help="the checkpoints folder (default: the bundled one)")
    parser.add_argument("--keep", type=Path, help="write the handout, PDF and zip here instead of a temporary folder")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-handout-") as scratch:
        folder = args.keep or Path(scratch)
        folder.mkdir(parents=True, exist_ok=True)
        lesson_path = args.lesson or (TOUR if TOUR.is_file() else save_lesson(SIX, Path(scratch) / "six.lesson.yaml"))
        slides = len(read_lesson(lesson_path).slides)
        print(f"lesson: {lesson_path} ({slides} slides)")
        extra = ["--checkpoints", args.checkpoints] if args.checkpoints else []
        base = [sys.executable, "-m", "ui.handout", str(lesson_path), *extra, "--server", "http://localhost:8501"]

        bare_s, out, _ = timed([sys.executable, "-c", BARE.format(root=str(ROOT), lesson=str(lesson_path))],
                            args.checkpoints)
        pages_s = float(out.strip().splitlines()[-1])
        print(f"baseline: the {slides} pages run bare under AppTest: {pages_s:.1f} s of {bare_s:.1f} s in the process")

        html = folder / "handout.html"
        html_s, _, log = timed([*base, "-o", str(html)], args.checkpoints)
        size_mb = html.stat().st_size / 1e6
        print(log.strip())
        print(f"HTML: {html_s:.1f} s for {slides} slides ({html_s / bare_s:.2f}x the bare pages' process), "
              f"{size_mb:.2f} MB")

        printed = folder / "handout-printed.html"
        pdf_s, _, log = timed([*base, "-o", str(printed), "--pdf", "--zip"], args.checkpoints)
        print("\n".join(log.strip().splitlines()[-4:]))
        pdf_path = printed.with_suffix(".pdf")
        if not pdf_path.is_file():
            print(f"RESULT handout measured=no_pdf({log.strip().splitlines()[-1][:60].replace(' ', '_')}) "
                  f"target=pdf<={PDF_TARGET_S:.0f}s pass=false")
            return 1
        print(f"PDF (with the zip of figures): {pdf_s:.1f} s ({pdf_s / bare_s:.2f}x the bare pages' process)")

    ok_html, ok_pdf, ok_size = html_s <= HTML_TARGET_S, pdf_s <= PDF_TARGET_S, size_mb <= SIZE_TARGET_MB
    print(f"RESULT handout_html measured={html_s:.1f}s target<={HTML_TARGET_S:.0f}s pass={str(ok_html).lower()}")
    print(f"RESULT handout_pdf measured={pdf_s:.1f}s target<={PDF_TARGET_S:.0f}s pass={str(ok_pdf).lower()}")
    print(f"RESULT handout_size measured={size_mb:.2f}MB target<={SIZE_TARGET_MB:.0f}MB pass={str(ok_size).lower()}")
    passed = ok_html and ok_pdf and ok_size
    print(f"RESULT handout measured=html_{html_s:.1f}s,pdf_{pdf_s:.1f}s,{size_mb:.2f}MB,{slides}_slides "
          f"target<={HTML_TARGET_S:.0f}s,{PDF_TARGET_S:.0f}s,{SIZE_TARGET_MB:.0f}MB pass={str(passed).lower()}")
    return 0 if passed else 1


if __name__ == "__main__":
    raise SystemExit(main())
