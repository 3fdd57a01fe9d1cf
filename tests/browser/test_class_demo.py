"""Issue 35: the class demo at projector size (1024x768), walked through as an instructor would. Each page opens
on the model that shows its point; the probe gives a verdict beside each answer (computed here independently from
wiki.txt); its link opens the question it was clicked for; a piece-level model gets no false vocabulary warning;
every table fits its box; the RoPE panels' titles stay apart; the main figure starts above the fold.

These need the bundled checkpoints (their names are the point); with the test fixtures they skip."""

from __future__ import annotations

import re
from urllib.parse import quote

import pytest

from tests.browser.conftest import WAIT_MS, browser_page, open_page, screenshot, wait_idle

pytestmark = pytest.mark.browser

PROJECTOR = {"width": 1024, "height": 768}
TABLES_JS = """() => Array.from(document.querySelectorAll('[data-testid="stDataFrame"]'))
    .filter(e => e.getBoundingClientRect().width > 0)
    .map(e => { const s = e.querySelector('.dvn-scroller');
                return {scroll: s ? s.scrollWidth : -1, client: s ? s.clientWidth : -1,
                        head: e.innerText.slice(0, 80)}; })"""


@pytest.fixture
def projector(server, browser, first_visit):
    with browser_page(browser, PROJECTOR) as page:
        yield page


def bundled(server, *names: str) -> None:
    from core.io.checkpoint import list_checkpoints

    have = {i.name for i in list_checkpoints(server.checkpoints) if not i.error}
    if missing := [n for n in names if n not in have]:
        pytest.skip(f"needs the bundled checkpoints {missing}")


def picker_value(page) -> str:
    return page.get_by_role("combobox", name="Checkpoint", exact=True).input_value()


def main_text(page) -> str:
    return page.locator('[data-testid="stMain"]').inner_text()


# --- 1. each page opens on the model that shows its point ----------------------------------------------------


def test_each_page_opens_on_its_own_model_when_nothing_was_picked(projector, server):
    bundled(server, "lm-learned", "birth-vanilla-pretrained", "names-pretrained", "names-scratch")
    open_page(projector, server.url + "/")  # the home page first, as a class would start
    for link, model in (("Attention", "lm-learned"), ("Birthplace probe", "birth-vanilla-pretrained"),
                        ("Training curves", "names-pretrained")):
        projector.locator('[data-testid="stSidebarNav"] a', has_text=link).first.click()
        wait_idle(projector)
        assert picker_value(projector) == model, link
        assert "Suits this page" in projector.locator('[data-testid="stSidebar"]').inner_text(), link
    # the curves page: the two names runs overlaid, accuracy by epoch, and the gap at epoch 1 and at the end
    names = {n.split(" · ")[0] for chart in projector.evaluate(
        "() => Array.from(document.querySelectorAll('.js-plotly-plot')).map(g => g.data.map(t => t.name || ''))")
        for n in chart[:1] + chart if n}
    assert {"names-pretrained", "names-scratch"} <= names, names
    text = main_text(projector)
    assert "accuracy by epoch" in text
    assert re.search(r"After epoch 1, names-pretrained has [\d.]+% validation accuracy", text), text[:2000]
    assert re.search(r"names-pretrained ends at [\d.]+% validation accuracy", text)
    assert "0.000" in projector.locator('[data-testid="stSlider"]', has_text="Smoothing").inner_text()  # short runs


def test_a_picked_model_stays_across_pages(projector, server):
    bundled(server, "lm-learned", "lm-rope")
    open_page(projector, server.url + "/attention")
    projector.get_by_role("combobox", name="Checkpoint", exact=True).click()
    projector.get_by_role("option", name="lm-rope", exact=True).click()
    wait_idle(projector)
    projector.locator('[data-testid="stSidebarNav"] a', has_text="Model anatomy").first.click()
    wait_idle(projector)
    assert picker_value(projector) == "lm-rope"


# --- 2. the probe's verdict, checked against the corpus by hand ---------------------------------------------


def corpus_lines() -> list[str]:
    from core.lens.probe.corpus import CORPUS_FILE, PROJECT_DATA

    return [line.strip() for line in (PROJECT_DATA / "knowledge" / CORPUS_FILE).read_text("utf-8").splitlines()
            if line.strip()]


def about(lines: list[str], person: str) -> list[str]:
    return [line for line in lines if line.startswith(person + ". ")]


def names(lines: list[str], place: str, text: str) -> bool:
    return re.search(r"(?<!\w)" + re.escape(place) + r"(?!\w)", text) is not None


def expected_verdict(person: str, answer: str) -> tuple[str, str | None]:
    """Written out independently of core.lens.probe: retrieved when a document about the person names the
    answer; borrowed when a document about someone sharing a name part (a capitalised word of 2+ letters:
    'van' and 'de' are not names) does; else made up."""
    lines = corpus_lines()
    if any(names(lines, answer, line.replace(person, "")) for line in about(lines, person)):
        return "retrieved", None
    parts = {p for p in person.split() if len(p) >= 2 and p[0].isupper()}
    for line in lines:
        head = line.split(". ", 1)[0]
        theirs = {p for p in head.split() if len(p) >= 2 and p[0].isupper()}
        if head != person and parts & theirs and names(lines, answer, line.replace(head, "")):
            return "borrowed", head
    return "made up", None


def ask(page, server, name: str) -> tuple[str, str]:
    """The focus model's answer and the verdict line shown beside the table."""
    open_page(page, f"{server.url}/probe?name={quote(name)}")
    page.locator('[data-testid="stDataFrame"]').first.wait_for(timeout=WAIT_MS)
    line = next(t for t in page.locator('[data-testid="stMarkdown"]').all_inner_texts()
                if re.match(r"\s*(retrieved|borrowed|made up)\s+birth-vanilla-pretrained answers ", t))
    return re.search(r"birth-vanilla-pretrained answers (.+?)(, and |, but )", line).group(1), line


def test_the_probe_gives_a_verdict_for_a_dev_person_an_unknown_name_and_a_shared_surname(projector, server):
    bundled(server, "birth-vanilla-pretrained")
    from core.lens.probe.corpus import DEV_FILE, PROJECT_DATA

    dev_person = (PROJECT_DATA / "knowledge" / DEV_FILE).read_text("utf-8").splitlines()[0].split("\t")[0]
    dev_person = dev_person.removeprefix("Where was ").removesuffix(" born?")
    lines = corpus_lines()
    surname = next(line.split(". ", 1)[0].split()[-1] for line in lines
                   if len(line.split(". ", 1)[0].split()[-1]) >= 4)
    cases = {"nobody": "Zqwx Vblorpt", "dev": dev_person, "shared surname": f"Qlyxa {surname}"}
    assert not any("Zqwx" in line or "Vblorpt" in line or "Qlyxa" in line for line in lines)
    for what, person in cases.items():
        answer, line = ask(projector, server, person)
        label, source = expected_verdict(person, answer)
        assert line.strip().startswith(f"{label} birth-vanilla-pretrained answers {answer}"), (what, person, line)
        if source:
            assert f" about {source}" in line, (what, line)  # the first of the namesakes it comes from
        if what == "nobody":
            assert label in ("made up", "borrowed") and f"no document mentions {person}" in line, line
        screenshot(projector, f"class-demo-verdict-{what.replace(' ', '-')}")


# --- 3. the probe's link opens the question it was clicked for ----------------------------------------------


def test_the_probe_link_opens_the_current_question_every_time(projector, server):
    bundled(server, "birth-vanilla-pretrained")
    open_page(projector, f"{server.url}/probe?name={quote('Ada Lovelace')}")
    for person in ("Ada Lovelace", "Grace Hopper"):
        if person != "Ada Lovelace":  # back through the sidebar, as a person would, then a new question
            projector.locator('[data-testid="stSidebarNav"] a', has_text="Birthplace probe").first.click()
            wait_idle(projector)
            box = projector.get_by_label("A name, or a question 'Where was NAME born?'")
            box.fill(person)
            box.press("Enter")
            wait_idle(projector)
        projector.get_by_text("Open this question on the Attention page").click()
        wait_idle(projector)
        sentence = projector.locator('[data-testid="stTextArea"] textarea').input_value()
        assert sentence == f"Where was {person} born?", sentence  # no ⁇ shown as "born???"
        assert picker_value(projector) == "birth-vanilla-pretrained"
        assert "MASK" in projector.locator('[data-testid="stCode"]').first.inner_text()  # the page added it


# --- 4. vocabulary warnings only for pieces a model really lacks --------------------------------------------


def test_no_vocabulary_warning_for_pieces_the_vocabulary_has_and_one_for_a_missing_character(projector, server):
    from core.io.checkpoint import list_checkpoints, load

    infos = [i for i in list_checkpoints(server.checkpoints) if not i.error and i.task == "lm"]
    piece = next((i for i in infos if load(i.path).tokenizer.kind == "bpe"), None)
    char = next((i for i in infos if load(i.path).tokenizer.kind == "char"), None)
    if piece is None:
        pytest.skip("no piece-level language model here")
    sentence = "He moved over to his own town."
    tokenized = load(piece.path).tokenizer.tokenize(sentence)
    assert tokenized.ids and 0 not in tokenized.ids  # every piece has its own id: nothing read as PAD
    open_page(projector, f"{server.url}/attention?model={piece.name}&text={quote(sentence)}")
    projector.locator(".js-plotly-plot").first.wait_for(timeout=WAIT_MS)
    assert projector.locator('[data-testid="stAlertContentWarning"]').count() == 0, main_text(projector)[:1500]
    top = projector.locator(".js-plotly-plot").first.bounding_box()["y"]
    assert top < PROJECTOR["height"] - 150
    if char is not None:
        open_page(projector, f"{server.url}/attention?model={char.name}&text={quote('Zoë smiled 😀')}")
        warning = projector.locator('[data-testid="stAlertContentWarning"]')
        warning.first.wait_for(timeout=WAIT_MS)
        assert "not in this model's vocabulary" in warning.first.inner_text() and "😀" in warning.first.inner_text()


# --- 5 and 6. everything fits 1024 px; the RoPE panels keep their titles apart ------------------------------

FIT_VIEWS = ["probe?name=Ada+Lovelace", "probe?tab=fabricate", "probe?tab=dev", "curves", "playground", "anatomy",
             "attention", "positional", "positional?pos_section=extrapolation"]


@pytest.mark.parametrize("path", FIT_VIEWS)
def test_every_table_fits_its_box_at_1024x768(projector, server, path):
    open_page(projector, f"{server.url}/{path}")
    projector.locator('[data-testid="stMain"] h1').wait_for(timeout=WAIT_MS)
    for expander in projector.locator('[data-testid="stExpander"] summary').all():  # the detail too
        expander.click()
    wait_idle(projector)
    tables = projector.evaluate(TABLES_JS)
    for table in tables:
        assert table["scroll"] <= table["client"] + 1, f"{path}: a table scrolls sideways: {table}"
    assert projector.evaluate("""() => { const m = document.querySelector('[data-testid="stMain"]');
        return m.scrollWidth <= m.clientWidth + 1; }"""), f"{path}: the page scrolls sideways"


ROPE_JS = """() => {
    const chart = Array.from(document.querySelectorAll('.js-plotly-plot')).find(
        g => g.querySelector('.g-y2title'));
    const box = e => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
    return {titles: Array.from(chart.querySelectorAll('.annotation-text')).map(box),
            y2title: box(chart.querySelector('.g-y2title text')),
            left: Array.from(chart.querySelectorAll('.subplot.xy .xtick text, .subplot.xy .plot')).map(box)};
}"""


def test_the_rope_panels_keep_their_titles_apart(projector, server):
    open_page(projector, f"{server.url}/positional?pos_section=rope")
    projector.locator(".g-y2title").first.wait_for(timeout=WAIT_MS)
    found = projector.evaluate(ROPE_JS)
    (a, b) = found["titles"][:2]
    assert a[2] <= b[0], f"the panel titles overlap: {a} {b}"
    right_edge = max(box[2] for box in found["left"])
    assert found["y2title"][0] >= right_edge, f"the right panel's y title sits on the left panel's lines: {found}"


@pytest.mark.parametrize("path", ["attention", "positional", "curves", "probe"])
def test_the_main_figure_starts_above_the_fold(projector, server, path):
    open_page(projector, f"{server.url}/{path}")
    chart = projector.locator(".js-plotly-plot").first
    chart.wait_for(timeout=WAIT_MS)
    top = chart.bounding_box()["y"]
    assert top < PROJECTOR["height"], f"{path}: the first figure starts at {top:.0f} px"
