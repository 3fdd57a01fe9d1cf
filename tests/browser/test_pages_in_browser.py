"""Every page of app.py in a real browser: it opens without an exception box, its main interaction works,
and a full-page screenshot lands in test-artifacts/browser/ (for a person to look at).

Pages are discovered from app.py, so a new page is at least opened, checked and photographed; pages
with a known main interaction (INTERACTIONS) are also driven: type a sentence and see the heatmap
change, pick runs and see curves, ask a name and see an answer, change a preset and see the output move.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.browser.conftest import (
    CHARTS_JS,
    WAIT_MS,
    charts_data,
    exception_boxes,
    nav_labels,
    open_page,
    screenshot,
    trace_names,
    wait_idle,
)
from tests.hostile_inputs import app_pages

pytestmark = pytest.mark.browser

PAGES = app_pages()


def url_of(server, page_file: str, default: bool) -> str:
    """Streamlit derives a page's URL from its file name; the default page lives at "/"."""
    return server.url + ("/" if default else "/" + Path(page_file).stem)


def wait_for_change(page, before: str, what: str) -> str:
    page.wait_for_function(f"(before) => ({CHARTS_JS})() !== before", arg=before, timeout=WAIT_MS)
    wait_idle(page)
    after = charts_data(page)
    assert after != before, f"{what}: the charts did not change"
    return after


def commit_text(page, label: str, text: str, area: bool) -> None:
    """Type into a Streamlit text box and submit it (Enter for text_input, Ctrl+Enter for text_area)."""
    box = page.get_by_label(label, exact=True)
    box.fill(text)
    box.press("Control+Enter" if area else "Enter")


def open_options(page, label: str, wait_ms: int = WAIT_MS):
    """Open a Streamlit selectbox/multiselect (a combobox named by its label); its options."""
    page.get_by_role("combobox", name=label, exact=True).click()
    options = page.get_by_role("option")
    options.first.wait_for(timeout=wait_ms)
    return options


# --------------------------------------------------------------------------- main interactions


def attention_interaction(page, server) -> str:
    assert page.locator(".js-plotly-plot").count() >= 1, "no heatmap"
    before = charts_data(page)
    commit_text(page, "Sentence", "Alan Turing was born in Maida Vale .", area=True)
    wait_for_change(page, before, "typing a sentence")
    chips = page.locator('[data-testid="stCode"]').first.inner_text()
    # one chip per token, whatever the vocabulary (characters, words or subword pieces): they spell the sentence
    pieces = re.findall(r"\[([^\]]*)\]", chips)
    assert "".join(pieces).replace("\u2423", " ") == "Alan Turing was born in Maida Vale .", chips[:200]
    return "typed a sentence: heatmap data changed, token chips show it"


def curves_interaction(page, server) -> str:
    page.locator(".js-plotly-plot").first.wait_for(timeout=WAIT_MS)
    traces = [t for chart in trace_names(page) for t in chart]
    assert traces, "the curves chart has no traces"
    before = charts_data(page)
    try:
        options = open_options(page, "Runs", wait_ms=5_000)
    except Exception:  # noqa: BLE001 - every run is already selected: nothing left to pick
        page.keyboard.press("Escape")
        return f"one run offered; the chart has {len(traces)} traces"
    labels = [options.nth(i).inner_text().strip() for i in range(options.count())]
    runs = [i for i, label in enumerate(labels) if label != "Select all"]  # Streamlit's own first option
    if not runs:
        page.keyboard.press("Escape")
        return f"one run offered; the chart has {len(traces)} traces"
    picked = labels[runs[0]]
    options.nth(runs[0]).click()
    page.keyboard.press("Escape")
    wait_for_change(page, before, f"adding run {picked}")
    names = " ".join(t for chart in trace_names(page) for t in chart)
    assert picked in names, f"{picked!r} not among the traces: {names[:300]}"
    return f"added run {picked!r}: traces {len(traces)} -> {sum(len(c) for c in trace_names(page))}"


def probe_interaction(page, server) -> str:
    from core.io.checkpoint import list_checkpoints

    if not any(i.task == "birthplace" and not i.error for i in list_checkpoints(server.checkpoints)):
        assert page.get_by_text("There is no birthplace checkpoint yet").count() == 1
        pytest.skip(f"no birthplace checkpoint in {server.checkpoints}: the page shows its note instead")
    commit_text(page, "A name, or a question 'Where was NAME born?'", "Alan Turing", area=False)
    page.locator('[data-testid="stMarkdown"]', has_text="Prompt: Where was Alan Turing born?").first.wait_for(
        timeout=WAIT_MS)
    wait_idle(page)
    assert page.locator('[data-testid="stDataFrame"]').count() >= 1, "no answers table"
    return "asked 'Alan Turing': question and answer table shown"


def playground_interaction(page, server) -> str:
    page.locator(".js-plotly-plot").first.wait_for(timeout=WAIT_MS)
    before = charts_data(page)
    current = page.get_by_role("combobox", name="Preset", exact=True).input_value()
    options = open_options(page, "Preset")
    labels = [options.nth(i).inner_text().strip() for i in range(options.count())]
    target = next(i for i, label in enumerate(labels) if label != current)
    options.nth(target).click()
    wait_for_change(page, before, f"choosing preset {labels[target]}")
    return f"preset {current!r} -> {labels[target]!r}: the weights heatmap changed"


def charts_with_traces(page) -> int:
    page.locator(".js-plotly-plot").first.wait_for(timeout=WAIT_MS)
    return sum(1 for chart in trace_names(page) if chart)


def anatomy_interaction(page, server) -> str:
    assert page.locator('[data-testid="stDataFrame"]').count() >= 1, "no parameter table"
    assert charts_with_traces(page) >= 3, "expected the parts chart and both masks"
    return "parameter table, parts chart and masks rendered"


def positional_interaction(page, server) -> str:
    assert charts_with_traces(page) >= 2, "expected the encoding tables"
    return f"{charts_with_traces(page)} charts with traces"


def open_model_interaction(page, server) -> str:
    assert page.locator('[data-testid="stFileUploader"]').count() >= 2, "no upload widgets"
    return "upload widgets rendered"


def home_interaction(page, server) -> str:
    assert page.locator('[data-testid="stDataFrame"]').count() >= 1, "no checkpoint table"
    return "checkpoint table rendered"


INTERACTIONS: dict[str, Callable] = {
    "home": home_interaction, "attention": attention_interaction, "curves": curves_interaction,
    "probe": probe_interaction, "playground": playground_interaction, "anatomy": anatomy_interaction,
    "positional": positional_interaction, "open_model": open_model_interaction,
}


def generic_main_element(page, server) -> str:
    count = page.locator('[data-testid="stMain"] [data-testid="stElementContainer"]').count()
    assert count >= 2, "the page shows (almost) nothing"
    return f"{count} elements"


@pytest.mark.parametrize("page_file,default", [pytest.param(f, d, id=Path(f).stem) for f, _, d in PAGES])
def test_page_opens_and_its_main_interaction_works(page, server, page_file, default):
    stem = Path(page_file).stem
    open_page(page, url_of(server, page_file, default))
    assert exception_boxes(page) == 0, f"exception box on {stem}:\n{page.inner_text('body')[:2000]}"
    assert "Traceback" not in page.inner_text("body")
    screenshot(page, f"{stem}-opened")
    outcome = INTERACTIONS.get(stem, generic_main_element)(page, server)
    wait_idle(page)
    assert exception_boxes(page) == 0, f"exception box on {stem} after the interaction"
    screenshot(page, stem)
    print(f"{stem}: {outcome}")


def test_navigation_lists_the_pages_of_app_py(page, server):
    open_page(page, server.url + "/")
    titles = [title for _, title, _ in PAGES]
    assert nav_labels(page) == titles


def test_a_deep_link_on_a_fresh_server_shows_the_app_navigation(first_visit):
    """A shared link (/attention) as the very first request of a fresh server: Streamlit treats a pages/
    folder beside app.py as a legacy multipage app until some run calls st.navigation, which used to
    leave the sidebar listing raw file names ('app', a blank 'common') for everyone. Guarded by
    ui.leave_legacy_multipage_mode."""
    titles = [title for _, title, _ in PAGES]
    assert first_visit["labels"] == titles, first_visit["labels"]


def test_unpaired_surrogate_typed_in_the_browser_does_not_break_the_page(page, server):
    """Browsers can hold a lone UTF-16 surrogate in a text box; Streamlit's protobuf cannot carry it to
    the server. Whatever happens to that one message, the page must keep working afterwards."""
    open_page(page, server.url + "/attention")
    box = page.get_by_label("Sentence", exact=True)
    box.fill("")
    box.focus()
    page.keyboard.insert_text("Ada \ud800 Lovelace")
    box.press("Control+Enter")
    page.wait_for_timeout(3000)
    wait_idle(page)
    assert exception_boxes(page) == 0
    before = charts_data(page)
    commit_text(page, "Sentence", "Grace Hopper was born in New York .", area=True)
    wait_for_change(page, before, "a normal sentence after the surrogate")
    assert exception_boxes(page) == 0
    shown = page.locator('[data-testid="stCode"]').first.inner_text()
    pieces = re.findall(r"\[([^\]]*)\]", shown)  # the token chips spell the new sentence
    assert "".join(pieces).replace("\u2423", " ") == "Grace Hopper was born in New York .", shown[:200]


# Per chart div: how many times plotly finished a draw, and how many full draws (beforeplot) began after
# its first one. Hooked when the div appears, so the first draw's beforeplot has already passed.
REDRAW_HOOK = """() => {
    window.__draws = [];
    const hook = (gd) => {
        if (gd.__counted || !gd.on) return;
        gd.__counted = true;
        const log = {after: 0, again: 0};
        window.__draws.push(log);
        gd.on('plotly_beforeplot', () => { if (log.after > 0) log.again += 1; });
        gd.on('plotly_afterplot', () => { log.after += 1; });
    };
    document.querySelectorAll('.js-plotly-plot').forEach(hook);
    new MutationObserver(() => document.querySelectorAll('.js-plotly-plot').forEach(hook))
        .observe(document.body, {subtree: true, childList: true});
}"""


def test_a_new_chart_is_computed_and_drawn_once(page, server):
    """Streamlit's chart element reacts to a new figure twice (its mount, then a JSON copy); plotly.js
    must find the copy equal and not compute and draw the chart again (core/figures/browser.py). With
    Streamlit's theme step or a template in the figure, every chart here was drawn twice."""
    open_page(page, server.url + "/attention")
    page.evaluate(REDRAW_HOOK)
    before = charts_data(page)
    commit_text(page, "Sentence", "Ada Lovelace was born in London .", area=True)
    wait_for_change(page, before, "typing a sentence")
    draws = [d for d in page.evaluate("() => window.__draws") if d["after"]]  # the replaced chart drew none
    assert draws, "no new chart was drawn"
    assert [d["again"] for d in draws] == [0] * len(draws), draws
