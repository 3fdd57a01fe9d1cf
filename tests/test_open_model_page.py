"""AppTest of "Open your model": uploads become picker entries; refusals are one sentence on screen."""

from __future__ import annotations

import io
import os
import random
import re
from pathlib import Path

import torch
from streamlit.testing.v1 import AppTest

from tests.conftest import ROOT, save_tiny_checkpoint
from tests.test_convert import CORPUS, VOCAB, CreatesCanary, mingpt_state_dict

PAGE = "pages/open_model.py"


def _page(monkeypatch, folder: Path) -> AppTest:
    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(folder))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.switch_page(PAGE)
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def _params_bytes(state) -> bytes:
    buffer = io.BytesIO()
    torch.save(state, buffer)
    return buffer.getvalue()


def _convert(at: AppTest, params: bytes, corpus: bytes, name: str = "synthesizer.finetune.params") -> AppTest:
    at.file_uploader(key="upload_params").upload(name, params)
    at.file_uploader(key="upload_corpus").upload("wiki.txt", corpus, "text/plain")
    at.run()
    at.button(key="convert_params").click().run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def shown(element) -> str:
    """The text as rendered: the page backslash-escapes markdown in user-derived text."""
    return re.sub(r"\\(.)", r"\1", element.value)


def _picker(at: AppTest):
    return at.sidebar.selectbox(key="picker_model")


def test_page_renders_and_explains(monkeypatch, tiny_checkpoints):
    at = _page(monkeypatch, tiny_checkpoints)
    assert at.title[0].value == "Open your model"
    assert len(at.file_uploader) == 6  # minGPT params + corpus, nanoGPT ckpt + vocabulary, checkpoint, records
    assert at.button(key="convert_params").disabled and at.button(key="add_checkpoint").disabled


def test_params_and_corpus_upload_joins_and_selects_in_picker(monkeypatch, tiny_checkpoints):
    at = _page(monkeypatch, tiny_checkpoints)
    params = _params_bytes(mingpt_state_dict("synthesizer", prefix="module."))
    _convert(at, params, CORPUS.encode())
    assert not at.error, [e.value for e in at.error]
    assert shown(at.success[0]) == "Added synthesizer.finetune to the model picker (selected now)."
    picker = _picker(at)
    assert picker.options == ["tiny-birthplace", "tiny-classifier", "tiny-lm", "synthesizer.finetune"]
    assert picker.value == "synthesizer.finetune"
    at.session_state["model_card_open"] = True  # the sidebar's card is drawn while open
    at.run()
    card = " ".join(t.value for t in at.sidebar.text)
    assert "synthesizer" in card and "birthplace" in card
    info = at.session_state["uploaded_checkpoints"][0]
    assert info.config["vocab_size"] == VOCAB and Path(info.path).is_file()
    folder = at.session_state["upload_dir"].path
    assert oct(folder.stat().st_mode & 0o777) == "0o700" and info.path.parent == folder
    assert not list(tiny_checkpoints.glob("synthesizer*"))  # nothing written next to the bundled ones
    # The picker survives another rerun of a different page.
    at.switch_page("pages/home.py").run()
    assert not at.exception and "synthesizer.finetune" in _picker(at).options


def test_our_checkpoint_upload_joins_an_empty_picker(monkeypatch, tmp_path):
    at = _page(monkeypatch, tmp_path / "no-checkpoints-here")
    assert not at.sidebar.selectbox
    data = save_tiny_checkpoint(tmp_path / "mine.safetensors", "lm", positional="alibi").read_bytes()
    at.file_uploader(key="upload_checkpoint").upload("mine.safetensors", data)
    at.run()
    at.button(key="add_checkpoint").click().run()
    assert not at.exception and not at.error
    assert _picker(at).options == ["mine"] and _picker(at).value == "mine"
    at.session_state["model_card_open"] = True  # the sidebar's card is drawn while open
    at.run()
    assert "alibi" in " ".join(t.value for t in at.sidebar.text)


def test_saving_into_a_named_folder_and_refusals_there(monkeypatch, tiny_checkpoints, tmp_path):
    target = tmp_path / "kept"
    target.mkdir()
    (target / "out").symlink_to(tmp_path, target_is_directory=True)
    monkeypatch.setenv("ATTENTION_LAB_ALLOWED_DIRS", f"{target}{os.pathsep}{ROOT / 'checkpoints'}")
    at = _page(monkeypatch, tiny_checkpoints)
    at.text_input(key="open_model_folder").input(str(ROOT / "checkpoints")).run()
    _convert(at, _params_bytes(mingpt_state_dict("vanilla")), CORPUS.encode(), "vanilla.finetune.params")
    assert "bundled checkpoints folder" in shown(at.error[0])
    for escape, words in ((f"{target}/../", "'..'"), (f"{target}/out", "outside the folders")):
        at.text_input(key="open_model_folder").input(escape).run()
        at.button(key="convert_params").click().run()
        assert not at.exception and words in shown(at.error[0]), shown(at.error[0])
    at.text_input(key="open_model_folder").input(str(target)).run()
    at.button(key="convert_params").click().run()
    assert not at.error and (target / "vanilla.finetune.safetensors").is_file()
    at.button(key="convert_params").click().run()  # the same upload again: never overwritten
    assert "already exists" in shown(at.error[0])
    assert sorted(p.name for p in target.iterdir()) == ["out", "vanilla.finetune.safetensors"]
    assert not list(tmp_path.glob("*.safetensors"))


def test_no_server_folder_box_unless_the_operator_allows_folders(monkeypatch, tiny_checkpoints):
    monkeypatch.delenv("ATTENTION_LAB_ALLOWED_DIRS", raising=False)
    at = _page(monkeypatch, tiny_checkpoints)
    assert not [t for t in at.text_input if t.key == "open_model_folder"]
    assert any("ATTENTION_LAB_ALLOWED_DIRS" in c.value for c in at.caption)


def test_the_open_tab_stays_after_adding_a_model(monkeypatch, tmp_path):
    at = _page(monkeypatch, tmp_path / "none")
    at.session_state["open_model_tab"] = "Attention Lab checkpoint"
    data = save_tiny_checkpoint(tmp_path / "mine.safetensors", "lm").read_bytes()
    at.file_uploader(key="upload_checkpoint").upload("mine.safetensors", data)
    at.run()
    at.button(key="add_checkpoint").click().run()
    assert not at.exception and not at.error
    assert at.session_state["open_model_tab"] == "Attention Lab checkpoint"
    assert _picker(at).value == "mine"


def _refusal_on_screen(at: AppTest) -> str:
    assert not at.exception, [e.message for e in at.exception]
    assert len(at.error) == 1, [e.value for e in at.error]
    assert "uploaded_checkpoints" not in at.session_state or not at.session_state["uploaded_checkpoints"]
    return shown(at.error[0])


def test_conversion_refusals_are_one_sentence_on_screen(monkeypatch, tiny_checkpoints, tmp_path):
    canary = tmp_path / "canary"
    evil = mingpt_state_dict("vanilla")
    evil["head.weight"] = CreatesCanary(canary)
    truncated = _params_bytes(mingpt_state_dict("vanilla"))
    missing = mingpt_state_dict("vanilla")
    del missing["blocks.0.ln2.bias"]
    cases = [
        (_params_bytes(mingpt_state_dict("vanilla", vocab=VOCAB + 2)), CORPUS.encode(), "embedding rows"),
        (_params_bytes(evil), CORPUS.encode(), "refused without running"),
        (truncated[: len(truncated) // 3], CORPUS.encode(), "truncated"),
        (b"\x00junk" + random.Random(0).randbytes(2043), CORPUS.encode(), "is not a minGPT params file"),
        (_params_bytes(missing), CORPUS.encode(), "blocks.0.ln2.bias"),
        (_params_bytes(mingpt_state_dict("vanilla")), CORPUS.encode() + "\u25a1".encode(), "U+25A1"),
        (_params_bytes(mingpt_state_dict("vanilla")), b"caf\xe9", "not UTF-8"),
        (_params_bytes(mingpt_state_dict("vanilla")), b"", "is empty"),
    ]
    for params, corpus, words in cases:
        at = _convert(_page(monkeypatch, tiny_checkpoints), params, corpus)
        message = _refusal_on_screen(at)
        assert words in message, message
        assert "\n" not in message
    assert not canary.exists()


def test_checkpoint_refusals_are_one_sentence_on_screen(monkeypatch, tiny_checkpoints, tmp_path):
    good = save_tiny_checkpoint(tmp_path / "good.safetensors", "lm").read_bytes()
    for data, words in [(os.urandom(3000), "is not an Attention Lab checkpoint"), (good[:-100], "truncated")]:
        at = _page(monkeypatch, tiny_checkpoints)
        at.file_uploader(key="upload_checkpoint").upload("broken.safetensors", data)
        at.run()
        at.button(key="add_checkpoint").click().run()
        assert words in _refusal_on_screen(at)
