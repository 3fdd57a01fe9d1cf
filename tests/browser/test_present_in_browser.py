"""Issue 60, present mode in a real browser at projector size: a 3-slide lesson across three pages (attention,
positional, curves) opened on the Lesson page and presented; Right / Page Down step forward, Left / Page Up back; the
"n / 3" counter and title follow; arrow keys typed in a text box stay there (Streamlit's shortcuts skip text
fields); a sentence typed on the live attention slide is undone by "Back to the slide"; the main figure is above the
fold at 1024x768. Screenshots of a presented slide and the Lesson page at 1024x768 and 1400x1000 go to
/tmp/present-shots/ (PRESENT_SHOTS overrides)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from core.io import lessons as ls
from tests.browser.conftest import browser_page, open_page, screenshot, wait_idle

pytestmark = pytest.mark.browser

SHOTS = Path(os.environ.get("PRESENT_SHOTS", "/tmp/present-shots"))
SENTENCE = "Ada was born in London ."
LESSON = ls.Lesson(title="Three pages, one class", slides=(
    ls.Slide("attention", {"text": SENTENCE, "view": "single", "layer": "0", "head": "1"}, "Heads look somewhere",
             "Point at the diagonal."),
    ls.Slide("positional", {"pos_section": "similarity"}, "Positions, compared"),
    ls.Slide("curves", {"metric": "loss", "x": "step"}, "How training went"),
))
BAR = ".st-key-present_bar"


def lesson_file(tmp_path: Path) -> Path:
    path = tmp_path / ls.file_name(LESSON.title)
    path.write_text(ls.dump_lesson(LESSON), encoding="utf-8")
    return path


def open_lesson(page, server, tmp_path: Path) -> None:
    open_page(page, server.url + "/lesson")
    page.locator('[data-testid="stFileUploader"] input[type="file"]').set_input_files(str(lesson_file(tmp_path)))
    page.get_by_text("Opened", exact=False).first.wait_for()
    wait_idle(page)


def counter(page) -> str:
    return page.locator(BAR).inner_text()


def shown(page, number: int, title: str, path: str) -> None:
    """Slide `number` of 3 is up: the bar says so, the URL is its page, and the page has drawn."""
    page.wait_for_function("([sel, text]) => { const b = document.querySelector(sel);"
                           " return b && b.innerText.includes(text); }", arg=[BAR, f"{number} / 3"])
    wait_idle(page)
    text = counter(page)
    assert f"{number} / 3" in text and title in text, text
    assert page.url.split("?")[0].rstrip("/").endswith(path), page.url


def shoot(page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"))


def press(page, key: str) -> None:
    page.locator("body").focus()  # a key reaches the shortcuts from the page, not from a text box
    page.keyboard.press(key)


FIGURE_TOP_JS = """() => { const g = document.querySelector('[data-testid="stMain"] .js-plotly-plot');
    if (!g) return null; const r = g.getBoundingClientRect();
    return {top: r.top, bottom: r.bottom, traces: (g.data || []).length}; }"""


def test_present_a_lesson_with_the_keys_and_back_to_the_slide(server, browser, first_visit, tmp_path):
    with browser_page(browser, {"width": 1024, "height": 768}) as page:
        open_lesson(page, server, tmp_path)
        shoot(page, "lesson-1024")
        page.get_by_role("button", name="Present", exact=True).click()
        shown(page, 1, "Heads look somewhere", "/attention")
        figure = page.evaluate(FIGURE_TOP_JS)
        assert figure and figure["traces"] and figure["top"] < 768 - 250, figure  # most of the map above the fold
        shoot(page, "present-1024")
        sidebar = page.locator('[data-testid="stSidebar"]').bounding_box()
        assert sidebar is None or sidebar["x"] + sidebar["width"] <= 1, sidebar  # collapsed while presenting

        press(page, "ArrowRight")
        shown(page, 2, "Positions, compared", "/positional")
        press(page, "PageDown")
        shown(page, 3, "How training went", "/curves")
        press(page, "ArrowLeft")
        shown(page, 2, "Positions, compared", "/positional")
        press(page, "PageUp")
        shown(page, 1, "Heads look somewhere", "/attention")

        box = page.get_by_role("textbox", name="Sentence")
        assert box.input_value() == SENTENCE
        box.click()
        page.keyboard.press("End")
        page.keyboard.type(" Then")
        for key in ("ArrowLeft", "ArrowRight", "PageDown"):  # in the text box: the caret moves, no slide change
            page.keyboard.press(key)
        page.wait_for_timeout(800)
        assert "1 / 3" in counter(page) and "/attention" in page.url
        page.keyboard.press("Control+Enter")  # the text area's own "apply"
        wait_idle(page)
        assert box.input_value() == SENTENCE + " Then"
        assert "1 / 3" in counter(page)

        page.get_by_role("button", name="Back to the slide").click()
        page.wait_for_function("(text) => { const t = document.querySelector('textarea');"
                               " return t && t.value === text; }", arg=SENTENCE)
        wait_idle(page)
        assert page.get_by_role("textbox", name="Sentence").input_value() == SENTENCE
        assert "1 / 3" in counter(page)

        page.set_viewport_size({"width": 1400, "height": 1000})
        page.wait_for_timeout(1000)
        shoot(page, "present-1400")
        page.get_by_role("button", name="End").click()
        page.get_by_role("heading", name="Lesson").wait_for()
        wait_idle(page)
        assert page.locator(BAR).count() == 0
        shoot(page, "lesson-1400")
        SHOTS.mkdir(parents=True, exist_ok=True)
        screenshot(page, "present-lesson-page-whole").replace(SHOTS / "lesson-whole.png")  # the page's full length


def test_the_presenter_tab_follows_the_presenting_one(server, browser, first_visit, tmp_path):
    with browser_page(browser, {"width": 1024, "height": 768}) as page:
        open_lesson(page, server, tmp_path)
        page.get_by_role("button", name="Present", exact=True).click()
        shown(page, 1, "Heads look somewhere", "/attention")
        href = page.locator(BAR).get_by_role("link", name="Notes").get_attribute("href")
        notes = page.context.new_page()
        notes.goto(server.url + "/" + href.lstrip("/"), wait_until="domcontentloaded")
        notes.get_by_text("Point at the diagonal.").wait_for()
        assert "Next: Positions, compared" in notes.locator('[data-testid="stMain"]').inner_text()
        press(page, "ArrowRight")
        shown(page, 2, "Positions, compared", "/positional")
        notes.get_by_text("2 / 3").wait_for(timeout=10_000)  # polled every second
        assert "Next: How training went" in notes.locator('[data-testid="stMain"]').inner_text()
        notes.close()


def test_the_sidebar_keeps_a_view_in_the_browser(server, browser, first_visit):
    with browser_page(browser, {"width": 1024, "height": 768}) as page:
        open_page(page, server.url + "/attention?" + "text=Ada+was+born+in+Leeds+.&view=model")
        sidebar = page.locator('[data-testid="stSidebar"]')
        sidebar.get_by_role("button", name="Add this view to the lesson").click()
        sidebar.get_by_text("Added as slide 1 of 'Untitled lesson'.").wait_for()
        wait_idle(page)
        shoot(page, "attention-add-1024")
        page.locator('[data-testid="stSidebarNav"] a', has_text="Lesson").first.click()
        wait_idle(page)
        main = page.locator('[data-testid="stMain"]').inner_text()
        assert "1. Attention: Ada was born in Leeds ." in main and "view=model" in main, main[:800]
