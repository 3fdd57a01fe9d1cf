"""The Birthplace probe page through Streamlit's AppTest: every tab, bad input, uploads, no models."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from urllib.parse import parse_qs

import pytest
from streamlit.testing.v1 import AppTest

from core.data.world import generate_world, write_world
from core.data.world_tables import COUNTRIES
from core.io.checkpoint import list_checkpoints
from core.lens.probe import corpus, dev_set
from core.lens.probe.questions import name_from_question
from core.model.tokenizer import MASK_CHAR
from core.text import MASK_LABEL
from tests.conftest import ROOT, save_tiny_checkpoint

APP = str(ROOT / "app.py")
BUNDLED = ROOT / "checkpoints"
TWO_MODELS = ["tiny-birthplace", "tiny-birthplace-synth"]


@pytest.fixture(scope="module")
def small_world(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("probe_world")
    write_world(generate_world(5, n_people=60, n_dev=12, n_test=0), folder)
    return folder


@pytest.fixture
def models(tiny_checkpoints: Path) -> Path:
    """The tiny fixtures plus a second birthplace model (synthesizer), so the page compares two."""
    # block 64: long enough to score every candidate place
    save_tiny_checkpoint(tiny_checkpoints / "tiny-birthplace-synth.safetensors", "birthplace",
                         attention="synthesizer", block_size=64)
    return tiny_checkpoints


def open_page(monkeypatch, checkpoints: Path, world: Path | None, tab: str = "Ask") -> AppTest:
    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(checkpoints))
    if world is not None:
        monkeypatch.setenv(corpus.WORLD_ENV, str(world))
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.switch_page("pages/probe.py")
    at.session_state["probe_tab"] = tab
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def texts(at: AppTest) -> list[str]:
    return [t.value for t in at.text]


def messages(elements) -> list[str]:
    """st.error / st.warning text as shown: `plain()` escaped Markdown with backslashes."""
    return [e.value.replace("\\", "") for e in elements]


def prompt_lines(at: AppTest) -> list[str]:
    """The prompt lines as shown (Markdown, user text escaped): the question, the MASK marker, the truth."""
    return [m.value.replace("\\", "") for m in at.markdown if m.value.startswith("**Prompt:**")]


def prompts(at: AppTest) -> list[str]:
    return [line.rsplit(" · ", 1)[0] for line in prompt_lines(at)]


def truths(at: AppTest) -> list[str]:
    return [line.rsplit(" · ", 1)[1] for line in prompt_lines(at)]


def asked(question: str) -> str:
    return f"**Prompt:** {question} :violet-badge[{MASK_LABEL}]"


def frames(at: AppTest) -> list:
    return [d.value for d in at.dataframe]


def test_ask_shows_every_model_answer_truth_and_evidence(monkeypatch, models, small_world):
    at = open_page(monkeypatch, models, small_world)
    assert sorted(at.multiselect(key="probe_models").value) == TWO_MODELS
    data = corpus.load_probe_data(small_world)
    question, truth = data.dev_pairs[0]
    shown = texts(at)
    assert prompts(at) == [asked(question)]
    assert truths(at) == [f"**true birthplace** (birth_dev.tsv): {truth}"]
    assert "The true place is among them." in shown
    shown_answers = frames(at)[0]
    assert sorted(shown_answers["model"]) == TWO_MODELS
    assert len(at.get("plotly_chart")) >= 1  # the attention heatmap (candidates may not fit a block of 32)
    assert any(code.value.startswith(name_from_question(question)) for code in at.code)
    link = at.get("page_link")[0].proto
    focus = at.selectbox(key="probe_focus").value
    assert link.page == "attention"
    # the question as typed: the Attention page appends the MASK itself (its box would show ⁇ as "born???")
    assert parse_qs(link.query_string) == {"model": [focus], "text": [question]}


def test_ask_shows_the_candidates_of_the_focus_model(monkeypatch, models, small_world):
    at = open_page(monkeypatch, models, small_world)
    at.selectbox(key="probe_focus").set_value("tiny-birthplace-synth").run()
    assert not at.exception
    at.slider(key="probe_ask_k").set_value(5).run()
    specs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    bars = [s for s in specs if s["data"][0]["type"] == "bar"]
    assert len(bars) == 1 and "tiny-birthplace-synth: top 5 of" in bars[0]["layout"]["title"]["text"]
    probabilities = bars[0]["data"][0]["x"]
    assert len(probabilities) == 5 and probabilities == sorted(probabilities, reverse=True)


def test_ask_about_an_unseen_name_and_bad_input(monkeypatch, models, small_world):
    at = open_page(monkeypatch, models, small_world)
    at.text_input(key="probe_ask").set_value("Where was <b>Nobody</b> Known born?").run()
    assert not at.exception
    shown = texts(at)
    assert prompts(at) == [asked("Where was <b>Nobody</b> Known born?")]
    assert any(s.startswith("No document of wiki.txt mentions this name") for s in shown)
    assert truths(at) == ["true birthplace unknown (not a question of the train or dev file)"]
    at.radio(key="probe_ask_view").set_value("heads").run()
    assert not at.exception and at.selectbox(key="probe_ask_layer").value == 0
    for bad, fragment in (("", "Type a name"), (f"Ada{MASK_CHAR} Lovelace", "reserved"), ("x" * 500, "at most")):
        at.text_input(key="probe_ask").set_value(bad).run()
        assert not at.exception
        assert any(fragment in m for m in messages(at.warning)), messages(at.warning)


def test_fabricate_compares_models_side_by_side(monkeypatch, models, small_world):
    at = open_page(monkeypatch, models, small_world, "Fabricate")
    at.number_input(key="probe_n").set_value(12).run()
    assert not at.exception
    summary, table = frames(at)[:2]
    assert sorted(summary["model"]) == TWO_MODELS
    assert list(table.columns[:3]) == ["name", "locale", "country"]
    assert sorted(table.columns[3:]) == TWO_MODELS
    assert len(table) == 12
    corpus_text = (small_world / corpus.CORPUS_FILE).read_text(encoding="utf-8")
    assert not any(name in corpus_text for name in table["name"])
    # the lead sentence (bold Markdown, escaped) is the focus model's numbers from the summary table
    sentence = next(m.value.replace("\\", "").strip("*") for m in at.markdown if "of the time" in m.value)
    focus = at.selectbox(key="probe_focus").value
    row = summary.set_index("model").loc[focus]
    home, prior = row["share in the name's country"], row["share = the country's prior"]
    assert sentence.startswith(f"For 12 names nobody wrote about, {focus} answers a city of the name's country "
                               f"{home:.0%} of the time")
    assert f"{prior:.0%} of its answers are that country's most common birthplace" in sentence
    assert len(at.get("plotly_chart")) == 3  # the lead figure, then the places and the heatmap (expander)
    lead = at.get("plotly_chart")[0].proto.spec
    assert '"kind":"home share"' in lead  # the lead figure: each model's home-country share vs chance
    at.multiselect(key="probe_locales").set_value([]).run()
    assert not at.exception and any("at least one locale" in m for m in messages(at.warning))


def test_dev_set_analysis_table_filters_and_example(monkeypatch, models, small_world):
    evaluated = []
    analyse = dev_set.analyse_dev
    monkeypatch.setattr(dev_set, "analyse_dev", lambda *a, **k: evaluated.append(1) or analyse(*a, **k))
    at = open_page(monkeypatch, models, small_world, "Dev set")
    assert len(evaluated) == 2  # one evaluation per model, then cached
    comparison = frames(at)[0]
    assert sorted(comparison["model"][:2]) == TWO_MODELS
    assert comparison["model"][2] == f"baseline: always '{corpus.load_probe_data(small_world).baseline_place}'"
    assert comparison["questions"].tolist() == [12, 12, 12, 12]
    # the country prior, written out independently: each truth's country, its most frequent train label
    data = corpus.load_probe_data(small_world)
    country = {city: c.label for c in COUNTRIES for city in c.city_names}
    counts = Counter(data.train_places)
    best = {}
    for place in sorted(counts, key=lambda x: (-counts[x], x)):
        best.setdefault(country.get(place), place)
    hits = sum(best.get(country.get(truth)) == truth for _, truth in data.dev_pairs)
    prior = comparison.set_index("model").loc["baseline: the name's country's most frequent place"]
    assert prior["correct"] == hits and prior["accuracy"] == pytest.approx(hits / 12)
    assert any(t.startswith("Expected calibration error") for t in texts(at))
    table = next(f for f in frames(at) if "category" in getattr(f, "columns", []) and "truth" in f.columns)
    assert len(table) == 12
    data = corpus.load_probe_data(small_world)
    at.selectbox(key="probe_dev_example").set_value(3).run()
    assert not at.exception
    assert prompts(at) == [asked(data.dev_pairs[3][0])]
    at.radio(key="probe_dev_outcome").set_value("wrong").run()
    assert not at.exception
    filtered = next(f for f in frames(at) if "category" in getattr(f, "columns", []) and "truth" in f.columns)
    focus = at.selectbox(key="probe_focus").value
    correct = int(comparison.set_index("model").loc[focus, "correct"])
    assert len(filtered) == 12 - correct and not filtered["correct"].any()
    assert len(at.get("download_button")) == 2
    at.radio(key="probe_dev_outcome").set_value("correct").run()
    assert not at.exception
    if correct == 0:
        assert any(i.value == "No question matches these filters." for i in at.info)
    assert len(evaluated) == 2  # filters and example choices reuse the cached evaluation


@pytest.mark.parametrize("content, fragment", [
    (b"", "empty"),
    (b"Where was Ada born? London\n", "it is plain text"),
    (os.urandom(5 * 1024 * 1024), "MB"),
    (bytes(range(128, 256)) * 40, "not UTF-8"),
])
def test_bad_uploads_give_one_sentence(monkeypatch, models, small_world, content, fragment):
    at = open_page(monkeypatch, models, small_world, "Dev set")
    at.radio(key="probe_dev_source").set_value("upload").run()
    assert any("Upload a file" in i.value for i in at.info)
    at.file_uploader(key="probe_upload").upload("questions.tsv", content, "text/tab-separated-values").run()
    assert not at.exception
    assert any(fragment in m for m in messages(at.error)), messages(at.error)


def test_an_upload_with_unknown_characters_is_evaluated_with_a_warning(monkeypatch, models, small_world):
    at = open_page(monkeypatch, models, small_world, "Dev set")
    at.radio(key="probe_dev_source").set_value("upload").run()
    content = "Where was Zoë Ωmega born?\tLondon\nWhere was Ada Lovelace born?\tParis\n".encode()
    at.file_uploader(key="probe_upload").upload("mine.tsv", content).run()
    assert not at.exception and not at.error
    assert any("never seen" in m and "Ω" in m for m in messages(at.warning))
    assert frames(at)[0]["questions"].tolist()[0] == 2


def test_no_birthplace_checkpoint_is_one_sentence(monkeypatch, tmp_path, small_world):
    folder = tmp_path / "only-lm"
    save_tiny_checkpoint(folder / "tiny-lm.safetensors", "lm")
    at = open_page(monkeypatch, folder, small_world)
    assert [i.value for i in at.info][-1].startswith("There is no birthplace checkpoint yet")
    assert not at.error and not at.get("plotly_chart")


def test_missing_world_files_are_a_warning(monkeypatch, models, tmp_path):
    at = open_page(monkeypatch, models, tmp_path)
    assert any("missing" in m for m in messages(at.warning))


def test_page_file_runs_on_its_own(monkeypatch, models, small_world):
    """Without app.py's navigation the attention link falls back to a plain URL."""
    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(models))
    monkeypatch.setenv(corpus.WORLD_ENV, str(small_world))
    at = AppTest.from_file(str(ROOT / "pages" / "probe.py"), default_timeout=120)
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    focus = at.selectbox(key="probe_focus").value
    link = next(t for t in texts(at) if t.startswith("Attention page: "))
    assert link.startswith(f"Attention page: attention?model={focus}&text=Where%20was%20")
    assert link.endswith("%20born%3F")  # the question, URL-encoded, without the ⁇ (the page adds it)


def bundled_birthplace() -> bool:
    if not BUNDLED.is_dir():
        return False
    return any(i.task == "birthplace" and not i.error for i in list_checkpoints(BUNDLED))


@pytest.mark.slow
@pytest.mark.skipif(not bundled_birthplace(), reason="no bundled birthplace checkpoint in checkpoints/")
@pytest.mark.parametrize("tab", ["Ask", "Fabricate", "Dev set"])
def test_bundled_checkpoints_render_every_tab(monkeypatch, tab):
    monkeypatch.delenv(corpus.WORLD_ENV, raising=False)
    at = open_page(monkeypatch, BUNDLED, None, tab)
    assert not at.error
    assert len(at.get("plotly_chart")) >= 1


def test_bundled_birthplace_models_show_what_they_stored_and_what_finetuning_reached(monkeypatch):
    """The bundled family on its own world (found from the models' metadata, no ATTENTION_LAB_WORLD): the Dev
    set tab's 2x2 per model adds up to the dev file, and its sentences are the figure's counts."""
    monkeypatch.delenv(corpus.WORLD_ENV, raising=False)
    at = open_page(monkeypatch, BUNDLED, None, "Dev set")
    chart = next(c for c in at.get("plotly_chart") if "Dev people: fact stored" in c.proto.spec)
    spec = json.loads(chart.proto.spec)
    dev = len(corpus.load_probe_data(ROOT / "data" / "knowledge").dev_pairs)
    assert dev >= 200
    grids = {trace["meta"][0] if isinstance(trace.get("meta"), list) else i: trace["z"]
             for i, trace in enumerate(spec["data"])}
    assert len(grids) == 3 and all(int(sum(map(sum, z))) == dev for z in grids.values())
    said = [t for t in texts(at) if "finetuning answers" in t or "stored nothing" in t]
    assert len(said) == 3
    for sentence, z in zip(said, spec["data"], strict=True):
        (stored_hit, stored_miss), (guess_hit, _) = ([int(v) for v in row] for row in z["z"])
        if "stored nothing" in sentence:
            assert stored_hit == stored_miss == 0 and f"answers {guess_hit} of {dev}" in sentence
        else:
            assert f"completes {stored_hit + stored_miss} of {dev}" in sentence
            assert f"finetuning answers {stored_hit} of those" in sentence and f"and {guess_hit} people" in sentence


def test_a_200_character_name_is_cut_to_what_the_models_read_with_a_note(monkeypatch):
    """Issue 41: a 200-character name got "None" confidence and the answer "idtolome" (the model read only the
    question's tail). It is cut to the longest start the bundled models read with every candidate, with a note,
    and every model then has a confidence."""
    monkeypatch.delenv(corpus.WORLD_ENV, raising=False)
    at = open_page(monkeypatch, BUNDLED, None)
    long_name = ("Jan Novák " * 20)[:200]
    at.text_input(key="probe_ask").set_value(long_name).run()
    assert not at.exception
    note = next(i.value.replace("\\", "") for i in at.info if i.value.startswith("The name is"))
    cut = note.rsplit("characters: ", 1)[1]
    assert f"The name is {len(long_name.strip())} characters" in note and long_name.startswith(cut)
    assert len(cut) < 120 and not cut.endswith(" Nov")  # cut at a word's end
    assert prompts(at) == [asked(f"Where was {cut} born?")]
    table = frames(at)[0]
    assert table["confidence"].notna().all(), table
