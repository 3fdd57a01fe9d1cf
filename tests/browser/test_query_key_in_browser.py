"""Issue 28 in a real browser at 1024x768: the query-key view shows the sum that ends in the head view's weight
without scrolling, its charts keep their labels readable and inside the chart, and a 512-token input (a
bundled model whose positions have no hard limit, run past its block size) is drawn as a window of tokens
that the token search moves."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from core.lens import attention as av
from tests.browser.conftest import WAIT_MS, browser_page, open_page, screenshot, wait_idle
from tests.browser.test_projector import (
    LABELS_JS,
    PROJECTOR,
    assert_texts_inside,
    check_labels,
    drawn_chart_texts,
)

pytestmark = pytest.mark.browser

LONG_TEXT = "Daniel Dunn was an American actor, born in Baltimore. " * 40  # past 512 tokens, characters or pieces


@pytest.fixture
def projector(server, browser, first_visit):
    with browser_page(browser, PROJECTOR) as page:
        yield page


def models(server) -> list[str]:
    from core.io.checkpoint import list_checkpoints

    return [i.name for i in list_checkpoints(server.checkpoints) if not i.error]


def vanilla_model(server) -> str:
    names = models(server)
    return next((n for n in names if n.startswith("lm-")), next(n for n in names if "synth" not in n))


def steps_box(page) -> dict:
    block = page.locator('[data-testid="stCode"]').filter(has_text="weight in the head view").first
    block.wait_for(timeout=WAIT_MS)
    return {"text": block.inner_text(), "box": block.bounding_box()}


def assert_charts_keep_their_texts(page, what: str) -> None:
    charts = drawn_chart_texts(page)
    assert len(charts) == 3, what
    assert_texts_inside(charts, what)


def test_the_sum_is_above_the_fold_and_the_labels_readable(projector, server):
    open_page(projector, f"{server.url}/attention?model={vanilla_model(server)}&view=qk&layer=1")
    projector.locator(".js-plotly-plot").nth(2).wait_for(timeout=WAIT_MS)
    steps = steps_box(projector)
    assert steps["box"]["y"] + steps["box"]["height"] <= PROJECTOR["height"], steps["box"]
    lines = steps["text"].splitlines()
    assert lines[1].startswith("q·k = sum of") and "× scale" in lines[2]
    assert lines[-1].split()[-1] == lines[-2].split()[-1]  # the softmax's weight = the head view's
    products = projector.evaluate(LABELS_JS, 0)
    check_labels(products["x"], "products: keys")
    check_labels(products["y"], "products: dimensions")
    check_labels(projector.evaluate(LABELS_JS, 1)["y"], "top dimensions")
    assert_charts_keep_their_texts(projector, "query-key view")
    screenshot(projector, "projector-query-key")


def test_a_512_token_input_is_a_window_the_search_moves(projector, server):
    from core.io.checkpoint import load

    unlimited = [n for n in models(server) if n.startswith("lm-") and
                 load(server.checkpoints / f"{n}.safetensors").model.max_length is None]
    if not unlimited:
        pytest.skip("no checkpoint here can read 512 tokens")
    loaded = load(server.checkpoints / f"{unlimited[0]}.safetensors")
    tokens = av.run_attention(loaded.model, loaded.tokenizer, loaded.task, LONG_TEXT, run_past_block=True).tokens
    assert len(tokens) == 512  # the page reads at most 512 tokens
    from ui.attention_views import fitting

    width = fitting(tokens)  # the window's first width: as many keys as get every label at 1024x768
    url = f"{server.url}/attention?model={unlimited[0]}&past=1&text={quote(LONG_TEXT)}"
    for view in ("single", "model", "qk"):
        open_page(projector, f"{url}&view={view}")
        projector.locator(".js-plotly-plot").first.wait_for(timeout=WAIT_MS)
        start = "Tokens " if view == "qk" else f"Tokens 0 to {width - 1} "  # query-key: centred on its key
        assert projector.get_by_text(start).filter(has_text=f"({width} of 512").first.is_visible(), view
        measured = projector.evaluate(LABELS_JS, 0)  # the first panel's axes (the model view: its rows)
        if view != "model":
            check_labels(measured["x"], f"{view}: keys at 512 tokens")
        check_labels(measured["y"], f"{view}: {'dimensions' if view == 'qk' else 'queries'} at 512 tokens")
    needle = max(tokens[100:400], key=len)  # the longest token there: a word, or a letter for a character model
    first, last = av.window_around(av.find_tokens(tokens, needle)[0], len(tokens), width)
    box = projector.get_by_label("Find a token", exact=True)
    box.fill(needle)
    box.press("Enter")
    projector.get_by_text("match the search: positions").first.wait_for(timeout=WAIT_MS)
    wait_idle(projector)
    assert projector.get_by_text(f"Tokens {first} to {last} ({width} of 512").first.is_visible()
    assert_charts_keep_their_texts(projector, "query-key view at 512 tokens")
    screenshot(projector, "projector-query-key-512")
