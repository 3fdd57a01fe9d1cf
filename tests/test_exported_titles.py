"""Exported figures say what they show (issue 63 item 9): the PNG or SVG a chart's toolbar saves carries the
model's name and the sentence in its title, and the model view labels every query row (or says why not)."""

from __future__ import annotations

import json

import numpy as np
from streamlit.testing.v1 import AppTest

from core.figures import attention as figs
from core.figures.common import figure_title
from tests.conftest import ROOT

SENTENCE = "Karl Long was a British cyclist and engineer born in Leeds ."


def test_the_title_names_the_model_and_quotes_the_sentence_cut_to_a_line():
    title = figure_title("Layer 0, head 1", "lm-learned", "The cat\nsat.")
    assert title == "lm-learned · Layer 0, head 1 · “The cat sat.”"
    long = figure_title("x", "m", "a" * 100, limit=20)
    assert long == "m · x · “" + "a" * 19 + "…”"
    assert figure_title("x") == "x"


def test_the_model_view_labels_every_row_where_it_fits_and_says_why_not_where_not():
    tokens = [f"t{i}" for i in range(20)]
    fig = figs.attention_model_view(np.random.rand(2, 4, 20, 20), tokens=tokens, title="lm · model view")
    ys = [fig.layout[k] for k in fig.layout if k.startswith("yaxis")]
    assert all(y.dtick == 1 and y.tickmode == "linear" for y in ys)  # every query of the first column labelled
    assert fig.layout.title.text == "lm · model view"
    many = [f"t{i}" for i in range(60)]
    fig = figs.attention_model_view(np.random.rand(2, 4, 60, 60), tokens=many, title="lm")
    step = fig.layout.yaxis.dtick
    assert step > 1 and f"Every {step} rows labelled: 60 queries in" in fig.layout.title.text


def test_the_attention_pages_charts_carry_the_model_and_the_sentence(monkeypatch):
    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(ROOT / "checkpoints"))
    at = AppTest.from_file(str(ROOT / "pages" / "attention.py"), default_timeout=120)
    at.query_params.update(model="lm-learned", text=SENTENCE, view="model")
    at.run()
    assert not at.exception, [e.message for e in at.exception]

    def title() -> str:
        return json.loads(at.get("plotly_chart")[0].proto.spec)["layout"]["title"]["text"].replace("<br>", " ")

    shown = title()
    assert shown.startswith("lm-learned · Every layer × head (layer 0, head 0 framed) ·") and "Karl Long was" in shown
    at.radio(key="attn_view").set_value("single").run()
    assert title().startswith("lm-learned · Layer 0, head 0 · “Karl Long was a British")


def test_the_positional_pages_maps_carry_their_model_and_the_sentence(monkeypatch):
    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(ROOT / "checkpoints"))
    at = AppTest.from_file(str(ROOT / "pages" / "positional.py"), default_timeout=180)
    at.session_state["pos_tab"] = "One sentence"
    at.run()
    assert not at.exception, at.exception
    titles = [json.loads(c.proto.spec)["layout"]["title"]["text"].replace("<br>", " ") for c in at.get("plotly_chart")]
    maps = [t for t in titles if "layer 0, head 0" in t]
    assert len(maps) == 4 and all(t.startswith("lm-") and "“Karl Long was" in t for t in maps), titles
    assert any(t.startswith("Attention by distance, layer 0 · “Karl Long") for t in titles), titles


def test_the_head_roles_maps_name_their_model(monkeypatch):
    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(ROOT / "checkpoints"))
    at = AppTest.from_file(str(ROOT / "pages" / "attention.py"), default_timeout=300)
    at.query_params.update(model="induction")
    at.session_state["attn_roles_on"] = True
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    titles = [json.loads(c.proto.spec)["layout"].get("title", {}).get("text", "") for c in at.get("plotly_chart")]
    assert "induction · head roles at step 1,500 on repeated random tokens" in [t.replace("<br>", " ") for t in titles]
