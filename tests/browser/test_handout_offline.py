"""The handout in Debian's Chromium: opened from its file with every other request blocked, it asks for nothing and
draws every chart; `--pdf` prints one page per slide plus the title page; `--zip` holds a PNG and an SVG per figure
and a CSV per table. The handout is made by the command itself (`python -m ui.handout`, its own process: it drives
its own Chromium)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from bench.tiny_checkpoints import tiny_checkpoint_folder
from core.io.lessons import Lesson, Slide, save_lesson
from tests.conftest import ROOT

SLIDES = (
    Slide("attention", {"model": "tiny-lm", "text": "Ada was in London.", "view": "model"}, "Every head", "Notes."),
    Slide("curves", {"model": "tiny-lm", "runs": "tiny-lm", "smoothing": "0"}, "The loss"),
    Slide("playground", {}, "By hand"),
    Slide("probe", {"model": "nobody-here"}, "Not here"),
)


@pytest.fixture(scope="module")
def made(chromium, tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("handout-browser")
    checkpoints = tiny_checkpoint_folder(folder / "ckpts")
    lesson = save_lesson(Lesson("Browser lesson", SLIDES), folder / "b.lesson.yaml")
    out = folder / "b.html"
    done = subprocess.run([sys.executable, "-m", "ui.handout", str(lesson), "-o", str(out), "--pdf", "--zip",
                           "--checkpoints", str(checkpoints), "--server", "http://127.0.0.1:8501"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    text = out.read_text(encoding="utf-8")
    specs = {div: json.loads(spec) for div, spec in re.findall(
        r'<script type="application/json" class="chart-spec" data-for="([^"]+)">(.*?)</script>', text, re.S)}
    return {"html": out, "text": text, "specs": specs, "stderr": done.stderr}


def test_opened_offline_it_requests_nothing_and_draws_every_chart(made, browser):
    url = made["html"].resolve().as_uri()
    attempts: list[str] = []

    def route(r):
        if r.request.url == url:
            r.continue_()
        else:
            attempts.append(r.request.url)
            r.abort()

    context = browser.new_context(viewport={"width": 1024, "height": 768})
    try:
        context.route("**/*", route)
        page = context.new_page()
        requested: list[str] = []
        page.on("request", lambda req: requested.append(req.url))
        page.goto(url, wait_until="load")
        page.wait_for_function("() => window.handoutReady === true", timeout=60_000)
        page.wait_for_timeout(500)
        drawn = page.evaluate("""() => Array.from(document.querySelectorAll('div.chart')).map(d => [d.id,
            !!d.querySelector('.plotly .main-svg'), (d.data || []).length, Number(d.dataset.traces)])""")
    finally:
        context.close()
    assert attempts == [] and [r for r in requested if r != url] == []
    assert len(made["specs"]) >= 3 and [d[0] for d in drawn] == list(made["specs"])
    for div, has_svg, traces, declared in drawn:
        assert has_svg, div
        assert traces == declared == len(made["specs"][div]["data"]), div


def pdf_pages(path: Path) -> int:
    if shutil.which("pdfinfo"):
        info = subprocess.run(["pdfinfo", str(path)], capture_output=True, text=True, check=True).stdout
        return int(re.search(r"^Pages:\s+(\d+)", info, re.M).group(1))
    return len(re.findall(rb"/Type\s*/Page(?!s)", path.read_bytes()))


def test_the_pdf_has_one_page_per_slide_and_a_title_page(made):
    pdf = made["html"].with_suffix(".pdf")
    assert pdf.read_bytes().startswith(b"%PDF")
    assert pdf_pages(pdf) == len(SLIDES) + 1


def test_the_zip_holds_every_figure_as_png_and_svg_and_every_table_as_csv(made):
    with zipfile.ZipFile(made["html"].with_suffix(".zip")) as archive:
        names = set(archive.namelist())
        stems = {f"slide-{div[6:8]}-figure-{div[9:11]}" for div in made["specs"]}  # chart-NN-MM
        assert {n for n in names if n.endswith((".png", ".svg"))} == {f"{s}.{f}" for s in stems for f in ("png", "svg")}
        for stem in stems:
            assert archive.read(f"{stem}.png").startswith(b"\x89PNG")
            assert b"<svg" in archive.read(f"{stem}.svg")[:400]
        tables = made["text"].count('<div class="table-wrap">')
        assert tables >= 3 and len([n for n in names if n.endswith(".csv")]) == tables
        assert "handout.html" in names
        assert not any(n.startswith("slide-04-") for n in names)  # the slide that could not be drawn
