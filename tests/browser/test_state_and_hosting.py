"""Issue 15, in a real browser at 1024x768: state that stays (the sidebar model across page switches and
reloads, an added model listed for the session, the tab it was added on, a copied probe link), typing
what people type ('?' instead of the MASK), and a server folder box that refuses traversal.

One server of its own, with ATTENTION_LAB_ALLOWED_DIRS naming one folder that holds a symlink out of it
(the shared server in conftest.py runs with no allowed folders, the default). Screenshots of the pages
touched land in test-artifacts/browser/issue15-*.png.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest

from core.io.checkpoint import list_checkpoints
from core.model.tokenizer import MASK_CHAR
from tests.browser.conftest import ARTIFACTS, browser_page, open_page, start_server, stop, wait_idle
from tests.conftest import save_tiny_checkpoint

pytestmark = pytest.mark.browser

SMALL = {"width": 1024, "height": 768}
ASK_BOX = "A name, or a question 'Where was NAME born?'"


@pytest.fixture(scope="module")
def hosted(chromium, checkpoint_folder, tmp_path_factory) -> Iterator:
    root = tmp_path_factory.mktemp("hosted")
    allowed, secret = root / "class", root / "secret"
    allowed.mkdir()
    secret.mkdir()
    (secret / "private.log.jsonl").write_text("{}\n")
    (allowed / "out").symlink_to(secret, target_is_directory=True)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ATTENTION_LAB_ALLOWED_DIRS", str(allowed))
        mp.setenv("ATTENTION_LAB_ANY_FOLDER", "0")  # hosted, as make serve sets it: typed folders only inside
        server = start_server(checkpoint_folder, ARTIFACTS / "server-issue15.log")
    server.allowed, server.secret = allowed, secret
    try:
        yield server
    finally:
        stop(server.process)


@pytest.fixture
def tab(hosted, browser) -> Iterator:
    with browser_page(browser, SMALL) as page:
        yield page


def picked(page) -> str:
    return page.get_by_role("combobox", name="Checkpoint", exact=True).input_value()


def go(page, label: str) -> None:
    """In-app navigation: a click in the sidebar, not a new URL."""
    page.get_by_role("link", name=label, exact=True).click()
    wait_idle(page)


def choose(page, label: str, option: str) -> None:
    page.get_by_role("combobox", name=label, exact=True).click()
    page.get_by_role("option", name=option, exact=True).click()
    wait_idle(page)


def query(page) -> dict[str, list[str]]:
    return parse_qs(urlparse(page.url).query)


def shot(page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"issue15-{name}.png"), full_page=True)


def test_the_picked_model_survives_page_switches_and_a_reload(tab, hosted, checkpoint_folder):
    names = [i.name for i in list_checkpoints(checkpoint_folder) if not i.error]
    assert len(names) >= 2
    wanted = names[-1]  # not the first: a reset would show names[0]
    open_page(tab, hosted.url + "/attention")
    choose(tab, "Checkpoint", wanted)
    for label in ("Training curves", "Birthplace probe", "Home", "Model anatomy", "Attention"):
        go(tab, label)
        assert picked(tab) == wanted, f"after switching to {label}"
        assert query(tab).get("model") == [wanted], tab.url
    tab.reload()
    wait_idle(tab)
    assert picked(tab) == wanted, "after a reload"
    assert not tab.locator('[data-testid="stException"]').count()


def test_an_added_model_stays_selected_listed_and_on_its_tab(tab, hosted, tmp_path):
    upload = save_tiny_checkpoint(tmp_path / "my-class-model.safetensors", "lm")
    open_page(tab, hosted.url + "/open_model")
    tab.get_by_role("tab", name="Attention Lab checkpoint").click()
    wait_idle(tab)
    # the checkpoint tab's own uploader (by its key: other tabs' uploaders are in the page too)
    tab.locator('.st-key-upload_checkpoint input[type="file"]').set_input_files(str(upload))
    tab.get_by_role("button", name="Add to the picker").wait_for()
    tab.wait_for_function("() => !document.evaluate(\"//button[normalize-space()='Add to the picker']\", document,"
                          " null, 9, null).singleNodeValue.disabled")
    tab.get_by_role("button", name="Add to the picker").click()
    wait_idle(tab)
    assert "Added my-class-model" in tab.locator('[data-testid="stAlert"]').first.inner_text()
    assert tab.get_by_role("tab", selected=True).inner_text().strip() == "Attention Lab checkpoint"
    assert picked(tab) == "my-class-model"
    shot(tab, "open-model-added")
    for label in ("Attention", "Training curves", "Home"):
        go(tab, label)
        assert picked(tab) == "my-class-model", f"after switching to {label}"
    tab.get_by_role("combobox", name="Checkpoint", exact=True).click()
    assert tab.get_by_role("option", name="my-class-model", exact=True).count() == 1
    tab.keyboard.press("Escape")


def birthplace_models(checkpoint_folder: Path) -> list[str]:
    return [i.name for i in list_checkpoints(checkpoint_folder) if not i.error and i.task == "birthplace"]


def test_a_question_typed_with_a_question_mark_gets_an_answer(tab, hosted, checkpoint_folder):
    models = birthplace_models(checkpoint_folder)
    open_page(tab, hosted.url + "/probe")
    box = tab.get_by_label(ASK_BOX, exact=True)
    box.fill("Where was Alan Turing born?")
    box.press("Enter")
    wait_idle(tab)
    prompt = tab.locator('[data-testid="stMarkdown"]', has_text="Prompt:").first.inner_text()
    asked = prompt.rsplit(" · ", 1)[0]  # then the true birthplace, when the question is in a file
    assert "Where was Alan Turing born?" in asked and asked.rstrip().endswith("MASK") and MASK_CHAR not in prompt
    cells = tab.locator('[data-testid="stDataFrame"]').first.locator('[role="gridcell"]').all_inner_texts()
    for model in models:  # each row: model, greedy answer, ...; an answer is a non-empty place
        row = cells.index(model)
        assert cells[row + 1].strip(), f"{model} gave no answer: {cells[:12]}"
    assert not tab.locator('[data-testid="stAlertContentWarning"]').count()
    shot(tab, "probe-ask")


def test_a_copied_probe_link_reopens_the_probe_view(tab, hosted, browser, checkpoint_folder):
    models = birthplace_models(checkpoint_folder)
    open_page(tab, hosted.url + "/probe")
    choose(tab, "Model for the details", models[-1])
    box = tab.get_by_label(ASK_BOX, exact=True)
    box.fill("Ada Lovelace")
    box.press("Enter")
    wait_idle(tab)
    copied = tab.url
    assert query(tab)["tab"] == ["ask"] and query(tab)["name"] == ["Ada Lovelace"]
    tab.get_by_role("tab", name="Fabricate").click()
    wait_idle(tab)
    warnings = tab.locator('[data-testid="stAlertContentWarning"]').all_inner_texts()
    assert len([w for w in warnings if "never seen" in w or "never read" in w]) <= 1, warnings  # one, not per model
    shot(tab, "probe-fabricate")
    fabricate = tab.url
    assert query(tab)["tab"] == ["fabricate"]
    for link, selected in ((copied, "Ask"), (fabricate, "Fabricate")):
        with browser_page(browser, SMALL) as other:  # a new session, as a student opening the link
            open_page(other, link)
            assert other.get_by_role("tab", selected=True).inner_text().strip() == selected
            focus = other.get_by_role("combobox", name="Model for the details")
            assert focus.input_value() == models[-1]
            if selected == "Ask":
                assert other.get_by_label(ASK_BOX, exact=True).input_value() == "Ada Lovelace"
                assert "Where was Ada Lovelace born?" in other.locator(
                    '[data-testid="stMarkdown"]', has_text="Prompt:").first.inner_text()


def test_server_folders_refuse_traversal_and_symlink_escapes(tab, hosted):
    open_page(tab, hosted.url + "/curves")
    tab.get_by_text("More runs: a folder of checkpoints").click()
    box = tab.get_by_label("Folder on this machine", exact=True)
    for typed, words in ((f"{hosted.allowed}/../{hosted.secret.name}", "'..'"),
                         (f"{hosted.allowed}/out", "outside the folders"), ("/etc", "outside the folders")):
        box.fill(typed)
        box.press("Enter")
        wait_idle(tab)
        warning = tab.locator('[data-testid="stAlertContentWarning"]').first.inner_text()
        assert words in warning, warning
        assert "private (log)" not in tab.content()
    shot(tab, "curves-refused")
    assert not tab.locator('[data-testid="stException"]').count()


def test_the_default_server_shows_no_folder_boxes(page, server):
    """The shared server runs without ATTENTION_LAB_ALLOWED_DIRS: no path box on Open your model; the Training
    curves page, run locally (this machine's browser, ATTENTION_LAB_ANY_FOLDER unset), takes any folder typed."""
    assert "ATTENTION_LAB_ALLOWED_DIRS" not in os.environ and "ATTENTION_LAB_ANY_FOLDER" not in os.environ
    page.set_viewport_size(SMALL)
    open_page(page, server.url + "/open_model")
    assert page.get_by_label("Save to a folder (optional)").count() == 0
    assert "ATTENTION_LAB_ALLOWED_DIRS" in page.locator('[data-testid="stMain"]').inner_text()
    shot(page, "open-model")
    open_page(page, server.url + "/curves")
    page.get_by_text("More runs: a folder of checkpoints").click()
    assert page.get_by_label("Folder on this machine", exact=True).count() == 1  # run locally: any (issue 53)
    shot(page, "curves")
