"""The Errors page through Streamlit's AppTest on the bundled checkpoints: the caption is the core's, the URL
reopens every choice, bad input is one sentence, server folders only where the operator allowed them."""

from __future__ import annotations

import json

import pytest
from streamlit.testing.v1 import AppTest

from core.io import checkpoint as ckpt
from core.io.folders import ALLOWED_DIRS_ENV, NOT_ALLOWED
from core.lens.errors import classify, inputs
from tests.conftest import ROOT
from tests.test_curves_page import array  # plotly's packed arrays

APP = str(ROOT / "app.py")
NAMES_TEST = ROOT / "data" / "knowledge" / "names_test.tsv"


def open_errors(monkeypatch, query: dict[str, str]) -> AppTest:
    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(ROOT / "checkpoints"))
    at = AppTest.from_file(APP, default_timeout=120)
    for key, value in query.items():
        at.query_params[key] = value
    at.run()
    at.switch_page("pages/errors.py")
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def unescaped(values) -> str:
    return " ".join(v.replace("\\", "") for v in values)


@pytest.fixture(scope="module")
def names_result() -> classify.ClassifierErrors:
    loaded = ckpt.load(ROOT / "checkpoints" / "names-pretrained.safetensors")
    pairs = inputs.classifier_pairs(inputs.read_eval_path(NAMES_TEST), loaded.labels)
    return classify.score_classifier(loaded.model, loaded.tokenizer, loaded.labels, pairs, "names-pretrained")


def test_the_page_opens_on_the_classifier_with_the_cores_caption(monkeypatch, names_result):
    at = open_errors(monkeypatch, {"model": "names-pretrained"})
    assert names_result.caption() in unescaped(m.value for m in at.markdown)
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    cells = next(t for t in spec["data"] if t["type"] == "scatter")
    texts = [int(t) for t in cells["text"] if t]
    assert sum(texts) == 200  # the confusion matrix drawn sums to the examples


def test_the_url_filters_the_table_to_one_cell(monkeypatch, names_result):
    at = open_errors(monkeypatch, {"model": "names-pretrained", "err_gold": "United States",
                                   "err_pred": "United Kingdom", "err_outcome": "wrong"})
    count = int(names_result.confusion().at["United States", "United Kingdom"])
    assert f"{count} of 200 examples match" in unescaped(c.value for c in at.caption)
    assert at.query_params["err_gold"] == "United States" and at.query_params["err_outcome"] == "wrong"


def test_a_bad_regular_expression_is_one_warning(monkeypatch):
    at = open_errors(monkeypatch, {"model": "names-pretrained", "err_view": "slices", "err_pattern": "(van",
                                   "err_regex": "1"})
    warnings = [w.value for w in at.warning]
    assert len(warnings) == 1 and "is not a valid regular expression" in warnings[0]
    at.text_input(key="err_pattern").set_value("-").run()
    assert not at.warning and len(at.get("plotly_chart")) == 3  # gold, length, the typed slice


def test_a_language_model_opens_on_its_held_out_text_and_its_tokens(monkeypatch):
    at = open_errors(monkeypatch, {"model": "lm-learned", "err_view": "tokens"})
    caption = unescaped(m.value for m in at.markdown)
    assert "lm-learned has perplexity" in caption and "wiki.txt (last 10%)" in caption
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert {t["name"] for t in spec["data"]} <= {"top 1", "top 10", "top 100", "beyond"}


def test_a_birthplace_model_is_scored_question_by_question(monkeypatch):
    at = open_errors(monkeypatch, {"model": "birth-vanilla-pretrained"})
    assert "birth-vanilla-pretrained gets " in unescaped(m.value for m in at.markdown)
    assert "of 200 examples match" in unescaped(c.value for c in at.caption)


def test_server_folders_only_where_the_operator_allowed_them(monkeypatch, tmp_path):
    monkeypatch.delenv(ALLOWED_DIRS_ENV, raising=False)
    at = open_errors(monkeypatch, {"model": "names-pretrained", "err_source": "folder"})
    assert NOT_ALLOWED in [i.value for i in at.info]
    allowed = tmp_path / "allowed"
    allowed.mkdir()
    (allowed / "junk.tsv").write_bytes(b"\x00\x01binary")
    monkeypatch.setenv(ALLOWED_DIRS_ENV, str(allowed))
    at = open_errors(monkeypatch, {"model": "names-pretrained", "err_source": "folder", "err_folder": "/etc"})
    assert "is outside the folders this app may use" in unescaped(w.value for w in at.warning)
    at.text_input(key="err_folder").set_value(str(allowed)).run()
    warnings = [w.value for w in at.warning]
    assert len(warnings) == 1 and "binary file" in warnings[0]
    assert (allowed / "junk.tsv").read_bytes() == b"\x00\x01binary"


def test_a_piece_in_a_link_opens_its_attention_and_logit_lens(monkeypatch):
    from core.lens.errors import lm

    loaded = ckpt.load(ROOT / "checkpoints" / "lm-learned.safetensors")
    files = inputs.bundled_files(ROOT / "data", "lm", loaded.metadata)
    source = inputs.read_bundled(files[0])
    result = lm.score_lm(loaded.model, loaded.tokenizer, [(source.name, source.text)], "lm-learned")
    doc = 3
    piece = result.tokens[result.tokens["document"] == doc].iloc[5]
    at = open_errors(monkeypatch, {"model": "lm-learned", "err_view": "tokens", "err_doc": str(doc),
                                   "err_token": str(int(piece["position"]))})
    assert at.number_input(key="err_document_box").value == doc
    shown = unescaped(m.value for m in at.markdown) + unescaped(c.value for c in at.caption)
    assert f"rank {int(piece['rank'])} ({piece['bucket']})" in shown
    charts = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    assert len(charts) == 3  # the pieces, the attention at that position, the logit lens
    assert at.query_params["err_token"] == str(int(piece["position"]))


PA2 = ROOT.parent / "shared" / "pa2"


@pytest.mark.skipif(not (PA2 / "test_LM_obama.txt").is_file(), reason="the PA2 speeches are not in ../shared/pa2/")
def test_pa2_speakers_from_an_allowed_folder_are_one_row_each(monkeypatch):
    from core.lens.lm_eval import score_file

    monkeypatch.setenv(ALLOWED_DIRS_ENV, str(PA2))
    speakers = ["test_LM_hbush.txt", "test_LM_obama.txt", "test_LM_wbush.txt"]
    at = open_errors(monkeypatch, {"model": "lm-learned", "err_source": "folder", "err_folder": str(PA2),
                                   "err_paths": ",".join(speakers), "err_unit": "file", "err_view": "documents"})
    assert not at.warning, [w.value for w in at.warning]
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert list(spec["data"][0]["x"]) == speakers
    loaded = ckpt.load(ROOT / "checkpoints" / "lm-learned.safetensors")
    expected = [score_file(loaded.model, loaded.tokenizer, PA2 / s).perplexity for s in speakers]
    assert list(array(spec["data"][0]["y"])) == pytest.approx(expected, rel=1e-6)  # the trainer's, per speaker


def test_the_errors_state_round_trips_and_shares_no_url_key():
    from dataclasses import fields

    from ui import page_state as ps

    keys = [f.metadata["url"] for f in fields(ps.ErrorsState)]
    assert len(keys) == len(set(keys)) == len(fields(ps.ErrorsState))
    others = [f.metadata["url"] for cls in (ps.AttentionState, ps.ProbeState, ps.CurvesState, ps.PositionalState,
                                            ps.WhereFromState) for f in fields(cls)]
    assert not set(keys) & set(others) and "model" not in keys
    state = ps.ErrorsState(source="folder", folder="/data/pa2", paths=("a, b.txt", "c%.txt"), view="slices",
                           gold=("United States", "Côte d'Ivoire"), outcome="wrong", search="<b>x</b>", sort="loss",
                           descending=True, example=7, pins=("2", "73"), edit="=HYPERLINK()", pattern="(van|von)",
                           regex=True, compare="names-scratch", attention=True, layer=1, head=3, unit="file",
                           document=4, token=1795, piece_layer=1)
    assert ps.from_url(ps.ErrorsState, ps.to_url(state)) == (state, [])
    hostile = ps.from_url(ps.ErrorsState, {key: "\x00<script>" for key in keys})[0]
    assert hostile.view == "examples" and hostile.example is None and hostile.sort == "line"


def test_the_calibration_table_says_empty_bins_in_words(monkeypatch):
    """The walk-through: empty bins showed "None" in the accuracy and confidence columns."""
    at = open_errors(monkeypatch, {"model": "names-pretrained", "err_view": "calibration"})
    table = next(d.value for d in at.dataframe if "mean_confidence" in d.value.columns)
    empty = table["count"] == 0
    assert empty.any() and (table.loc[empty, "accuracy"] == "no example").all()
    assert table.loc[~empty, "accuracy"].str.endswith("%").all()
    assert not table.astype(str).isin(["None", "nan"]).any().any()


def test_a_long_probability_bar_keeps_its_percent_inside():
    """At 1024 px the label '98.9%' of a long bar ran past the plot and lost its '%': a long bar's label is inside."""
    from core.figures.errors import class_probability_bars

    fig = class_probability_bars(["France", "Italy"], {"as read": [0.989, 0.011]}, gold="Italy")
    assert list(fig.data[0].text) == ["98.9%", "1.1%"]
    assert list(fig.data[0].textposition) == ["inside", "outside"]


def test_a_search_that_leaves_the_example_out_moves_to_one_it_kept(monkeypatch):
    """The walk-through: a search that excluded the selected example left it shown under a table without it."""
    at = open_errors(monkeypatch, {"model": "names-pretrained"})
    first = at.session_state["errors_example"]
    table = next(d.value for d in at.dataframe if "gold" in d.value.columns and "text" in d.value.columns)
    kept = str(table.loc[table.index != first, "text"].iloc[0])
    at.text_input(key="err_search").input(kept).run()
    assert not at.exception, [e.message for e in at.exception]
    shown = next(d.value for d in at.dataframe if "gold" in d.value.columns and "text" in d.value.columns)
    chosen = at.session_state["errors_example"]
    assert chosen in shown.index and chosen != first
    headings = [h.value for h in [*at.header, *at.subheader]]
    assert any(h.startswith(f"Example {chosen} ") for h in headings), headings  # the example shown is in the table


def test_a_language_model_after_a_classifier_drops_the_classifiers_example_from_the_url(monkeypatch):
    """Issue 63: switching the model from a classifier to a language model left err_example (and the pins) in the
    URL, for an example the language model's file does not have."""
    at = open_errors(monkeypatch, {"model": "names-pretrained", "err_example": "7", "err_pins": "3,9"})
    assert at.query_params["err_example"] in ("7", ["7"]) and at.session_state["errors_example"] == 7
    at.sidebar.selectbox(key="picker_model").set_value("names-scratch").run()  # the same task and file: kept
    assert not at.exception and at.query_params["err_example"] in ("7", ["7"])
    at.sidebar.selectbox(key="picker_model").set_value("lm-learned").run()
    assert not at.exception, [e.message for e in at.exception]
    assert "err_example" not in at.query_params and "err_pins" not in at.query_params


def test_two_models_name_the_models_a_and_b_in_the_table_and_say_which_is_which(monkeypatch):
    """Issue 63: at 1024 px the disagreements table cut both model names ("names-pre", "p (names-pre")."""
    at = open_errors(monkeypatch, {"model": "names-pretrained", "err_view": "compare", "err_vs": "names-scratch"})
    table = at.dataframe[-1].value
    assert list(table.columns) == ["text", "gold", "A", "p (A)", "B", "p (B)", "right"]
    assert set(table["right"]) <= {"A", "B", "neither"}
    said = unescaped(c.value for c in at.caption)
    assert "A is names-pretrained, B is names-scratch" in said

