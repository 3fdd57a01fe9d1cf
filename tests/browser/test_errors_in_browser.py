"""The Errors page in a real browser: a click on a confusion-matrix cell filters the table to that cell, and an
edited example is re-predicted beside the original."""

from __future__ import annotations

import re

import pytest

from core.io import checkpoint as ckpt
from core.lens.errors import classify, inputs
from tests.browser.conftest import WAIT_MS, open_page, screenshot, wait_idle

pytestmark = pytest.mark.browser


def classifier(server):
    infos = [i for i in ckpt.list_checkpoints(server.checkpoints) if not i.error and i.task == "classify"]
    if not infos:
        pytest.skip(f"no classifier in {server.checkpoints}")
    return next((i for i in infos if i.name == "names-pretrained"), infos[0])


def expected_result(server, info) -> classify.ClassifierErrors:
    """What the page computes, computed here from the same bundled file (the page opens on the first)."""
    from ui.errors_views import DATA

    loaded = ckpt.load(info.path)
    source = inputs.read_bundled(inputs.bundled_files(DATA, "classify", loaded.metadata)[0])
    pairs = inputs.classifier_pairs(source, loaded.labels)
    return classify.score_classifier(loaded.model, loaded.tokenizer, loaded.labels, pairs, info.name)


def captions(page) -> str:
    return " ".join(c.inner_text() for c in page.locator('[data-testid="stCaptionContainer"]').all())


def test_a_click_on_a_confusion_cell_filters_the_table(page, server):
    info = classifier(server)
    result = expected_result(server, info)
    confusion = result.confusion()
    labels = result.labels
    # the fullest off-diagonal cell (a mistake), else the fullest cell
    cells = [(int(confusion.iat[g, p]), g, p) for g in range(len(labels)) for p in range(len(labels))]
    count, gold, predicted = max(cells, key=lambda c: (c[0] > 0 and c[1] != c[2], c[0]))
    open_page(page, f"{server.url}/errors?model={info.name}")
    chart = page.locator(".js-plotly-plot").first
    chart.wait_for(timeout=WAIT_MS)
    assert re.search(rf"\b{len(result.frame)} of {len(result.frame)} examples match", captions(page))
    points = chart.locator(".scatterlayer .trace .points path")
    assert points.count() == len(labels) ** 2
    points.nth(gold * len(labels) + predicted).click(force=True)
    page.get_by_text(f"{count} of {len(result.frame)} examples match").first.wait_for(timeout=WAIT_MS)
    wait_idle(page)
    chosen = page.locator('[data-testid="stMultiSelect"]').first.inner_text()
    assert labels[gold] in chosen
    table = page.locator('[data-testid="stDataFrame"]').first
    assert table.is_visible()
    screenshot(page, "errors-confusion-cell")


def test_an_edited_example_is_re_predicted(page, server):
    info = classifier(server)
    open_page(page, f"{server.url}/errors?model={info.name}")
    box = page.get_by_label("Edit the text and re-predict", exact=True)
    box.wait_for(timeout=WAIT_MS)
    loaded = ckpt.load(info.path)
    text = "Giuseppe Rossi"
    again = classify.predict_text(loaded.model, loaded.tokenizer, loaded.labels, text)
    box.fill(text)
    box.press("Enter")
    page.get_by_text(f"Edited: predicted {again.idxmax()} (p = {again.max():.3f})").first.wait_for(timeout=WAIT_MS)
    wait_idle(page)
    names = page.evaluate("""() => Array.from(document.querySelectorAll('.js-plotly-plot')).map(
        g => (g.data || []).map(t => t.name))""")
    assert any(chart == ["as read", "edited"] for chart in names), names


def test_a_click_on_a_document_opens_it_piece_by_piece(page, server):
    """The walk-through: the language model's documents table could not be clicked to open a document. A click on
    a row opens the Tokens view on that document."""
    infos = [i for i in ckpt.list_checkpoints(server.checkpoints) if not i.error and i.task == "lm"]
    if not infos:
        pytest.skip(f"no language model in {server.checkpoints}")
    info = next((i for i in infos if i.name == "lm-learned"), infos[0])
    open_page(page, f"{server.url}/errors?model={info.name}&err_view=documents")
    table = page.locator('[data-testid="stDataFrame"]').first
    table.wait_for(timeout=WAIT_MS)
    table.scroll_into_view_if_needed()
    wait_idle(page)
    box = table.bounding_box()
    row = 2  # the third hardest document: its number is in the row's first cell
    page.mouse.click(box["x"] + 12, box["y"] + 35 * (row + 1) + 17)  # the row's selection box, under the header
    page.get_by_text("The rank the model gave each true piece").first.wait_for(timeout=WAIT_MS)
    wait_idle(page)
    assert page.get_by_role("radio", name="Tokens").is_checked()
    from core.lens.errors import lm
    from ui.errors_views import DATA

    loaded = ckpt.load(info.path)
    source = inputs.read_bundled(inputs.bundled_files(DATA, "lm", loaded.metadata)[0])
    docs = lm.score_lm(loaded.model, loaded.tokenizer, source.files(), info.name).documents
    hardest = docs.sort_values("loss", ascending=False, kind="stable")
    assert int(page.get_by_label(re.compile(r"^Document \(0 to")).input_value()) == docs.index.get_loc(
        hardest.index[row])
    screenshot(page, "errors-document-opened")
