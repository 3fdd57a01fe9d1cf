"""The attention page's query-key view and its long-input navigation (issue 28, sections 1 and 3), headless
(AppTest): the sum on screen ends in the head view's weight, the synthesizer says why there is nothing to
show, a 512-token input draws a window of tokens that the slider, the search and a link move."""

from __future__ import annotations

import numpy as np
import pytest

from core.lens import attention as av
from core.lens.trace import trace
from tests.conftest import require_hf_extra, save_tiny_checkpoint
from tests.test_attention_page import array, assert_no_exception, charts, messages, open_page

_BASE = "Ada was born in London. " * 22
LONG_TEXT = (_BASE[:100] + "M" + _BASE[100:300] + "M" + _BASE[300:])[:512]  # characters; 'M' only at 100 and 301


@pytest.fixture
def folder(tmp_path):
    folder = tmp_path / "ckpts"
    save_tiny_checkpoint(folder / "alibi.safetensors", "lm", positional="alibi")
    save_tiny_checkpoint(folder / "long.safetensors", "lm", positional="rope", block_size=512)
    save_tiny_checkpoint(folder / "synth.safetensors", "lm", attention="synthesizer")
    return folder


def steps_block(at) -> str:
    return next(c.value for c in at.code if "head view" in c.value)


def test_the_sum_on_screen_ends_in_the_head_views_weight(monkeypatch, folder):
    at = open_page(monkeypatch, folder, model="alibi", view="qk", text="Ada was born.", layer="1", head="2")
    at.selectbox(key="attn_token").select(9).run()
    assert_no_exception(at)
    block = steps_block(at)
    key = at.selectbox(key="attn_key").value
    products, top, vectors = charts(at)
    weights = array(products["data"][0]["y"])
    assert np.nanargmax(weights) == key  # the default key is the one the query weighs most
    lines = block.splitlines()
    assert lines[0].startswith("layer 1, head 2: query 9")
    assert "× scale" in block and "1/√8" in block and "ALiBi bias" in block
    weight, shown = (float(line.split()[-1]) for line in lines[-2:])
    assert weight == shown == pytest.approx(weights[key], abs=1e-6)
    assert abs(sum(w for w in weights if np.isfinite(w)) - 1) < 1e-6  # short text: every key, the row adds to 1
    assert array(products["data"][1]["z"]).shape == (8, 13)  # dimensions x keys
    assert len(top["data"][0]["y"]) == 8 and array(vectors["data"][1]["z"]).shape == (8, 13)
    at.selectbox(key="attn_key").select(11).run()  # a key after the query: masked
    assert "masked" in steps_block(at)
    assert at.query_params["key"] in ("11", ["11"]) and at.query_params["view"] in ("qk", ["qk"])


def test_the_synthesizer_says_it_has_no_query_key_product(monkeypatch, folder):
    at = open_page(monkeypatch, folder, model="synth", view="qk", text="Ada was born.")
    assert "no query-key product" in messages(at) and not charts(at)


@pytest.mark.parametrize("view", ["single", "model", "qk"])
def test_a_512_token_input_is_drawn_as_a_window_the_search_moves(monkeypatch, folder, view):
    at = open_page(monkeypatch, folder, model="long", view=view, text=LONG_TEXT)
    assert_no_exception(at)
    first, last = at.slider(key="attn_window").value
    if view == "qk":  # centred on the key taken apart
        assert first <= at.selectbox(key="attn_key").value <= last and last - first + 1 == av.WINDOW_TOKENS
    else:
        assert (first, last) == (0, av.WINDOW_TOKENS - 1)
    assert f"Tokens {first} to {last} ({av.WINDOW_TOKENS} of 512" in " ".join(c.value for c in at.caption)
    at.text_input(key="attn_find").input("m").run()
    assert_no_exception(at)
    first = LONG_TEXT.index("M")
    window = at.slider(key="attn_window").value
    assert window[0] <= first <= window[1] and window[1] - window[0] + 1 == av.WINDOW_TOKENS and window[0] > 0
    assert "2 tokens match the search: positions 100, 301." in " ".join(c.value for c in at.caption)
    assert at.query_params["window"] in (f"{window[0]}-{window[1]}", [f"{window[0]}-{window[1]}"])
    at.button[[b.label for b in at.button].index("Next")].click().run()
    second = LONG_TEXT.index("M", first + 1)
    window = at.slider(key="attn_window").value
    assert window[0] <= second <= window[1]
    fig = charts(at)[0]
    if view == "single":
        z = array(fig["data"][0]["z"])
        assert z.shape == (av.WINDOW_TOKENS,) * 2 and fig["data"][0]["meta"][0]["positions"][0] == window[0]
    elif view == "model":
        assert array(fig["data"][0]["z"]).shape == (av.WINDOW_TOKENS,) * 2 and len(fig["data"]) == 2 * 4
    else:
        assert len(fig["data"][0]["y"]) == av.WINDOW_TOKENS


def test_a_link_reopens_a_window_of_a_long_input(monkeypatch, folder):
    at = open_page(monkeypatch, folder, model="long", view="single", text=LONG_TEXT, window="300-339", layer="1")
    assert at.slider(key="attn_window").value == (300, 339)
    from core.io.checkpoint import load

    loaded = load(folder / "long.safetensors")
    record = trace(loaded.model, loaded.tokenizer.encode(LONG_TEXT))
    z = array(charts(at)[0]["data"][0]["z"])
    expected = np.where(record.allowed, record.attention[1, 0], np.nan)[300:340, 300:340]
    np.testing.assert_array_equal(z, expected)


def test_window_helpers():
    assert av.clamp_window(None, 10) == (0, 9) and av.clamp_window(None, 500) == (0, av.WINDOW_TOKENS - 1)
    assert av.clamp_window((400, 447), 100) == (52, 99)  # a shorter text: same width, back inside
    assert av.clamp_window((9, 3), 100) == (3, 9)
    assert av.window_around(0, 512) == (0, av.WINDOW_TOKENS - 1)
    assert av.window_around(511, 512) == (512 - av.WINDOW_TOKENS, 511)
    assert av.window_around(200, 512, 10) == (195, 204)
    assert av.find_tokens(["␣London", "x", "LONDON"], " london ") == [0, 2] and av.find_tokens(["a"], "  ") == []
    assert av.next_match([5, 50, 300], (0, 47)) == 50 and av.next_match([5, 24, 300], (0, 47)) == 300
    assert av.next_match([5, 50], (280, 320)) == 5
    attention = np.arange(2 * 16, dtype=float).reshape(2, 4, 4)
    cut, allowed = av.cut_to_window(attention, np.eye(4, dtype=bool), [1, 2])
    np.testing.assert_array_equal(cut, attention[:, 1:3, 1:3]) and allowed.tolist() == [[True, False], [False, True]]


def test_the_query_key_view_opened_after_another_view_frames_its_key(monkeypatch, folder):
    """The walk-through: the head view set the window to the first tokens; the query-key view then opened on the
    last query and its best key, neither inside that window."""
    at = open_page(monkeypatch, folder, model="long", view="single", text=LONG_TEXT)
    assert at.slider(key="attn_window").value == (0, av.WINDOW_TOKENS - 1)
    at.radio(key="attn_view").set_value("qk").run()
    assert_no_exception(at)
    key = at.selectbox(key="attn_key").value
    first, last = at.slider(key="attn_window").value
    assert first <= key <= last and key >= av.WINDOW_TOKENS  # moved: the best key lies past the first window
    at.slider(key="attn_window").set_value((0, av.WINDOW_TOKENS - 1)).run()  # then the window is the user's
    assert at.slider(key="attn_window").value == (0, av.WINDOW_TOKENS - 1)


def test_a_new_query_takes_apart_its_own_best_key_in_view(monkeypatch, folder):
    at = open_page(monkeypatch, folder, model="long", view="qk", text=LONG_TEXT, window="0-31")
    at.selectbox(key="attn_key").select(3).run()
    at.selectbox(key="attn_token").select(300).run()
    assert_no_exception(at)
    key = at.selectbox(key="attn_key").value
    first, last = at.slider(key="attn_window").value
    weights = array(charts(at)[0]["data"][0]["y"])
    assert first <= key <= last and np.nanargmax(weights) == key - first  # the best key, framed in view
    assert at.code[0].value.startswith(f"layer 0, head 0: query 300 '{LONG_TEXT[300]}' → key {key} ")


def test_a_512_token_input_on_a_hugging_face_bert_folder(monkeypatch, tmp_path):
    require_hf_extra()
    from tests.hf_models import bert_folder

    bert_folder(tmp_path / "models" / "bert-512", max_positions=512)
    text = "the cat sat on the mat . a dog ran . " * 60  # 660 words: cut to 512 tokens
    for view in ("single", "model", "qk"):
        at = open_page(monkeypatch, tmp_path / "models", model="bert-512", view=view, text=text, layer="1")
        assert "at most 512, so only the first 512" in messages(at)
        first, last = at.slider(key="attn_window").value
        assert last - first + 1 == av.WINDOW_TOKENS
        if view == "qk":
            lines = steps_block(at).splitlines()
            assert lines[-1].split()[-1] == lines[-2].split()[-1]
            assert array(charts(at)[0]["data"][1]["z"]).shape == (8, av.WINDOW_TOKENS)  # 16 wide, 2 heads
