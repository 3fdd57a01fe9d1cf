"""Pieces joined into whole characters and words (issue 41, item 8): the attention arithmetic against an
independent computation, byte pieces shown once, the top-5 table without U+FFFD, the sentence on why a text
splits finely computed from the checkpoint's metadata."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from streamlit.testing.v1 import AppTest

from core.io.checkpoint import load
from core.lens import attention as av
from core.text import visible_token
from tests.conftest import ROOT

TEXT = "The students in the back row asked about Ü and 🤖."


@pytest.fixture(scope="module")
def lm():
    return load(ROOT / "checkpoints" / "lm-learned.safetensors")


def test_joined_attention_matches_a_loop_over_words():
    rng = np.random.default_rng(0)
    T = 7
    scores = torch.tensor(rng.normal(size=(2, 3, T, T)))
    causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
    attention = torch.softmax(scores.masked_fill(~causal, float("-inf")), dim=-1)  # (L, H, T, T)
    spans = [(0, 1), (1, 4), (4, 5), (5, 7)]
    joined, allowed = av.join_attention(attention.numpy(), causal.numpy(), spans)
    expected = torch.zeros(2, 3, len(spans), len(spans), dtype=torch.float64)
    for i, (qa, qb) in enumerate(spans):  # BertViz by hand: sum over the word's keys, mean over its queries
        for j, (ka, kb) in enumerate(spans):
            expected[:, :, i, j] = attention[:, :, qa:qb, ka:kb].sum(-1).mean(-1)
    np.testing.assert_allclose(joined, expected.numpy(), atol=1e-6)
    np.testing.assert_allclose(joined.sum(-1), 1.0, atol=1e-6)  # rows still add up to 1
    assert allowed.tolist() == [[True, False, False, False], [True, True, False, False],
                                [True, True, True, False], [True, True, True, True]]


def test_a_character_of_several_byte_pieces_is_one_group_and_words_join_pieces(lm):
    tokenizer = lm.tokenizer
    run = av.run_attention(lm.model, tokenizer, "lm", TEXT)
    ids = tokenizer.encode(TEXT)
    # independent: each character's UTF-8 bytes against the pieces' bytes
    spans = av.character_spans(tokenizer, ids)
    assert b"".join(tokenizer.piece_bytes(i) for i in ids) == TEXT.encode()
    texts = [b"".join(tokenizer.piece_bytes(i) for i in ids[a:b]).decode("utf-8") for a, b in spans]
    assert "".join(texts) == TEXT
    assert "🤖" in texts and "Ü" in texts  # each a group of its own, decoded whole
    emoji = spans[texts.index("🤖")]
    assert emoji[1] - emoji[0] == len("🤖".encode())  # four byte pieces in this vocabulary
    chips = av.token_chips(run.tokens, run.characters)
    assert chips.count("🤖") == 1 and chips.count("Ü") == 1
    words = av.joined_run(run, "words")
    expected_words = re.findall(r"\w+|[^\w\s]+|\s", TEXT)  # the tokenizer's own pre-split
    assert [w.replace("\u2423", " ") for w in words.labels] == expected_words
    assert "st | u | d | ent | s" in words.hovers[expected_words.index("students")]
    characters = av.joined_run(run, "characters")
    assert characters.labels.count("🤖") == 1
    assert "\u2039F0\u203a" in characters.hovers[characters.labels.index("🤖")]  # its pieces on hover


def test_the_top5_table_never_shows_a_replacement_character(lm):
    run = av.run_attention(lm.model, lm.tokenizer, "lm", TEXT)
    cells = [str(v) for row in run.output.rows for v in row.values()]
    assert not any("\ufffd" in c for c in cells)
    assert any("\u2039" in c for c in cells)  # a byte piece is named by its byte


def test_visible_token_names_bytes_that_are_part_of_a_character():
    assert visible_token("🤖".encode()) == "🤖"
    assert visible_token("🤖".encode()[:2]) == "\u2039F0\u203a\u20399F\u203a"
    assert visible_token(b"a " + "Ü".encode()[:1]) == "a\u2423\u2039C3\u203a"


def test_the_sentence_on_splitting_is_computed_from_the_metadata(lm):
    run = av.run_attention(lm.model, lm.tokenizer, "lm", TEXT)
    sentence = av.reading_sentence(lm.metadata, lm.tokenizer, run)
    source = lm.metadata["data"][0]["path"]
    assert f"{lm.tokenizer.vocab_size:,} pieces learned from {source} alone" in sentence
    ids = lm.tokenizer.encode(TEXT)
    spaces = sum(lm.tokenizer.decode([i]) == " " for i in ids)
    n_words = len(re.findall(r"\w+", TEXT))
    assert f"{len(ids)} pieces for {n_words} words, {spaces} of them spaces" in sentence
    other = {**lm.metadata, "data": [{"path": "elsewhere.txt"}], "vocabulary": "{}"}
    assert "learned from elsewhere.txt alone" in av.reading_sentence(other, lm.tokenizer, run)


def test_the_page_says_why_and_offers_words(monkeypatch):
    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(ROOT / "checkpoints"))
    at = AppTest.from_file(str(ROOT / "pages" / "attention.py"), default_timeout=60)
    at.query_params.update(model="lm-learned", text=TEXT)
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    assert any("pieces learned from" in m.value for m in at.markdown)
    at.toggle(key="attn_words").set_value(True).run()
    assert not at.exception
    import json

    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    words = re.findall(r"\w+|[^\w\s]+|\s", TEXT)
    assert len(spec["data"][0]["y"]) == min(len(words), av.WINDOW_TOKENS)  # a window of a long sentence's words
    assert spec["data"][0]["y"][2] == "students"


@pytest.mark.parametrize("model_type", ["llama", "gpt_neox"])
def test_words_come_from_the_texts_characters_whatever_pieces_carry_a_space(tmp_path, model_type):
    """The walk-through: a tiny LLaMA's pieces ('▁was', '▁an') gave "36 tokens for 5 words" for a 9-word
    sentence and joined '␣was␣an' into one word. Words are the text's own (by the pieces' offsets): one group per
    run of letters and digits or of punctuation, and the sentence counts them."""
    from tests.conftest import require_hf_extra

    require_hf_extra()
    from bench.hf_folders import decoder_folder
    from core.io.hf import load_folder

    loaded = load_folder(decoder_folder(tmp_path / model_type, model_type))
    text = "Ada Lovelace was an English mathematician, born in London."
    run = av.run_attention(loaded.model, loaded.tokenizer, "lm", text)
    words = av.joined_run(run, "words")
    shown = [label.replace("\u2423", " ").strip() for label, (a, _) in zip(words.labels, words.spans, strict=True)
             if not run.special[a]]
    expected = re.findall(r"\w+|[^\w\s]+", text)
    assert [w for w in shown if w] == expected, shown
    assert any(b - a > 1 for a, b in run.words)  # the tiny vocabulary cuts some words into several pieces
    sentence = av.reading_sentence(loaded.metadata, loaded.tokenizer, run)
    n_words = len(re.findall(r"\w+", text))
    assert f"for {n_words} words" in sentence, sentence


def test_byte_pieces_of_a_hugging_face_folder_show_as_their_bytes(tmp_path):
    """The walk-through: a byte-level folder's pieces of one character all showed as '�'. Each shows its bytes
    ('‹C3›'), distinct pieces distinctly, in the run's pieces, the logit lens and the Errors page's tables; the
    character's pieces join into the character, as on our own byte-level vocabulary."""
    from tests.conftest import require_hf_extra

    require_hf_extra()
    from bench.hf_folders import decoder_folder
    from core.io.hf import load_folder
    from core.lens.errors import lm
    from core.lens.trace import trace
    from core.lens.where_from import logit_lens

    loaded = load_folder(decoder_folder(tmp_path / "neox", "gpt_neox"))
    text = "We said Ü and 🤖 twice: Ü 🤖."
    run = av.run_attention(loaded.model, loaded.tokenizer, "lm", text)
    broken = [p for p in run.pieces if "\ufffd" in p]
    assert not broken and any("\u2039" in p for p in run.pieces), run.pieces
    halves = [p for p in run.pieces if p.startswith("\u2039")]
    assert len(set(halves)) > 1  # distinct byte pieces, distinct labels
    characters = av.joined_run(run, "characters")
    assert "🤖" in "".join(characters.labels) and "Ü" in "".join(characters.labels)
    found = lm.score_lm(loaded.model, loaded.tokenizer, [("t.txt", text)])
    cells = [str(v) for v in found.tokens["piece"]] + [str(v) for v in found.tokens["top guess"]]
    assert not any("\ufffd" in c for c in cells)
    ids = loaded.tokenizer.encode(text)
    lens = logit_lens(loaded.model, loaded.tokenizer, trace(loaded.model, ids, activations=True), ids[-1])
    assert not any("\ufffd" in str(p) for row in lens.top_pieces for p in row)


def test_the_words_toggle_is_in_the_url_and_survives_another_view_and_another_page(monkeypatch):
    """Issue 63: Words was not in the URL, and a view without the toggle (or another page) dropped it."""
    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(ROOT / "checkpoints"))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.run()
    at.switch_page("pages/attention.py")
    at.query_params.update(model="lm-learned", text=TEXT)
    at.run()
    at.toggle(key="attn_words").set_value(True).run()
    assert not at.exception and at.query_params["words"] in ("1", ["1"])
    at.radio(key="attn_view").set_value("token").run()  # a view without the toggle
    assert "attn_words" not in [t.key for t in at.toggle] and at.query_params["words"] in ("1", ["1"])
    at.radio(key="attn_view").set_value("single").run()
    assert at.toggle(key="attn_words").value is True
    at.switch_page("pages/curves.py")
    at.run()
    at.switch_page("pages/attention.py")
    at.run()
    assert not at.exception and at.toggle(key="attn_words").value is True
    linked = AppTest.from_file(str(ROOT / "pages" / "attention.py"), default_timeout=120)
    linked.query_params.update(model="lm-learned", text=TEXT, words="1")
    linked.run()
    assert linked.toggle(key="attn_words").value is True
