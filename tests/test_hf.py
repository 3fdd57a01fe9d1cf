"""Hugging Face model folders (issue 16): tiny random models built with transformers itself (no download).

Attention through the lab (core call, attention page, export command) equals what transformers returns
with output_attentions=True and eager attention, to 1e-6, every layer and head; tokens are readable;
folders the lab cannot open honestly are refused with one sentence. Skips cleanly without the extra,
except the checks that must hold without it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from core.io import hf
from core.io.checkpoint import CheckpointError, list_checkpoints, load, read_metadata
from core.lens import attention as av
from tests.conftest import require_hf_extra
from tests.test_attention_page import array, assert_no_exception, charts, open_page

TOL = 1e-6
TEXTS = {"bert": "the cats playing on the mat zz.", "gpt2": "Hello world, the cat played!",
         "bert-classifier": "the dog ran.", "bert-bare": "a cat sat on the mat.",
         "distilbert": "the cats playing.", "roberta": "Hello world, the cat played!"}


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> Path:
    require_hf_extra()
    from tests.hf_models import bert_folder, distilbert_folder, gpt2_folder, roberta_folder

    root = tmp_path_factory.mktemp("hf")
    distilbert_folder(root / "distilbert")
    roberta_folder(root / "roberta")
    bert_folder(root / "bert")
    gpt2_folder(root / "gpt2")
    bert_folder(root / "bert-classifier", "BertForSequenceClassification")
    bert_folder(root / "bert-bare", "BertModel")
    return root


def one_sentence(message: str) -> None:
    assert "\n" not in message and "Traceback" not in message and message.endswith((".", ")."))


@pytest.mark.parametrize("name", list(TEXTS))
def test_attention_equals_transformers_eager_output_attentions(folders, name):
    from tests.hf_models import reference_attention

    loaded = load(folders / name)
    run = av.run_attention(loaded.model, loaded.tokenizer, loaded.task, TEXTS[name], loaded.labels)
    reference, logits = reference_attention(folders / name, run.ids)
    assert run.attention.shape == tuple(reference.shape) == (2, 2, len(run.ids), len(run.ids))
    assert np.abs(run.attention - reference.numpy()).max() <= TOL  # every layer and head
    assert all(c.passed is not False for c in av.sanity_checks(run))
    if name == "bert-classifier":
        assert sorted(r["label"] for r in run.output.rows) == ["negative", "positive"]
        probs = np.exp(logits.numpy()) / np.exp(logits.numpy()).sum()
        assert {r["label"]: r["probability"] for r in run.output.rows}["positive"] == pytest.approx(probs[1], abs=1e-6)


def test_subword_tokens_read_as_people_read_them(folders):
    bert = load(folders / "bert")
    tokenized = bert.tokenizer.tokenize(TEXTS["bert"])
    assert tokenized.tokens == ["[CLS]", "the", "cat", "·s", "play", "·ing", "on", "the", "mat", "zz", ".", "[SEP]"]
    assert tokenized.unknown == ["zz"]
    run = av.run_attention(bert.model, bert.tokenizer, bert.task, TEXTS["bert"])
    assert run.unknown == ["zz"] and run.fallback_token == "[UNK]"
    assert run.output.title.startswith("Top-5 tokens the masked LM predicts")
    gpt2 = load(folders / "gpt2")
    run = av.run_attention(gpt2.model, gpt2.tokenizer, gpt2.task, TEXTS["gpt2"])
    assert "".join(run.tokens).replace("\u2423", " ") == TEXTS["gpt2"]  # nothing lost, nothing added
    assert not any("\u0120" in t for t in run.tokens) and "\u2423world" in run.tokens  # no Ġ: a visible space
    assert run.causal and run.output.title.startswith("Top-5 next token")
    roberta = load(folders / "roberta")
    shown = av.run_attention(roberta.model, roberta.tokenizer, roberta.task, TEXTS["roberta"]).tokens
    assert shown == ["<s>", "Hello", "\u2423world", ",", "\u2423the", "\u2423cat", "\u2423played", "!", "</s>"]
    assert roberta.model.max_length == 40  # RoBERTa's positions start after the padding index
    bare = load(folders / "bert-bare")
    run = av.run_attention(bare.model, bare.tokenizer, bare.task, TEXTS["bert-bare"])
    assert "no output head" in run.output.note


def test_the_picker_lists_folders_and_the_card_describes_them(folders, tmp_path):
    from core.lens.describe import model_card

    infos = {i.name: i for i in list_checkpoints(folders)}
    assert set(infos) == set(TEXTS) and not any(i.error for i in infos.values())
    tasks = {name: info.task for name, info in infos.items()}
    assert tasks == {"gpt2": "lm", "bert": "masked-lm", "bert-classifier": "classify", "bert-bare": "encoder",
                     "distilbert": "masked-lm", "roberta": "masked-lm"}
    assert infos["bert"].config["n_layer"] == 2 and infos["gpt2"].config["causal"] is True
    assert model_card(infos["bert"])["Attention"] == "BertForMaskedLM (Hugging Face, eager)"
    assert read_metadata(folders / "gpt2")["history"] == []


def _broken(folders: Path, tmp_path: Path, change) -> str:
    folder = tmp_path / "broken"
    shutil.copytree(folders / "bert", folder)
    change(folder)
    with pytest.raises(CheckpointError) as refusal:
        load(folder)
    message = str(refusal.value)
    one_sentence(message)
    assert [i.error for i in list_checkpoints(tmp_path) if i.name == "broken"][0] in (None, message)
    return message


def _edit_config(**changes):
    def change(folder: Path) -> None:
        config = json.loads((folder / "config.json").read_text())
        config.update(changes)
        (folder / "config.json").write_text(json.dumps(config))
    return change


@pytest.mark.parametrize("change,expected", [
    (lambda f: (f / "model.safetensors").unlink(), "weights are missing"),
    (lambda f: (f / "model.safetensors").rename(f / "pytorch_model.bin"), "a pickle the lab never opens"),
    (_edit_config(model_type="t5", architectures=["T5ForConditionalGeneration"]), "which the lab cannot read yet"),
    (_edit_config(auto_map={"AutoModel": "modeling.MyModel"}), "custom code"),
    (lambda f: [p.unlink() for p in f.glob("tokenizer*")], "need the network"),
    (lambda f: (f / "config.json").write_text("{not json"), "not readable JSON"),
    (lambda f: (f / "model.safetensors").write_bytes((f / "model.safetensors").read_bytes()[:200]),
     "could not be opened offline"),
    (_edit_config(num_hidden_layers=3), "lacks weights for"),
])
def test_folders_the_lab_cannot_open_get_one_sentence(folders, tmp_path, change, expected):
    assert expected in _broken(folders, tmp_path, change)


def test_nothing_is_downloaded(folders):
    import os

    load(folders / "gpt2")
    assert os.environ["HF_HUB_OFFLINE"] == "1" and os.environ["TRANSFORMERS_OFFLINE"] == "1"


def test_without_the_extra_a_folder_is_named_and_explained(tmp_path, monkeypatch):
    """Runs whether or not transformers is installed: the picker says how to open the folder."""
    folder = tmp_path / "my-bert"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "bert", "architectures": ["BertModel"],
                                                    "num_hidden_layers": 2, "num_attention_heads": 2}))
    (folder / "model.safetensors").write_bytes(b"")
    (folder / "vocab.txt").write_text("[PAD]\n[UNK]\n")
    monkeypatch.setattr(hf, "available", lambda: False)
    (info,) = list_checkpoints(tmp_path)
    assert info.name == "my-bert" and "pip install -r requirements-hf.txt" in info.error
    with pytest.raises(CheckpointError, match="requirements-hf.txt"):
        load(folder)


@pytest.mark.parametrize("name", ["bert", "gpt2"])
def test_the_attention_page_shows_exactly_transformers_attention(folders, monkeypatch, name):
    from tests.hf_models import reference_attention

    at = open_page(monkeypatch, folders, model=name, text=TEXTS[name])
    ids = load(folders / name).tokenizer.encode(TEXTS[name])
    reference, _ = reference_attention(folders / name, ids)
    for layer, head in ((0, 0), (1, 1)):
        at.selectbox(key="attn_layer").select(layer)
        at.selectbox(key="attn_head").select(head).run()
        assert_no_exception(at)
        (fig,) = charts(at)
        z = array(fig["data"][0]["z"])
        allowed = ~np.isnan(z)
        assert np.abs(z[allowed] - reference[layer, head].numpy()[allowed]).max() <= TOL
        assert np.abs(reference[layer, head].numpy()[~allowed]).max(initial=0.0) == 0.0  # blank: masked only
        assert allowed.all() if name == "bert" else (~allowed).sum() == len(ids) * (len(ids) - 1) // 2
    for view in ("model", "token", "qk", "combine", "compare"):
        at.radio(key="attn_view").set_value(view).run()
        assert_no_exception(at)
        assert charts(at), view


@pytest.mark.parametrize("name", ["bert", "gpt2"])
def test_the_export_command_writes_the_same_numbers(folders, tmp_path, name, capsys):
    from core.lens.export import main
    from tests.hf_models import reference_attention

    out = tmp_path / f"{name}.npz"
    assert main([str(folders / name), TEXTS[name], "-o", str(out), "--csv"]) == 0
    data = np.load(out)
    loaded = load(folders / name)
    run = av.run_attention(loaded.model, loaded.tokenizer, loaded.task, TEXTS[name])
    reference, _ = reference_attention(folders / name, data["ids"].tolist())
    assert np.abs(data["attention"] - reference.numpy()).max() <= TOL
    assert data["tokens"].tolist() == run.tokens and np.array_equal(data["attention"], run.attention)
    assert out.with_suffix(".csv").read_text().count("\n") == 1 + 2 * 2 * len(run.ids) ** 2


@pytest.mark.parametrize("page", ["home", "positional", "curves", "probe", "anatomy", "open_model"])
def test_every_other_page_survives_a_hugging_face_model_in_the_picker(folders, tiny_checkpoints, monkeypatch,
                                                                      page):
    from streamlit.testing.v1 import AppTest

    from tests.conftest import ROOT

    mixed = tiny_checkpoints.parent / "mixed"
    shutil.copytree(tiny_checkpoints, mixed, dirs_exist_ok=True)
    for name in ("bert", "gpt2"):
        shutil.copytree(folders / name, mixed / name, dirs_exist_ok=True)
    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(mixed))
    for model in ("gpt2", "bert"):
        at = AppTest.from_file(str(ROOT / "pages" / f"{page}.py"), default_timeout=60)
        at.query_params["model"] = model
        at.run()
        assert_no_exception(at)
        assert at.sidebar.selectbox(key="picker_model").value == model


def test_a_typed_folder_path_becomes_a_picker_entry_or_one_sentence(folders, tmp_path):
    info = hf.folder_info(f"  {folders / 'gpt2'}  ")
    assert (info.name, info.task, info.error) == ("gpt2", "lm", None) and info.size_bytes > 0
    for typed, message in ((str(tmp_path / "nope"), "is not a folder"), (str(tmp_path), "no config.json"),
                           ("", "is not a folder")):
        with pytest.raises(hf.HFError, match=message):
            hf.folder_info(typed)


def test_special_tokens_are_known_for_hiding_but_unknown_words_are_not(folders):
    bert, gpt2 = load(folders / "bert").tokenizer, load(folders / "gpt2").tokenizer
    assert {bert.inner.convert_ids_to_tokens(i) for i in bert.special_ids} == {"[PAD]", "[CLS]", "[SEP]", "[MASK]"}
    assert gpt2.inner.convert_ids_to_tokens(sorted(gpt2.special_ids)) == ["<|endoftext|>"]
    assert gpt2.decode([gpt2.pad_id]) == "\u25a1"  # GPT-2 has no PAD: the lab's PAD sign, not a crash


def test_evaluate_gives_a_gpt2_folders_perplexity_as_transformers_computes_it(folders, tmp_path, capsys):
    import torch
    import transformers

    from core.train.cli import main

    text = "the cat sat on the mat. Hello world!"
    (tmp_path / "t.txt").write_text(text)
    assert main(["evaluate", "--reading_params_path", str(folders / "gpt2"), "--eval_corpus_path",
                 str(tmp_path / "t.txt")]) == 0
    vocabulary, line = capsys.readouterr().out.splitlines()[:2]
    assert vocabulary.startswith("vocabulary: ") and vocabulary.endswith(" entries (subword)")  # issue 30
    model = transformers.AutoModelForCausalLM.from_pretrained(folders / "gpt2", local_files_only=True).eval()
    ids = torch.tensor([load(folders / "gpt2").tokenizer.encode(text)])
    with torch.no_grad():
        loss = model(ids, labels=ids).loss.item()
    assert line.startswith(f"t.txt: perplexity {np.exp(loss):.4g} (loss {loss:.4f}), {ids.size(1) - 1} tokens scored")
    assert main(["evaluate", "--reading_params_path", str(folders / "bert"), "--eval_corpus_path",
                 str(tmp_path / "t.txt")]) == 2
    assert "is a masked-lm model; evaluate scores language models" in capsys.readouterr().err


def test_open_your_model_adds_a_folder_inside_the_allowed_folders_and_refuses_others(folders, monkeypatch,
                                                                                      tmp_path):
    from streamlit.testing.v1 import AppTest

    from tests.conftest import ROOT

    allowed = tmp_path / "allowed"
    shutil.copytree(folders / "gpt2", allowed / "gpt2")
    monkeypatch.setenv("ATTENTION_LAB_ALLOWED_DIRS", str(allowed))
    at = AppTest.from_file(str(ROOT / "pages" / "open_model.py"), default_timeout=60)
    at.run()
    at.text_input(key="hf_folder").input(str(folders / "bert")).run()  # exists, but outside
    at.button(key="add_hf").click().run()
    assert_no_exception(at)
    assert any("outside the folders" in e.value for e in at.error)
    at.text_input(key="hf_folder").input(str(allowed / "gpt2")).run()
    at.button(key="add_hf").click().run()
    assert_no_exception(at)
    assert [i.name for i in at.session_state["uploaded_checkpoints"]] == ["gpt2"]
    assert at.sidebar.selectbox(key="picker_model").value == "gpt2"
