"""Issue 15 section 2 in a real browser at projector size (1024x768): the attention heatmap's token
labels are at least 12 px, dark and never overlap (boxes measured with getBoundingClientRect), in the
single-head view, in Compare (two maps side by side) and for a long input; the heatmap starts above
the fold; the model view shows tokens, a colour bar and whole "L0 H1" titles."""

from __future__ import annotations

import pytest

from tests.browser.conftest import WAIT_MS, browser_page, open_page, screenshot

pytestmark = pytest.mark.browser

PROJECTOR = {"width": 1024, "height": 768}
LABELS_JS = """(index) => {
    const chart = document.querySelectorAll('.js-plotly-plot')[index];
    const box = e => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
    const label = e => ({text: e.textContent, box: box(e), size: parseFloat(getComputedStyle(e).fontSize),
                         fill: getComputedStyle(e).fill});
    return {x: Array.from(chart.querySelectorAll('.xtick text')).map(label),
            y: Array.from(chart.querySelectorAll('.ytick text')).map(label),
            titles: Array.from(chart.querySelectorAll('.annotation-text')).map(label),
            colorbar: chart.querySelectorAll('.colorbar').length, chart: box(chart)};
}"""


@pytest.fixture
def projector(server, browser, first_visit):
    with browser_page(browser, PROJECTOR) as page:
        yield page


def overlap(a, b) -> bool:
    return a[0] < b[2] - 0.5 and b[0] < a[2] - 0.5 and a[1] < b[3] - 0.5 and b[1] < a[3] - 0.5


def luminance(css: str) -> float:
    r, g, b = (int(float(v)) for v in css[css.index("(") + 1:css.index(")")].split(",")[:3])
    return (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255


def check_labels(labels: list[dict], what: str) -> None:
    assert labels, f"{what}: no token labels drawn"
    for label in labels:
        assert label["size"] >= 12, f"{what}: {label['text']!r} is {label['size']} px"
        assert luminance(label["fill"]) < 0.35, f"{what}: {label['text']!r} is light ({label['fill']})"
    boxes = [label["box"] for label in labels if label["box"][2] > label["box"][0]]
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            assert not overlap(a, b), f"{what}: labels overlap: {a} {b}"


def birthplace_model(server) -> str:
    from core.io.checkpoint import list_checkpoints

    names = [i.name for i in list_checkpoints(server.checkpoints) if not i.error]
    return next((n for n in names if "birth" in n), names[0])


@pytest.mark.parametrize("text", ["Where was Daniel Dunn born?", "Where was the Welsh mathematician Ada Quill "
                                  "born? She studied in Cardiff and taught in Bristol for thirty years."])
def test_token_labels_are_readable_and_never_overlap_at_1024x768(projector, server, text):
    from urllib.parse import quote

    open_page(projector, f"{server.url}/attention?model={birthplace_model(server)}&text={quote(text)}")
    chart = projector.locator(".js-plotly-plot").first
    chart.wait_for(timeout=WAIT_MS)
    measured = projector.evaluate(LABELS_JS, 0)
    check_labels(measured["x"], "x labels")
    check_labels(measured["y"], "y labels")
    assert measured["chart"][1] < PROJECTOR["height"] - 150, f"the heatmap starts below the fold: {measured['chart']}"
    screenshot(projector, f"projector-attention-{len(text)}")


def test_compare_maps_side_by_side_keep_their_labels_apart(projector, server):
    open_page(projector, f"{server.url}/attention?model={birthplace_model(server)}&view=compare")
    projector.locator(".js-plotly-plot").nth(1).wait_for(timeout=WAIT_MS)
    # a difference map below means both models read the same tokens: the right map then shares the left
    # one's query labels (and the left one the right one's colour bar), so both plots get that width
    shared = projector.locator(".js-plotly-plot").count() == 3
    for index in (0, 1):
        measured = projector.evaluate(LABELS_JS, index)
        check_labels(measured["x"], f"compare map {index}, x")
        if index == 1 and shared:
            assert measured["y"] == [], "the right map repeats the query labels the left one shows"
        else:
            check_labels(measured["y"], f"compare map {index}, y")
        assert measured["colorbar"] == index, f"compare map {index}: one colour bar, on the right map"


def test_model_view_has_tokens_a_colour_bar_and_whole_titles(projector, server):
    open_page(projector, f"{server.url}/attention?model={birthplace_model(server)}&view=model")
    projector.locator(".js-plotly-plot").first.wait_for(timeout=WAIT_MS)
    measured = projector.evaluate(LABELS_JS, 0)
    assert measured["colorbar"] == 1
    check_labels(measured["y"], "model view rows")
    chart = measured["chart"]
    titles = [t for t in measured["titles"] if t["text"].startswith("L")]
    assert titles and all(t["text"].count(" H") == 1 for t in titles)
    for title in titles:  # whole: inside the chart, not cut at its top edge
        assert title["box"][1] >= chart[1] - 0.5 and title["box"][0] >= chart[0] - 0.5, title


TEXTS_JS = """() => Array.from(document.querySelectorAll('.js-plotly-plot')).map(chart => {
    const box = e => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
    const texts = chart.querySelectorAll('.gtitle, .g-xtitle text, .g-ytitle text, .xtick text, .ytick text');
    return {chart: box(chart.querySelector('.main-svg')),
            texts: Array.from(texts).filter(e => e.textContent && e.getBoundingClientRect().width > 0)
                .map(e => ({text: e.textContent, box: box(e)}))};
})"""


CHART_VIEWS = ["probe?name=Alan+Turing", "probe?tab=dev", "probe?tab=fabricate", "positional", "attention",
               "attention?view=compare", "attention?view=model", "curves", "playground", "anatomy",
               *(f"positional?pos_section={s}" for s in ("similarity", "alibi", "rope", "sentence", "training"))]


def drawn_chart_texts(page) -> list[dict]:
    """Each chart drawn (not hidden) with its titles' and tick labels' boxes (TEXTS_JS)."""
    return [c for c in page.evaluate(TEXTS_JS) if c["chart"][2] > c["chart"][0]]


def assert_texts_inside(charts: list[dict], what: str) -> None:
    """No title or label runs past its chart's edge, where the SVG cuts it."""
    for chart in charts:
        left, top, right, bottom = chart["chart"]
        for text in chart["texts"]:
            x0, y0, x1, y1 = text["box"]
            assert x0 >= left - 1 and x1 <= right + 1 and y0 >= top - 1 and y1 <= bottom + 1, \
                f"{what}: {text['text']!r} at {text['box']} leaves its chart {chart['chart']}"


@pytest.mark.parametrize("path", CHART_VIEWS)
def test_chart_titles_and_labels_are_not_cut_at_the_chart_edge_at_1024x768(projector, server, path):
    # a title centred over a narrow plot ran past the chart's edge, where the SVG cuts it ("probability
    # among the candi")
    open_page(projector, f"{server.url}/{path}")
    projector.locator(".js-plotly-plot").first.wait_for(timeout=WAIT_MS)
    charts = drawn_chart_texts(projector)
    assert charts and all(c["texts"] for c in charts)
    assert_texts_inside(charts, path)


# The first thing a page computes, per page: a chart, or the probe's answers table.
MAIN_RESULT = {"attention": ".js-plotly-plot", "positional": ".js-plotly-plot", "curves": ".js-plotly-plot",
               "probe?name=Alan+Turing": '[data-testid="stDataFrame"]', "playground": ".js-plotly-plot",
               "anatomy": '[data-testid="stDataFrame"]',
               "positional?pos_section=extrapolation": ".js-plotly-plot"}


@pytest.mark.parametrize("path", MAIN_RESULT)
def test_each_pages_main_result_starts_above_the_fold_at_1024x768(projector, server, path):
    """With the sidebar open, at least 150 px of the main chart (or table) show without scrolling."""
    open_page(projector, f"{server.url}/{path}")
    first = projector.locator(MAIN_RESULT[path]).first
    first.wait_for(timeout=WAIT_MS)
    assert projector.evaluate("() => window.scrollY") == 0
    top = first.bounding_box()["y"]
    assert top < PROJECTOR["height"] - 150, f"{path}: the main result starts at {top:.0f} px"
