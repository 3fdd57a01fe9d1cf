"""The positional encodings page renders with a tiny family, with unrelated checkpoints, with none, and
with the bundled LM set when it exists; the extrapolation runs behind its button."""

import hashlib
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from core.io import checkpoint
from tests.conftest import ROOT, TINY_CORPUS, save_tiny_checkpoint, tiny_model
from ui.page_state import POSITIONAL_SECTION_TITLES as SECTION_TITLES

PAGE = str(ROOT / "pages" / "positional.py")
SCHEMES = ("learned", "sinusoidal", "alibi", "rope")
BUNDLED = [ROOT / "checkpoints" / f"lm-{p}.safetensors" for p in SCHEMES]


def page(folder: Path, monkeypatch, tab: str = "tables") -> AppTest:
    """The page with one tab open (only the open tab runs)."""
    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(folder))
    at = AppTest.from_file(PAGE, default_timeout=120)
    at.session_state["pos_tab"] = SECTION_TITLES[tab]
    at.run()
    assert not at.exception, at.exception
    return at


def run_extrapolation(at: AppTest, max_tokens: int = 48, max_sliding: int | None = None) -> AppTest:
    at.number_input(key="pos_max_windows").set_value(max_tokens)
    at.number_input(key="pos_max_sliding").set_value(max_sliding or max_tokens)
    at.button[0].click().run()  # the form's submit button
    assert not at.exception, at.exception
    return at


def texts(at: AppTest) -> str:
    elements = [*at.markdown, *at.caption, *at.info, *at.warning]
    return "\n".join(e.value for e in elements)


@pytest.fixture
def tiny_family(tmp_path: Path) -> Path:
    """Four tiny LMs differing only in positional encoding, trained on a corpus file they record."""
    from core.model.tokenizer import CharTokenizer

    folder = tmp_path / "family"
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(TINY_CORPUS * 20, encoding="utf-8")
    tokenizer = CharTokenizer.from_corpus(TINY_CORPUS)
    data = [{"path": str(corpus), "sha256": hashlib.sha256(corpus.read_bytes()).hexdigest()}]
    for name, positional in [("one", "learned"), ("two", "sinusoidal"), ("three", "alibi"), ("four", "rope")]:
        model = tiny_model(tokenizer.vocab_size, positional=positional, block_size=16)
        checkpoint.save(folder / f"{name}.safetensors", model, tokenizer, "lm", data=data,
                        extra={"val_fraction": "0.1", "level": "char"},
                        history=[{"run": name, "step": 5, "epoch": 1, "tokens": 10, "wall_time": 1.0,
                                  "split": "val", "metric": "loss", "value": 2.0}])
    save_tiny_checkpoint(folder / "classifier.safetensors", "classify")
    return folder


def test_page_shows_the_family_and_runs_the_extrapolation(tiny_family, monkeypatch):
    at = page(tiny_family, monkeypatch)
    assert "4 lm checkpoints identical except positional encoding" in texts(at).replace("\\", "")
    assert at.selectbox(key="pos_learned_source").value == "one"
    assert len(at.get("plotly_chart")) == 2  # the sinusoidal and the learned table
    assert [len(page(tiny_family, monkeypatch, tab).get("plotly_chart")) for tab in ("similarity", "alibi", "rope")
            ] == [4, 1, 1]
    at = page(tiny_family, monkeypatch, "sentence")
    assert len(at.get("plotly_chart")) == 5  # 4 maps, by distance
    at = page(tiny_family, monkeypatch, "extrapolation")
    assert "the validation split of training" in texts(at).replace("\\", "")
    at = run_extrapolation(at, max_tokens=80)  # 4x the block size (64) fits in one window
    plain = [m.value.replace("\\", "") for m in at.markdown]
    summary = [m for m in plain if "training length (" in m]
    assert summary and "dev perplexity" in summary[0]
    assert any("no number for learned at 1.5x, 2x, 3x, 4x (no positions past 16"
               in m.value.replace("\\", "") for m in at.markdown)
    table = at.table[-1].value.reset_index()  # st.table: column names wrap instead of being cut at 1024 px
    assert len(table) == 4 * 6 * 2  # one row per (variant, length, protocol)
    learned = table[table["variant"] == "learned"]
    assert learned[learned["length"] > 16]["perplexity"].isna().all()
    assert learned[learned["length"] <= 16]["perplexity"].notna().all()
    assert table[table["variant"] != "learned"]["perplexity"].notna().all()
    at.selectbox(key="pos_position_length").set_value(16).run()
    assert not at.exception


def test_page_controls_rerun_without_errors(tiny_family, monkeypatch):
    at = page(tiny_family, monkeypatch)
    at.slider(key="pos_length").set_value(24)
    at.slider(key="pos_dim").set_value(16)
    at.number_input(key="pos_heads").set_value(6).run()
    assert not at.exception, at.exception
    for tab in ("similarity", "alibi", "rope"):
        at.session_state["pos_tab"] = SECTION_TITLES[tab]
        at.run()
        assert not at.exception, at.exception
        assert at.slider(key="pos_length").value == 24  # the sizes stay when the tab changes
    at = page(tiny_family, monkeypatch, "sentence")
    at.text_input(key="pos_text").input("Ada <b>was</b> born in Zürich ☃")
    at.selectbox(key="pos_layer").set_value(1).run()
    assert not at.exception, at.exception
    assert any("not in the vocabulary" in w.value for w in at.warning)
    at.text_input(key="pos_text").input("").run()
    assert not at.exception and any("empty" in w.value for w in at.warning)
    at = page(tiny_family, monkeypatch, "training")
    at.radio(key="pos_metric").set_value("perplexity")
    at.checkbox(key="pos_train").check().run()
    assert not at.exception, at.exception


def test_the_url_reopens_the_tab_sentence_and_head(tiny_family, monkeypatch):
    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(tiny_family))
    at = AppTest.from_file(PAGE, default_timeout=120)
    at.query_params.update({"pos_section": "sentence", "pos_text": "Ada was born", "pos_head": "1"})
    at.run()
    assert not at.exception, at.exception
    assert at.text_input(key="pos_text").value == "Ada was born" and at.selectbox(key="pos_head").value == 1
    assert len(at.get("plotly_chart")) == 5  # the sentence tab is the open one
    at.selectbox(key="pos_layer").set_value(1).run()
    assert at.query_params["pos_layer"] == "1" and at.query_params["pos_section"] == "sentence"


def test_page_with_unrelated_checkpoints_explains_and_evaluates_the_selected_model(tiny_checkpoints,
                                                                                  monkeypatch):
    at = page(tiny_checkpoints, monkeypatch, "extrapolation")
    assert any("No checkpoints differ only in their positional encoding" in i.value for i in at.info)
    assert any("records no training corpus" in i.value.replace("\\", "") for i in at.info)
    at.text_area(key="pos_dev_text").input("Ada Lovelace was born in London . " * 3).run()
    at = run_extrapolation(at, max_tokens=40)
    assert any("training length (" in m.value.replace("\\", "") for m in at.markdown)
    at.text_area(key="pos_dev_text").input("").run()
    assert not at.exception and any("no text to evaluate" in w.value for w in at.warning)


def test_page_without_checkpoints_still_draws_the_encodings(tmp_path, monkeypatch):
    at = page(tmp_path / "empty", monkeypatch)
    assert any("No checkpoint with learned positions" in i.value for i in at.info)
    assert len(at.get("plotly_chart")) == 1
    assert len(page(tmp_path / "empty", monkeypatch, "alibi").get("plotly_chart")) == 1
    at = page(tmp_path / "empty", monkeypatch, "sentence")
    assert any("needs causal language models" in i.value for i in at.info)


def test_page_is_reachable_from_the_app(tiny_family, monkeypatch):
    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(tiny_family))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.run()
    at.switch_page("pages/positional.py")
    at.run()
    assert not at.exception, at.exception
    assert at.title[0].value == "Positional encodings"


@pytest.mark.skipif(not all(p.exists() for p in BUNDLED), reason="the bundled LM set is not trained yet")
def test_page_with_the_bundled_lm_set(monkeypatch):
    at = page(ROOT / "checkpoints", monkeypatch, "extrapolation")
    shown = texts(at).replace("\\", "")
    assert "4 lm checkpoints identical except positional encoding" in shown
    at.multiselect(key="pos_factors").set_value([1.0, 4.0])
    block = checkpoint.read_metadata(BUNDLED[0])["config"]["block_size"]
    at = run_extrapolation(at, max_tokens=4 * block + 2, max_sliding=64)  # one window of 4 x block + 1 at least
    table = at.table[-1].value.reset_index()
    assert len(table) == 4 * 2 * 2
    learned = table[table["variant"] == "learned"]
    assert learned[learned["length"] == 4 * block]["perplexity"].isna().all()
    assert table[table["variant"] != "learned"]["perplexity"].notna().all()


def test_the_sentence_tab_survives_every_hostile_input(tiny_family, monkeypatch):
    """The sentence box now lives in a tab that the app-wide hostile suite (first runs only) never opens."""
    from tests.hostile_inputs import HOSTILE_INPUTS

    at = page(tiny_family, monkeypatch, "sentence")
    for hostile in [h for h in HOSTILE_INPUTS if not h.surrogate and not h.huge]:
        at.text_input(key="pos_text").input(hostile.text).run()
        assert not at.exception, (hostile.id, at.exception)
        shown = [m.value for m in [*at.markdown, *at.caption, *at.warning, *at.info]]
        assert not any("<script" in value for value in shown), hostile.id  # user text never rendered as markup


def test_text_over_a_box_limit_is_cut_with_a_sentence(tiny_family, monkeypatch):
    # issue 41: 3,000 characters pasted into "One sentence" (max_chars=1000) or Anatomy's input (500) left the
    # old text in place with no message; now the first characters are read, and one sentence says so
    SENTENCE_CHARS, INPUT_CHARS = 1000, 500  # ui.positional_views.SENTENCE_CHARS, pages.anatomy.INPUT_CHARS
    at = page(tiny_family, monkeypatch, "sentence")
    long_text = "Ada was born. " * 215  # 3,010 characters
    at.text_input(key="pos_text").input(long_text).run()
    assert not at.exception, at.exception
    notes = [i.value for i in at.info if "characters" in i.value]
    assert notes == [f"The sentence has {len(long_text):,} characters; the first {SENTENCE_CHARS:,} are used "
                     f"(this box reads at most {SENTENCE_CHARS:,})."]
    assert at.text_input(key="pos_text").value == long_text  # kept in the box, not dropped
    assert at.get("plotly_chart")  # and drawn from its first characters
    anatomy = AppTest.from_file(str(ROOT / "pages" / "anatomy.py"), default_timeout=120).run()
    anatomy.text_input(key="anatomy_text").input(long_text).run()
    assert not anatomy.exception, anatomy.exception
    assert any(f"the first {INPUT_CHARS:,} are used" in i.value for i in anatomy.info)


def test_run_again_with_the_shown_settings_says_it_reused_them_and_the_table_shows_the_spread(tiny_family,
                                                                                              monkeypatch):
    # issue 41: with the settings already shown a click changed nothing visible; the table had no spread
    at = page(tiny_family, monkeypatch, "extrapolation")
    at = run_extrapolation(at, max_tokens=80)
    assert not any("reused" in i.value for i in at.info)
    table = at.table[-1].value.reset_index()
    spread = "perplexity ±2 s.e. (8 parts)"
    shown = table[table["perplexity"].notna()]
    assert shown[spread].str.contains("–").all()  # every number has its range
    at.button[0].click().run()  # Run again, same settings
    assert not at.exception, at.exception
    assert any("settings already shown" in i.value and "nothing was recomputed" in i.value for i in at.info)
    assert "Nothing was recomputed" in texts(at)
    at.number_input(key="pos_max_windows").set_value(64)
    at.button[0].click().run()  # other settings: computed, no such sentence
    assert not any("reused" in i.value for i in at.info)
