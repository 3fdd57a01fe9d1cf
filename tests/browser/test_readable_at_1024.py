"""Issue 41 items 5 and 6 in a real browser at 1024x768, measured in the DOM: every row and column of an
attention map labelled, the positional sentence maps and the probe's Dev set bars wide enough to read, no chart
title over a panel title, whole column names in the extrapolation table, and the extrapolation's progress and
Stop button."""

from __future__ import annotations

import time
from urllib.parse import quote

import pytest

from tests.browser.conftest import WAIT_MS, browser_page, open_page, screenshot, wait_idle
from tests.browser.test_projector import LABELS_JS, check_labels

pytestmark = pytest.mark.browser

PROJECTOR = {"width": 1024, "height": 768}
SENTENCE = "The students in the back row asked whether France and Germany share a border."  # 43 pieces
PLOTS_JS = """() => Array.from(document.querySelectorAll('.js-plotly-plot')).map(chart => {
    const box = e => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
    const title = chart.querySelector('.gtitle');
    return {title: title ? {text: title.textContent, box: box(title)} : null,
            plots: Array.from(chart.querySelectorAll('.nsewdrag')).map(box),
            panels: Array.from(chart.querySelectorAll('.annotation-text')).map(
                e => ({text: e.textContent, box: box(e)})),
            positions: (chart.data && chart.data[0] && chart.data[0].meta) ? chart.data[0].meta : null};
})"""


@pytest.fixture
def projector(server, browser, first_visit):
    with browser_page(browser, PROJECTOR) as page:
        yield page


def bundled(server) -> bool:
    from core.io.checkpoint import list_checkpoints

    return {"lm-learned", "birth-vanilla-pretrained"} <= {i.name for i in list_checkpoints(server.checkpoints)}


def overlap(a, b) -> bool:
    return a[0] < b[2] - 0.5 and b[0] < a[2] - 0.5 and a[1] < b[3] - 0.5 and b[1] < a[3] - 0.5


def test_every_row_and_column_of_an_attention_map_is_labelled(projector, server):
    if not bundled(server):
        pytest.skip("needs the bundled lm-learned")
    open_page(projector, f"{server.url}/attention?model=lm-learned&text={quote(SENTENCE)}")
    projector.locator(".js-plotly-plot").first.wait_for(timeout=WAIT_MS)
    measured = projector.evaluate(LABELS_JS, 0)
    drawn = projector.evaluate(PLOTS_JS)[0]["positions"]
    positions = (drawn[0] if isinstance(drawn, list) else drawn)["positions"]
    # a 43-piece sentence had all 43 rows but 14 of 43 columns labelled; now a window of them, each labelled
    assert len(measured["x"]) == len(positions) and len(measured["y"]) == len(positions), \
        (len(measured["x"]), len(measured["y"]), len(positions))
    check_labels(measured["x"], "x labels")
    check_labels(measured["y"], "y labels")
    projector.get_by_text("Words", exact=True).click()  # the same sentence as words, each labelled whole
    wait_idle(projector)
    measured = projector.evaluate(LABELS_JS, 0)
    from core.lens.attention import WINDOW_TOKENS

    words = [label["text"] for label in measured["x"]]
    assert len(measured["y"]) == len(words) == WINDOW_TOKENS  # 14 words, 13 spaces and the full stop: a window
    assert {"students", "France"} <= set(words), words
    check_labels(measured["x"], "word x labels")
    screenshot(projector, "readable-attention-words")


def test_positional_sentence_maps_and_the_dev_set_bars_are_wide_enough(projector, server):
    open_page(projector, f"{server.url}/positional?pos_section=sentence")
    projector.locator(".js-plotly-plot").first.wait_for(timeout=WAIT_MS)
    charts = projector.evaluate(PLOTS_JS)
    # the four models' maps: "lm-learned · Learned, layer 0, head 0 · “…”" (their titles name the model: issue 63)
    maps = [c for c in charts if c["title"] and ", head " in c["title"]["text"] and " · " in c["title"]["text"]]
    assert len(maps) >= 2, [c["title"] for c in charts]
    assert maps and all(p[2] - p[0] >= 200 for c in maps for p in c["plots"]), [c["plots"] for c in maps]
    if not bundled(server):
        return
    open_page(projector, f"{server.url}/probe?tab=dev")
    projector.locator(".js-plotly-plot").first.wait_for(timeout=WAIT_MS)
    charts = projector.evaluate(PLOTS_JS)
    bars = next(c for c in charts if c["title"] and c["title"]["text"].startswith("Where each model"))
    assert bars["plots"][0][2] - bars["plots"][0][0] >= 300, bars["plots"]  # was ~60 px
    for chart in charts:  # no chart title over a panel title (the 2x2 grids ran into theirs)
        if chart["title"] and chart["title"]["box"][2] > chart["title"]["box"][0]:
            for panel in chart["panels"]:
                assert not overlap(chart["title"]["box"], panel["box"]), (chart["title"], panel)
    screenshot(projector, "readable-probe-dev")


HEADERS_JS = """() => Array.from(document.querySelectorAll('[data-testid="stTable"] th')).map(
    e => ({text: e.textContent, cut: e.scrollWidth > e.clientWidth + 1}))"""


def test_extrapolation_shows_progress_can_be_stopped_and_names_its_columns(projector, server):
    if not bundled(server):
        pytest.skip("needs the bundled lm-* family")
    open_page(projector, f"{server.url}/positional?pos_section=extrapolation")
    projector.locator('[data-testid="stTable"]').first.wait_for(timeout=WAIT_MS)
    headers = projector.evaluate(HEADERS_JS)
    assert any("±2 s.e." in h["text"] for h in headers) and not [h for h in headers if h["cut"]], headers
    box = projector.get_by_role("spinbutton", name="Predictions scored, sliding")
    box.fill(str(2000 + int(time.time()) % 997))  # settings no earlier run computed
    box.press("Tab")
    wait_idle(projector)
    started = time.monotonic()
    projector.get_by_role("button", name="Run extrapolation").click()
    projector.locator('[data-testid="stToast"]').first.wait_for(timeout=WAIT_MS)
    said = time.monotonic() - started
    projector.locator('[data-testid="stProgress"]').first.wait_for(timeout=WAIT_MS)
    shown = time.monotonic() - started
    print(f"toast after {said:.2f} s, progress bar after {shown:.2f} s")  # 13-38 s of faded content before
    # behaviour, not speed (bench/ measures that): both come while the run goes on, long before the 13-38 s it
    # once took; a 1 s bound failed at 1.12 s with the box's load average at 16
    assert said < 5.0 and shown < 8.0, (said, shown)
    bar = projector.locator('[data-testid="stProgress"]').first.bounding_box()
    assert bar and 0 <= bar["y"] < PROJECTOR["height"], f"the bar is off screen: {bar}"  # where the eye is
    time.sleep(1.5)
    started = time.monotonic()
    projector.get_by_role("button", name="Stop").click()
    projector.get_by_text("Stopped.").first.wait_for(timeout=WAIT_MS)
    assert time.monotonic() - started < 10, "Stop did not stop the run"
    wait_idle(projector)
    assert projector.locator('[data-testid="stProgress"]').count() == 0


def test_the_probes_attention_strip_keeps_a_long_names_labels_apart(projector, server):
    if not bundled(server):
        pytest.skip("needs the bundled birthplace models")
    open_page(projector, f"{server.url}/probe?name={quote('Maximilian Alexander Konstantin von Hohenzollern')}")
    projector.locator(".js-plotly-plot").first.wait_for(timeout=WAIT_MS)
    titles = [c["title"]["text"] if c["title"] else "" for c in projector.evaluate(PLOTS_JS)]
    strip = next(i for i, t in enumerate(titles) if "MASK looks" in t)
    measured = projector.evaluate(LABELS_JS, strip)
    check_labels(measured["x"], "strip keys")  # 38 keys turned by the browser ran into each other
    assert measured["x"][-1]["text"] == "MASK"


# Each chart's bar labels, legend and title as drawn, and each table's scroller: is anything outside its box?
TEXT_JS = """() => Array.from(document.querySelectorAll('.js-plotly-plot')).map(chart => {
    const box = e => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
    const title = chart.querySelector('.gtitle'), legend = chart.querySelector('.legend');
    return {title: title ? box(title) : null, legend: legend ? box(legend) : null, chart: box(chart),
            texts: Array.from(chart.querySelectorAll('.bartext')).map(e => ({text: e.textContent, box: box(e)})),
            notes: Array.from(chart.querySelectorAll('.annotation-text')).map(e => ({text: e.textContent,
                                                                                      box: box(e)}))};
})"""
TABLES_JS = """() => Array.from(document.querySelectorAll('[data-testid="stDataFrame"] .dvn-scroller')).map(
    e => ({scroll: e.scrollWidth, client: e.clientWidth}))"""


def check_charts_and_tables(page, where: str) -> int:
    """Asserts; returns how many tables it measured."""
    for chart in page.evaluate(TEXT_JS):
        for text in chart["texts"]:  # a bar's label whole inside its chart (the "%" of 98.9% was cut)
            assert text["box"][2] <= chart["chart"][2] + 1, (where, text)
        if chart["title"] and chart["legend"] and chart["title"][2] > chart["title"][0]:
            assert not overlap(chart["title"], chart["legend"]), (where, chart["title"], chart["legend"])
        notes = chart["notes"]
        for i, a in enumerate(notes):  # panel titles and axis notes apart from one another
            for b in notes[i + 1:]:
                assert not overlap(a["box"], b["box"]), (where, a, b)
    tables = page.evaluate(TABLES_JS)
    for table in tables:  # every column on screen: no table wider than its box
        assert table["scroll"] <= table["client"] + 2, (where, table)
    return len(tables)


def test_the_errors_page_and_the_edit_tab_fit_a_projector(projector, server):
    """Issue 52 item 3: on the Errors page bar labels lost their '%', titles ran into legends and the two-models
    table's last column was off-screen; on the Edit tab the sweep's panel titles and labels ran together and its
    expander closed after "Run the sweep"."""
    if not bundled(server):
        pytest.skip("needs the bundled checkpoints")
    for view in ("examples", "slices", "calibration", "compare"):
        open_page(projector, f"{server.url}/errors?model=names-pretrained&err_view={view}")
        projector.locator('[data-testid="stDataFrame"], .js-plotly-plot').first.wait_for(timeout=WAIT_MS)
        wait_idle(projector)
        measured = check_charts_and_tables(projector, f"errors {view}")
        assert measured or view not in ("examples", "compare"), view  # the tables were there to measure
    screenshot(projector, "readable-errors-compare")
    for view in ("documents", "tokens"):
        open_page(projector, f"{server.url}/errors?model=lm-learned&err_view={view}")
        projector.locator('[data-testid="stDataFrame"], .js-plotly-plot').first.wait_for(timeout=WAIT_MS)
        wait_idle(projector)
        check_charts_and_tables(projector, f"errors {view}")
    open_page(projector, f"{server.url}/probe?tab=edit")
    projector.get_by_text("Sweep: every layer x position class").click()
    wait_idle(projector)
    projector.get_by_role("button", name="Run the sweep").click()
    projector.get_by_text("Where the edit works").first.wait_for(timeout=10 * WAIT_MS)
    wait_idle(projector)
    assert projector.get_by_role("button", name="Run the sweep").is_visible()  # the expander stayed open
    check_charts_and_tables(projector, "edit sweep")
    screenshot(projector, "readable-edit-sweep")


def test_anatomy_of_a_llama_folder_fits_a_projector(browser, tmp_path):
    """Issue 52 item 3: Anatomy of a LLaMA-family folder (from the Hugging Face cache, as a student has it) at
    1024x768: its parts named (grouped q/k/v/o, the gated MLP, RMSNorm), every table's columns on screen with
    "Every column" on, and the parts chart's labels inside it."""
    from bench.hf_folders import decoder_folder
    from serve.streamlit_process import start_healthy, stop_process
    from tests.browser.conftest import ARTIFACTS
    from tests.conftest import require_hf_extra
    from tests.test_hf_cache import lay_out

    require_hf_extra()
    cache, empty = tmp_path / "hub", tmp_path / "no-checkpoints"
    empty.mkdir()
    lay_out(cache, "TinyOrg/tiny-llama", decoder_folder(tmp_path / "tiny-llama", "llama"))
    server = start_healthy(ARTIFACTS / "anatomy-llama-server.log",
                           extra_env={"ATTENTION_LAB_CHECKPOINTS": str(empty), "HF_HUB_CACHE": str(cache)})
    try:
        with browser_page(browser, PROJECTOR) as page:
            open_page(page, f"{server.url}/anatomy?model={quote('TinyOrg/tiny-llama')}")
            page.locator('[data-testid="stDataFrame"]').first.wait_for(timeout=WAIT_MS)
            page.get_by_text("Every column", exact=False).first.click()
            page.locator('[data-testid="stDataFrame"]').nth(1).wait_for(timeout=WAIT_MS)
            wait_idle(page)
            main = page.locator('[data-testid="stMain"]').inner_text()
            assert "TinyOrg/tiny-llama" in main and "other" not in main.lower().split("parameters by part")[0], \
                main[:1500]
            page.screenshot(path=str(ARTIFACTS / "anatomy-llama-1024.png"), full_page=True)
            assert check_charts_and_tables(page, "anatomy llama") == 2
            screenshot(page, "readable-anatomy-llama")
    finally:
        stop_process(server.process)


def test_every_pages_first_view_fits_a_projector(projector, server):
    """Every page as it opens, at 1024x768: no table wider than its box, every bar label inside its chart, no
    title over a legend (the widths of a table's columns are checked where they are made: test_curves_page)."""
    from ui import APP_PAGES

    for app_page in APP_PAGES:
        open_page(projector, f"{server.url}/{app_page.url_path}")
        projector.locator('[data-testid="stMain"]').first.wait_for(timeout=WAIT_MS)
        wait_idle(projector)
        check_charts_and_tables(projector, app_page.title)
