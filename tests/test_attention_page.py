"""The Attention page under Streamlit's AppTest: every checkpoint kind, every view, the URL, bad input."""

from __future__ import annotations

import base64
import json

import numpy as np
import pytest
import torch
from streamlit.testing.v1 import AppTest

from core.io.checkpoint import load
from core.lens import attention as av
from tests.conftest import ROOT, save_tiny_checkpoint

APP = str(ROOT / "app.py")
PAGE = str(ROOT / "pages" / "attention.py")
KINDS = ("tiny-lm", "tiny-birthplace", "tiny-classifier")
VIEWS = ("single", "model", "token", "qk", "combine", "compare")


def open_page(monkeypatch, folder, **params) -> AppTest:
    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(folder))
    at = AppTest.from_file(PAGE, default_timeout=60)
    for key, value in params.items():
        at.query_params[key] = value
    at.run()
    assert_no_exception(at)
    return at


def assert_no_exception(at: AppTest) -> None:
    assert not at.exception, [e.message for e in at.exception]


def charts(at: AppTest) -> list[dict]:
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


def array(value) -> np.ndarray:
    """A plotly JSON array: a plain list, or {dtype, bdata (base64), shape} for numpy data."""
    if isinstance(value, dict):
        data = np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"]))
        return data.reshape([int(n) for n in str(value.get("shape", len(data))).split(",")])
    return np.array(value, dtype=float)  # JSON null (NaN) -> nan


def model_attention(folder, name: str, text: str | None = None, ids: list[int] | None = None
                    ) -> tuple[np.ndarray, np.ndarray]:
    """What the model itself says for this text (or these ids): attention and mask, batch dropped."""
    loaded = load(folder / f"{name}.safetensors")
    if loaded.task == "birthplace" and text is not None and text.endswith("?"):
        text += "\u2047"  # a typed question: the page appends the MASK the model answers after
    idx = torch.tensor([loaded.tokenizer.encode(text) if ids is None else ids])
    with torch.no_grad():
        _, attention = loaded.model.run_with_attention(idx)
    return attention[:, 0].numpy(), loaded.model.attention_mask(idx)[0, 0].numpy()


def drawn(fig: dict) -> list[int]:
    """The positions a map draws (its rows and columns): all of a short input, a window of a long one."""
    meta = fig["data"][0]["meta"]
    return (meta[0] if isinstance(meta, list) else meta)["positions"]


def messages(at: AppTest) -> str:
    return " ".join(e.value for e in [*at.info, *at.warning, *at.error])


@pytest.mark.parametrize("name", KINDS)
def test_default_view_is_the_models_attention_for_each_kind(monkeypatch, tiny_checkpoints, name):
    at = open_page(monkeypatch, tiny_checkpoints, model=name)
    text = at.text_area(key="attn_text").value
    assert text  # a default sentence for this kind of model
    attention, allowed = model_attention(tiny_checkpoints, name, text)
    for layer, head in ((0, 0), (1, 3)):
        at.selectbox(key="attn_layer").select(layer)
        at.selectbox(key="attn_head").select(head).run()
        assert_no_exception(at)
        (fig,) = charts(at)
        z, p = array(fig["data"][0]["z"]), drawn(fig)  # a window past av.WHOLE_UP_TO tokens
        assert len(p) == min(len(allowed), av.WINDOW_TOKENS) and p[0] == 0
        shown, cut = attention[layer, head][np.ix_(p, p)], allowed[np.ix_(p, p)]
        np.testing.assert_array_equal(z[cut], shown[cut])
        assert np.isnan(z[~cut]).all()  # masked cells are not weight 0
        assert fig["layout"]["title"]["text"].startswith(f"{name} · Layer {layer}, head {head} · “")  # as exported
    assert at.query_params["head"] in ("3", ["3"])


@pytest.mark.parametrize("name", KINDS)
def test_every_view_renders_for_each_kind(monkeypatch, tiny_checkpoints, name):
    at = open_page(monkeypatch, tiny_checkpoints, model=name)
    for view in VIEWS:
        at.radio(key="attn_view").set_value(view).run()
        assert_no_exception(at)
        assert charts(at), view
        assert at.query_params["view"] in (view, [view])
    tables = " ".join(str(list(d.value.columns)) for d in at.dataframe)
    if name == "tiny-lm":
        assert "next #1" in tables
    elif name == "tiny-birthplace":
        assert any(t.value.startswith("Answer: ") for t in at.text)
    else:
        labels = [d.value for d in at.dataframe if "label" in d.value.columns][0]["label"].tolist()
        assert sorted(labels) == ["England", "France", "Italy"]


def test_the_page_is_listed_in_the_app(monkeypatch, tiny_checkpoints):
    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(tiny_checkpoints))
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.switch_page("pages/attention.py").run()
    assert_no_exception(at)
    assert at.title[0].value == "Attention" and charts(at)


def test_a_shared_link_reopens_the_same_view(monkeypatch, tiny_checkpoints):
    params = {"model": "tiny-lm", "text": "Ada was born in London.", "layer": "1", "head": "2",
              "view": "token", "token": "4"}
    at = open_page(monkeypatch, tiny_checkpoints, **params)
    assert at.sidebar.selectbox(key="picker_model").value == "tiny-lm"
    assert at.text_area(key="attn_text").value == params["text"]
    assert (at.selectbox(key="attn_layer").value, at.selectbox(key="attn_head").value) == (1, 2)
    assert at.radio(key="attn_view").value == "token"
    assert at.selectbox(key="attn_token").value == 4
    (fig,) = charts(at)
    attention, _ = model_attention(tiny_checkpoints, "tiny-lm", params["text"])
    np.testing.assert_allclose(array(fig["data"][2]["y"])[:5], attention[1, 2, 4, :5])
    for key, value in params.items():  # and the page writes the same state back
        assert at.query_params[key] in (value, [value])


def test_bad_url_values_fall_back_to_defaults(monkeypatch, tiny_checkpoints):
    at = open_page(monkeypatch, tiny_checkpoints, model="tiny-lm", layer="99", head="-3", view="bogus",
                   token="x")
    assert (at.selectbox(key="attn_layer").value, at.selectbox(key="attn_head").value) == (1, 0)
    assert at.radio(key="attn_view").value == "single"


def test_an_untouched_default_follows_the_picked_model(monkeypatch, tiny_checkpoints):
    at = open_page(monkeypatch, tiny_checkpoints, model="tiny-lm")
    at.sidebar.selectbox(key="picker_model").select("tiny-classifier").run()
    assert_no_exception(at)
    assert at.text_area(key="attn_text").value == "Ada Lovelace"


BAD_INPUTS = {
    "empty": "",
    "whitespace": "   \n\t ",
    "huge": "Ada Lovelace was born in London. " * 300 + "x" * 100,
    "unknown": "Ada Müller born in Zürich\x07",
    "emoji": "Ada 😀👍🏽 born 🇬🇧",
    "rtl": "שלום עולם مرحبا Ada \u202eborn",
    "script": "<script>alert('x')</script> **bold** [link](http://x)",
}


@pytest.mark.parametrize("name", KINDS)
@pytest.mark.parametrize("case", BAD_INPUTS)
def test_bad_input_gives_a_message_or_a_correct_map(monkeypatch, tiny_checkpoints, name, case):
    text = BAD_INPUTS[case]
    at = open_page(monkeypatch, tiny_checkpoints, model=name)
    at.text_area(key="attn_text").input(text).run()
    assert_no_exception(at)
    said = messages(at)
    if case in ("empty", "whitespace"):
        assert "Type a sentence" in said and not charts(at)
        return
    (fig,) = charts(at)
    loaded = load(tiny_checkpoints / f"{name}.safetensors")
    ids = loaded.tokenizer.encode(text)[: loaded.model.max_length]
    attention, allowed = model_attention(tiny_checkpoints, name, ids=ids)
    z, p = array(fig["data"][0]["z"]), drawn(fig)
    assert z.shape == (len(p), len(p)) and len(p) == min(len(ids), av.WINDOW_TOKENS)
    cut = allowed[np.ix_(p, p)]
    np.testing.assert_array_equal(z[cut], attention[0, 0][np.ix_(p, p)][cut])
    if case == "huge":
        assert f"only the first {loaded.model.max_length}" in said
    if case in ("unknown", "emoji", "rtl", "script") and loaded.tokenizer.kind == "char":
        assert "not in this model's vocabulary" in said
    if case == "unknown" and loaded.tokenizer.kind == "char":
        assert "U+00FC" in said and "U+0007" in said
    spec = json.dumps(fig)
    assert "<script>" not in spec and "<b>" not in spec.replace("<br>", "")
    rendered_markdown = " ".join(m.value for m in [*at.markdown, *at.warning, *at.info, *at.caption])
    assert "<script>" not in rendered_markdown and "**bold**" not in rendered_markdown


def test_long_input_on_a_model_without_a_hard_limit_can_run_past_the_block(monkeypatch, tmp_path):
    folder = tmp_path / "ckpts"
    save_tiny_checkpoint(folder / "sinusoidal.safetensors", "lm", positional="sinusoidal")
    at = open_page(monkeypatch, folder, model="sinusoidal", text="Ada was born in London. " * 4)
    assert "Run past the block size" in messages(at)
    assert array(charts(at)[0]["data"][0]["z"]).shape == (av.WINDOW_TOKENS,) * 2  # 32 tokens: a window of them
    at.checkbox(key="attn_past").check().run()
    assert_no_exception(at)
    assert at.slider(key="attn_window").value == (0, av.WINDOW_TOKENS - 1)  # past WHOLE_UP_TO: a window
    at.slider(key="attn_window").set_value((0, 95)).run()
    assert array(charts(at)[0]["data"][0]["z"]).shape == (96, 96)
    assert "beyond the length this model was trained on" in messages(at)
    assert at.query_params["past"] in ("1", ["1"])


def test_combine_and_compare_draw_the_window_of_a_long_input(monkeypatch, tmp_path):
    folder = tmp_path / "ckpts"
    save_tiny_checkpoint(folder / "sinusoidal.safetensors", "lm", positional="sinusoidal")
    save_tiny_checkpoint(folder / "alibi.safetensors", "lm", positional="alibi")
    text = "Ada was born in London. " * 4  # 96 characters: past the 64 drawn whole
    at = open_page(monkeypatch, folder, model="sinusoidal", text=text, past="1", view="combine", combine="rollout",
                   window="40-71")
    (fig,) = charts(at)
    assert array(fig["data"][0]["z"]).shape == (32, 32)
    assert fig["data"][0]["meta"][0]["positions"] == list(range(40, 72))
    at.checkbox(key="attn_hide_first").check().run()  # hidden tokens and the window together
    assert array(charts(at)[0]["data"][0]["z"]).shape == (32, 32)
    at = open_page(monkeypatch, folder, model="sinusoidal", text=text, past="1", view="compare", vs="alibi")
    left, right, diff = charts(at)
    w = av.WINDOW_TOKENS
    assert all(array(f["data"][0]["z"]).shape == (w, w) for f in (left, right, diff))
    a, allowed = model_attention(folder, "sinusoidal", text)
    np.testing.assert_array_equal(array(left["data"][0]["z"])[allowed[:w, :w]], a[0, 0][:w, :w][allowed[:w, :w]])


def test_window_helpers_for_hidden_tokens_and_a_second_model():
    weights, allowed = np.arange(25.0).reshape(5, 5), np.ones((5, 5), dtype=bool)
    kept = np.array([1, 2, 4])  # token 0 and 3 hidden
    w, a, positions = av.cut_kept_to_window(weights[np.ix_(kept, kept)], allowed[np.ix_(kept, kept)], kept, [2, 3, 4])
    assert list(positions) == [2, 4] and w.tolist() == [[12.0, 14.0], [22.0, 24.0]]
    assert av.cut_kept_to_window(weights, allowed, np.arange(5), None)[0] is weights
    assert av.same_window(list(range(40, 72)), 100) == list(range(40, 72))
    assert av.same_window(list(range(40, 72)), 70) == list(range(38, 70))  # kept inside a shorter reading
    assert av.same_window(list(range(40, 72)), av.WHOLE_UP_TO) is None  # short enough to draw whole
    assert av.same_window(None, 500) is None


def test_compare_shows_both_models_and_their_difference(monkeypatch, tiny_checkpoints):
    at = open_page(monkeypatch, tiny_checkpoints, model="tiny-lm", view="compare", vs="tiny-birthplace",
                   text="Ada was born.")
    left, right, diff = charts(at)
    a, allowed = model_attention(tiny_checkpoints, "tiny-lm", "Ada was born.")
    b, _ = model_attention(tiny_checkpoints, "tiny-birthplace", "Ada was born.")
    np.testing.assert_array_equal(array(left["data"][0]["z"])[allowed], a[0, 0][allowed])
    np.testing.assert_array_equal(array(right["data"][0]["z"])[allowed], b[0, 0][allowed])
    np.testing.assert_allclose(array(diff["data"][0]["z"])[allowed], (a[0, 0] - b[0, 0])[allowed], atol=1e-7)
    # one colour bar (right) and one set of query labels (left) for two maps of the same tokens: the width
    # they took goes to the plots (at 1024 px a half column had ~50 px of plot left for word labels)
    assert left["data"][0]["showscale"] is False and right["data"][0]["showscale"] is True
    assert left["layout"]["yaxis"].get("showticklabels", True) and right["layout"]["yaxis"]["showticklabels"] is False
    assert left["data"][0]["zmax"] == right["data"][0]["zmax"]
    at.selectbox(key="attn_compare").select("tiny-lm").run()  # itself: no clash, zero difference
    assert_no_exception(at)
    assert np.nanmax(np.abs(array(charts(at)[2]["data"][0]["z"]))) == 0
    at.selectbox(key="attn_compare").select("tiny-classifier").run()  # a word model: no difference map
    assert_no_exception(at)
    assert len(charts(at)) == 2 and "different tokens" in messages(at)


def test_model_view_focus_button_opens_the_single_head(monkeypatch, tiny_checkpoints):
    at = open_page(monkeypatch, tiny_checkpoints, model="tiny-lm", view="model", layer="1", head="2")
    (fig,) = charts(at)
    assert len(fig["data"]) == 2 * 4 and fig["layout"]["shapes"][0]["xref"] == "x7 domain"
    at.button[0].click().run()
    assert at.radio(key="attn_view").value == "single"
    assert charts(at)[0]["layout"]["title"]["text"].startswith("tiny-lm · Layer 1, head 2")


def test_combine_hides_the_first_token_and_renormalises(monkeypatch, tiny_checkpoints):
    at = open_page(monkeypatch, tiny_checkpoints, model="tiny-lm", view="combine", text="Ada was born.",
                   combine="rollout", hidefirst="1")
    (fig,) = charts(at)
    z = array(fig["data"][0]["z"])
    assert z.shape == (12, 12) and fig["data"][0]["meta"][0]["positions"] == list(range(1, 13))  # first token hidden
    np.testing.assert_allclose(np.nansum(z, axis=-1), 1.0, atol=1e-6)
    assert "Attention rollout" in fig["layout"]["title"]["text"]


def test_sanity_panel_and_csv_download_are_there(monkeypatch, tiny_checkpoints):
    at = open_page(monkeypatch, tiny_checkpoints, model="tiny-lm")
    sanity = [t.value.reset_index() for t in at.table if t.value.index.name == "check"][0]
    assert sanity["result"].tolist() == ["pass", "pass", "pass"]
    assert "Causal mask respected" in sanity["check"].tolist()
    assert at.get("download_button")


def test_compare_opens_with_a_model_of_the_same_kind(monkeypatch):
    # issue 41: beside the language model lm-learned, Compare opened with the birthplace birth-synthesizer-pretrained
    from core.io.checkpoint import read_metadata

    at = open_page(monkeypatch, ROOT / "checkpoints", model="lm-learned", view="compare")
    other = at.selectbox(key="attn_compare").value
    assert other != "lm-learned"
    first, second = (read_metadata(ROOT / "checkpoints" / f"{n}.safetensors") for n in ("lm-learned", other))
    assert second["task"] == first["task"] == "lm"
    assert second["tokenizer"]["kind"] == first["tokenizer"]["kind"]
    assert len(charts(at)) == 3  # the same tokens: both maps and their difference


def test_compare_default_ranks_task_then_tokenizer():
    from types import SimpleNamespace

    from ui.attention_views import compare_default

    def info(name, task, kind):
        return SimpleNamespace(name=name, task=task, metadata={"tokenizer": {"kind": kind}})
    infos = [info("a-bird", "birthplace", "bpe"), info("b-char", "lm", "char"), info("c-lm", "lm", "bpe"),
             info("me", "lm", "bpe")]
    assert compare_default("me", infos) == "c-lm"
    assert compare_default("me", infos[:2] + infos[3:]) == "b-char"  # same task before same tokenizer
    assert compare_default("me", infos[:1] + infos[3:]) == "a-bird"  # any other before itself
    assert compare_default("me", infos[3:]) == "me"
