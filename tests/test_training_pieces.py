"""Issue 41: "never seen 'ble': no training text had it", while "Grenoble" is in 46 lines of the corpus. A piece the
model never read on its own is explained by how the training text was cut there; each claim is checked here
against the bundled model's training text, tokenized line by line with the model's own tokenizer."""

from __future__ import annotations

import os
import re
from functools import cache
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from core.io.checkpoint import LoadedCheckpoint, load
from core.lens import attention as av
from core.lens.probe.questions import unknown_summary
from core.lens.training_pieces import TrainingWords, corpus_cuts, training_lines
from tests.conftest import ROOT

MODELS = {"birth": "birth-vanilla-pretrained", "lm": "lm-learned"}
TYPED = ["Where was Annable Greno born?", "The trans? Grenoblé 🤖", "Mary Sundqvistable"]


@cache
def model(kind: str) -> LoadedCheckpoint:
    return load(ROOT / "checkpoints" / f"{MODELS[kind]}.safetensors")


@cache
def corpus_lines(kind: str) -> tuple[str, ...]:
    """The training files of the model's metadata, read here, not through core (the dev and test files it was
    evaluated on are not training text)."""
    lines = []
    for entry in model(kind).metadata["data"]:
        if "_dev" in entry["path"] or "_test" in entry["path"]:
            continue
        lines += [line for line in (ROOT / entry["path"]).read_text("utf-8").splitlines() if line.strip()]
    return tuple(lines)


@cache
def tokenized_corpus(kind: str) -> tuple:
    return tuple(model(kind).tokenizer.hf.encode_batch(list(corpus_lines(kind))))


@pytest.mark.parametrize("kind", list(MODELS))
def test_each_cut_is_what_the_tokenized_training_text_shows(kind):
    loaded = model(kind)
    tokenizer = loaded.tokenizer
    ids_read = {i for encoding in tokenized_corpus(kind) for i in encoding.ids}
    words = TrainingWords.of(training_lines(loaded.metadata["data"]))
    explained = 0
    for text in TYPED:
        tokenized = tokenizer.tokenize(text)
        for cut in corpus_cuts(tokenizer, tokenized.untrained, words):
            piece_ids = {i for i, t in zip(tokenized.ids, tokenized.tokens, strict=True) if t == cut.piece}
            # 'ble' alone never occurred: true of the corpus (a character cut into byte pieces: one of them)
            assert piece_ids - ids_read
            if cut.word is None:  # "no training text has it": not one line contains its characters
                assert not any(cut.piece in line for line in corpus_lines(kind)), cut
                continue
            explained += 1
            assert cut.piece in cut.word
            pattern = re.compile(r"(?<!\w)" + re.escape(cut.word) + r"(?![\w])" if cut.word[-1].isalnum()
                                 else re.escape(cut.word))
            holding = [n for n, line in enumerate(corpus_lines(kind)) if pattern.search(line)]
            assert len(holding) == cut.lines, cut  # "(46 lines)": a grep of the training text
            for n in holding[:20]:  # in every line, the word is read as the pieces the sentence names
                line, encoding = corpus_lines(kind)[n], tokenized_corpus(kind)[n]
                start = pattern.search(line).start()
                end = start + len(cut.word)
                pieces = tuple(line[a:b] for a, b in encoding.offsets if a >= start and b <= end)
                assert "".join(pieces) == cut.word and pieces == cut.pieces, (line, pieces, cut)
    assert explained >= 2


def test_the_issue_grenoble_case_says_how_training_cut_it():
    loaded = model("birth")
    words = TrainingWords.of(training_lines(loaded.metadata["data"]))
    message = unknown_summary(["Where was Annable born?"], {"m": loaded.tokenizer}, words={"m": words})
    assert "never read 'ble' as a piece of its own" in message, message
    grenoble = sum("Grenoble" in line for line in corpus_lines("birth"))
    assert f"in training, 'Grenoble' ({grenoble} lines) was read as one piece; 'ble' alone never occurred" in message
    assert "no training text had" not in message


def test_the_attention_page_says_how_training_cut_the_pieces(monkeypatch, tmp_path: Path):
    folder = tmp_path / "ckpts"
    folder.mkdir()
    os.symlink(ROOT / "checkpoints" / f"{MODELS['lm']}.safetensors", folder / f"{MODELS['lm']}.safetensors")
    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(folder))
    at = AppTest.from_file(str(ROOT / "pages" / "attention.py"), default_timeout=120)
    at.query_params["text"] = "The trans asked"
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    note = next(c.value.replace("\\", "") for c in at.caption if "never occur" in c.value)
    translator = sum(bool(re.search(r"\btranslator\b", line)) for line in corpus_lines("lm"))
    assert f"in training, 'translator' ({translator} lines) was read as one piece; 'trans' alone never occurred" \
        in note, note
    assert av.untrained_message(["trans"]).startswith("1 piece never occurs on its own")
