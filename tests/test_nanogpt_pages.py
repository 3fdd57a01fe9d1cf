"""A converted nanoGPT model on the pages (AppTest): Open your model converts an upload; the Attention page's
views, the query-key view, where the next piece comes from and the positional page's sentence view draw it;
what the head view draws is what an independent nanoGPT forward computes."""

from __future__ import annotations

import io
import json
import pickle
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from streamlit.testing.v1 import AppTest

from core.io.checkpoint import load
from core.io.nanogpt import convert_nanogpt_files
from core.text import visible_token
from tests.conftest import ROOT
from tests.test_attention_page import VIEWS, array, charts, drawn
from tests.test_nanogpt import CHARS, RunsCode, meta_pkl, nanogpt_ckpt, reference_forward
from ui.page_state import POSITIONAL_SECTION_TITLES


def unescaped(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text)


def no_exception(at: AppTest) -> None:
    assert not at.exception, [e.message for e in at.exception]


@pytest.fixture
def converted(tmp_path: Path) -> tuple[Path, dict]:
    """A folder holding one converted nanoGPT model (bias off, trained with torch.compile), and its ckpt."""
    ckpt = nanogpt_ckpt(False, "_orig_mod.")
    torch.save(ckpt, tmp_path / "ckpt.pt")
    (tmp_path / "meta.pkl").write_bytes(meta_pkl(CHARS))
    folder = tmp_path / "models"
    folder.mkdir()
    convert_nanogpt_files(tmp_path / "ckpt.pt", folder / "shakespeare.safetensors", meta=tmp_path / "meta.pkl")
    return folder, ckpt


def test_every_attention_view_draws_the_converted_model(monkeypatch, converted):
    folder, ckpt = converted
    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(folder))
    text = "Before we proceed, speak."
    at = AppTest.from_file(str(ROOT / "pages" / "attention.py"), default_timeout=60)
    at.query_params.update({"model": "shakespeare", "text": text, "layer": "1", "head": "2"})
    at.run()
    no_exception(at)
    (fig,) = charts(at)
    idx = torch.tensor([[CHARS.index(c) for c in text]])
    logits, attention = reference_forward(ckpt["model"], idx)
    z, p = array(fig["data"][0]["z"]), drawn(fig)  # past av.WHOLE_UP_TO characters the page draws a window
    allowed = np.tril(np.ones((len(text), len(text)), dtype=bool))[np.ix_(p, p)]
    np.testing.assert_allclose(z[allowed], attention[1, 0, 2].numpy()[np.ix_(p, p)][allowed], atol=1e-5)
    next_table = [d.value for d in at.dataframe if "next #1" in d.value.columns][0]
    probs = torch.softmax(logits[0, -1], dim=-1)  # the reference's next character after the sentence
    expected = f"{visible_token(CHARS[int(probs.argmax())])}  {100 * float(probs.max()):.1f}%"
    assert next_table["next #1"].iloc[-1] == expected
    for view in VIEWS:
        at.radio(key="attn_view").set_value(view).run()
        no_exception(at)
        assert charts(at), view
    assert not at.error


def test_where_the_next_piece_comes_from_traces_the_converted_model(monkeypatch, converted):
    folder, _ = converted
    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(folder))
    at = AppTest.from_file(str(ROOT / "pages" / "attention.py"), default_timeout=60)
    at.query_params.update({"model": "shakespeare", "text": "Speak, speak", "wf": "1"})
    at.run()
    no_exception(at)
    titles = [json.loads(c.proto.spec)["layout"].get("title", {}).get("text", "") for c in at.get("plotly_chart")]
    assert any("by layer" in t for t in titles) and any("what writes" in t for t in titles)


def test_the_positional_pages_sentence_view_draws_it(monkeypatch, converted):
    folder, ckpt = converted
    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(folder))
    at = AppTest.from_file(str(ROOT / "pages" / "positional.py"), default_timeout=60)
    at.session_state["pos_tab"] = POSITIONAL_SECTION_TITLES["sentence"]
    at.run()
    no_exception(at)
    assert len(at.get("plotly_chart")) >= 2  # its map, attention by distance
    assert not at.error


def test_the_positional_page_shows_a_selected_nanogpt_model_beside_the_bundled_set(monkeypatch, tmp_path, converted):
    """The walk-through: with the bundled lm-* models beside it, the sentence view listed only those four and said
    nothing of the selected nanoGPT model. It is now the first choice, shown alone, and the page says why."""
    import shutil

    folder, _ = converted
    for name in ("lm-learned", "lm-sinusoidal"):
        shutil.copy(ROOT / "checkpoints" / f"{name}.safetensors", folder / f"{name}.safetensors")
    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(folder))
    at = AppTest.from_file(str(ROOT / "pages" / "positional.py"), default_timeout=60)
    at.query_params.update(model="shakespeare")
    at.session_state["pos_tab"] = POSITIONAL_SECTION_TITLES["sentence"]
    at.run()
    no_exception(at)
    family = at.selectbox(key="pos_family")
    assert family.value == 0 and family.format_func(0).startswith("shakespeare alone")
    assert "identical except positional encoding" in family.format_func(1)
    titles = [json.loads(c.proto.spec)["layout"].get("title", {}).get("text", "") for c in at.get("plotly_chart")]
    assert any("shakespeare" in t for t in titles) and not any("lm-learned" in t for t in titles), titles
    assert any("show the selected model alone" in i.value for i in at.info)
    family.set_value(1).run()  # the bundled pair, compared
    no_exception(at)
    titles = [json.loads(c.proto.spec)["layout"].get("title", {}).get("text", "") for c in at.get("plotly_chart")]
    assert any("lm-learned" in t for t in titles) and any("lm-sinusoidal" in t for t in titles), titles


def _upload(at: AppTest, ckpt: bytes, vocabulary: list[tuple[str, bytes]]) -> AppTest:
    at.file_uploader(key="upload_nanogpt").upload("ckpt.pt", ckpt)
    uploader = at.file_uploader(key="upload_nanogpt_vocab")
    for name, data in vocabulary:
        uploader.upload(name, data)
    at.run()
    at.button(key="convert_nanogpt").click().run()
    no_exception(at)
    return at


def _open_model_page(monkeypatch, folder: Path) -> AppTest:
    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(folder))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.switch_page("pages/open_model.py")
    at.run()
    no_exception(at)
    return at


def _bytes(obj) -> bytes:
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getvalue()


def test_open_your_model_converts_a_ckpt_and_selects_it(monkeypatch, tmp_path):
    (tmp_path / "empty").mkdir()
    at = _open_model_page(monkeypatch, tmp_path / "empty")
    assert at.button(key="convert_nanogpt").disabled
    ckpt = nanogpt_ckpt(True)
    at = _upload(at, _bytes(ckpt), [("meta.pkl", meta_pkl(CHARS))])
    assert not at.error
    picked = at.sidebar.selectbox(key="picker_model").value
    assert picked == "nanogpt-shakespeare_char"  # named for its data set, not "ckpt"
    assert any(f"Added {picked}" in unescaped(s.value) for s in at.success)
    info = next(i for i in at.session_state["uploaded_checkpoints"] if i.name == picked)
    assert load(info.path).tokenizer.encode("All:") == [CHARS.index(c) for c in "All:"]


def test_open_your_model_refuses_a_hostile_meta_pkl_in_one_sentence(monkeypatch, tmp_path):
    (tmp_path / "empty").mkdir()
    at = _open_model_page(monkeypatch, tmp_path / "empty")
    marker = tmp_path / "ran"
    hostile = pickle.dumps({"vocab_size": 1, "itos": {0: "a"}, "stoi": RunsCode(marker)})
    at = _upload(at, _bytes(nanogpt_ckpt(False)), [("meta.pkl", hostile)])
    (error,) = at.error
    assert "refused without running it" in re.sub(r"\\(.)", r"\1", error.value)
    assert not marker.exists() and "uploaded_checkpoints" not in at.session_state  # nothing added
    at = _upload(at, _bytes(nanogpt_ckpt(False)), [("a.txt", b"ab"), ("b.txt", b"cd")])
    assert "Give one vocabulary, not 2 files" in re.sub(r"\\(.)", r"\1", at.error[0].value)


def test_every_page_opens_on_the_converted_model(monkeypatch, converted):
    """Bias off means no bias tensors at all: the anatomy formulas, the curves (no history) and the probe must
    still draw or say why, never raise."""
    from ui import APP_PAGES

    folder, _ = converted
    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(folder))
    for page in APP_PAGES:
        at = AppTest.from_file(str(ROOT / page.file), default_timeout=60)
        at.query_params["model"] = "shakespeare"
        at.run()
        no_exception(at)
    anatomy = AppTest.from_file(str(ROOT / "pages" / "anatomy.py"), default_timeout=60)
    anatomy.query_params["model"] = "shakespeare"
    anatomy.run()
    (table,) = [d.value for d in anatomy.dataframe if "formula = count" in d.value.columns]
    assert (table["formula = count"] == "✓").all(), table[table["formula = count"] != "✓"]  # no bias terms
    model = load(folder / "shakespeare.safetensors").model
    once = model.num_parameters() - model.head.unembed.weight.numel()  # lm_head is wte (tied): counted once
    assert table["parameters"].sum() == once
    assert anatomy.metric[0].value == f"{once:,}"
    assert "head shares the weights of tok_emb (tied): they are counted once, in tok_emb." in [
        c.value for c in anatomy.caption]
    assert f"The rows add up to the model's total, {once:,}." in [c.value for c in anatomy.caption]
    table_of_positions = model.pos.table.numel()
    assert ("nanoGPT's own count (get_num_params, as its train.py prints it) leaves out the position table's "
            f"{table_of_positions:,}: {once - table_of_positions:,}.") in [c.value for c in anatomy.caption]


def test_a_model_on_gpt2_pieces_draws_its_pieces(monkeypatch, tmp_path):
    from tests.test_nanogpt import gpt2_like_tokenizer_files

    pieces = gpt2_like_tokenizer_files(tmp_path / "gpt2", "vocab.json")
    ckpt = nanogpt_ckpt(True, vocab=pieces + 7)  # padded past the pieces, as nanoGPT pads 50257 to 50304
    torch.save(ckpt, tmp_path / "ckpt.pt")
    folder = tmp_path / "models"
    folder.mkdir()
    convert_nanogpt_files(tmp_path / "ckpt.pt", folder / "pieces.safetensors", tokenizer=tmp_path / "gpt2")
    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(folder))
    text = "Before we proceed, speak."
    at = AppTest.from_file(str(ROOT / "pages" / "attention.py"), default_timeout=60)
    at.query_params.update({"model": "pieces", "text": text, "wf": "1"})
    at.run()
    no_exception(at)
    tokenizer = load(folder / "pieces.safetensors").tokenizer
    ids = tokenizer.encode(text)
    _, attention = reference_forward(ckpt["model"], torch.tensor([ids]))
    z = array(charts(at)[0]["data"][0]["z"])
    allowed = np.tril(np.ones((len(ids), len(ids)), dtype=bool))
    np.testing.assert_allclose(z[allowed], attention[0, 0, 0].numpy()[allowed], atol=1e-5)
    chips = at.code[0].value
    assert "[␣we]" in chips and "[␣speak]" in chips  # pieces with their spaces made visible
    assert any("next piece after the sentence" in c.value for c in at.caption)
    assert not at.error and not at.warning


def test_the_reading_sentence_names_the_vocabularys_file_alone(converted):
    """The walk-through read "single characters (83 of them, learned from meta.pkl and ckpt.pt)": the characters
    come from meta.pkl; the ckpt.pt beside it holds the weights."""
    from core.lens.attention import reading_sentence, run_attention

    folder, _ = converted
    loaded = load(folder / "shakespeare.safetensors")
    run = run_attention(loaded.model, loaded.tokenizer, "lm", "Speak, speak.")
    sentence = reading_sentence(loaded.metadata, loaded.tokenizer, run)
    assert f"single characters ({len(CHARS)} of them, taken from meta.pkl)" in sentence, sentence
    assert "ckpt.pt" not in sentence
