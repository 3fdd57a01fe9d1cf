"""`--vocab-from FILE` (issue 30): the vocabulary built from named files, as CSE 256 PA2 builds it from
every training file of its folder; recorded with sha256; shown by evaluate; bad files refused in one
sentence; a test file warned about."""

from __future__ import annotations

import hashlib
import json

import pytest

from core.data.datasets import DataError
from core.data.vocabulary import vocabulary_text, vocabulary_warnings
from core.io import checkpoint as ckpt
from core.model.tokenizer import TokenizerError, VocabularyChoice
from core.train.callbacks import Checkpointing
from core.train.cli import main
from core.train.recipes import ModelShape, train_lm
from core.train.trainer import TrainerConfig

SHAPE = ModelShape(n_layer=1, n_head=2, n_embd=16, block_size=8, dropout=0.0)
LM_TEXT = "We will build roads. We will build schools. Don't wait.\n" * 20
CLS_TEXT = "0\tWe will win.\n1\tThe economy grew.\n2\tFreedom will prevail.\n"
TINY = ["--level", "word", "--n-layer", "1", "--n-head", "2", "--n-embd", "16", "--block-size", "8",
        "--batch-size", "8", "--max-iters", "2", "--device", "cpu"]


@pytest.fixture
def files(tmp_path):
    (tmp_path / "train_LM.txt").write_text(LM_TEXT, encoding="utf-8")
    (tmp_path / "train_CLS.tsv").write_text(CLS_TEXT, encoding="utf-8")
    (tmp_path / "test_LM.txt").write_text("The economy will win. We will prevail.\n", encoding="utf-8")
    (tmp_path / "test_CLS.tsv").write_text("0\tWe will build.\n2\tThe economy prevailed.\n", encoding="utf-8")
    return tmp_path


def test_a_tsv_gives_its_text_column_and_a_text_file_all_of_it(files):
    text = vocabulary_text([str(files / "train_CLS.tsv"), str(files / "train_LM.txt")])
    words = VocabularyChoice("word", splitter="nltk").build(text).words
    assert {"economy", "prevail", "build", "n't"} <= set(words)
    assert not {"0", "1", "2"} & set(words)  # labels are not words


def test_missing_empty_and_duplicate_files_are_refused_in_one_sentence(files):
    (files / "empty.txt").write_text("\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"nothing\.txt does not exist\.$"):
        vocabulary_text([str(files / "nothing.txt")])
    with pytest.raises(DataError, match=r"empty\.txt is empty\.$"):
        vocabulary_text([str(files / "empty.txt")])
    with pytest.raises(TokenizerError, match="names the same file twice"):
        VocabularyChoice("word", files=("a.txt", "a.txt"))


def test_a_test_file_in_the_vocabulary_is_warned_about(files):
    train, test = str(files / "train_LM.txt"), str(files / "test_LM.txt")
    assert vocabulary_warnings([train], [test]) == []
    [evaluated] = vocabulary_warnings([test], [test])
    assert "test_LM.txt, which is also evaluated" in evaluated and evaluated.count(".") == 2  # "test_LM.txt" + end
    [named] = vocabulary_warnings([str(files / "test_CLS.tsv")], [test])
    assert "named like a test file" in named


def test_the_checkpoint_records_each_file_with_its_sha256(files):
    paths = (str(files / "train_CLS.tsv"), str(files / "train_LM.txt"))
    trainer = train_lm(paths[1], str(files / "lm.safetensors"), SHAPE,
                       TrainerConfig(max_epochs=1, max_steps=2, batch_size=8, seed=0), val_fraction=0.0,
                       vocabulary=VocabularyChoice("word", splitter="nltk", files=paths))
    loaded = ckpt.load(files / "lm.safetensors")
    record = json.loads(loaded.metadata["vocabulary"])
    assert [f["path"] for f in record["files"]] == list(paths)
    assert [f["sha256"] for f in record["files"]] == [hashlib.sha256(open(p, "rb").read()).hexdigest()
                                                      for p in paths]
    assert record["size"] == loaded.tokenizer.vocab_size == trainer.callback(Checkpointing).plan.tokenizer.vocab_size
    assert record["splitter"] == "nltk" and loaded.tokenizer.splitter == "nltk"
    assert "prevail" in loaded.tokenizer.words  # from train_CLS.tsv only


def test_lm_and_evaluate_name_the_vocabulary_beside_the_unknown_share(files, capsys):
    out = files / "lm.safetensors"
    code = main(["lm", str(files / "train_LM.txt"), "--splitter", "nltk", "--vocab-from", str(files / "train_CLS.tsv"),
                 "--vocab-from", str(files / "train_LM.txt"), "--eval_corpus_path", str(files / "test_LM.txt"),
                 "--val-fraction", "0", "--writing_params_path", str(out), *TINY])
    printed = capsys.readouterr().out
    assert code == 0
    sha = hashlib.sha256((files / "train_CLS.tsv").read_bytes()).hexdigest()[:12]
    assert f"(word, nltk splitter), built from train_CLS.tsv (sha256 {sha}), train_LM.txt" in printed
    assert "unknown share of split test-LM: " in printed and "warning" not in printed
    assert main(["evaluate", "--reading_params_path", str(out), "--eval_corpus_path", str(files / "test_LM.txt")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("vocabulary: ") and "train_CLS.tsv (sha256" in lines[0]
    assert lines[1].startswith("test_LM.txt: perplexity ") and "unknown 0.0%" in lines[1]  # every word known


def test_classify_takes_the_same_vocabulary_and_warns_about_a_test_file(files, capsys):
    out = files / "cls.safetensors"
    code = main(["classify", str(files / "train_CLS.tsv"), "--eval_corpus_path", str(files / "test_CLS.tsv"),
                 "--splitter", "nltk", "--vocab-from", str(files / "train_CLS.tsv"), "--vocab-from",
                 str(files / "test_CLS.tsv"), "--writing_params_path", str(out), *TINY])
    printed = capsys.readouterr().out
    assert code == 0
    assert printed.startswith("warning: the vocabulary is built from test_CLS.tsv, which is also evaluated")
    assert main(["evaluate", "--reading_params_path", str(out), "--eval_corpus_path", str(files / "test_CLS.tsv")]) == 0
    assert "built from train_CLS.tsv (sha256 " in capsys.readouterr().out


@pytest.mark.parametrize("extra, message", [
    (["--vocab-from", "nothing.txt"], "nothing.txt does not exist."),
    (["--vocab-from", "empty.txt"], "empty.txt is empty."),
    (["--vocab-from", "train_LM.txt", "--vocab-from", "train_LM.txt"], "names the same file twice"),
    (["--splitter", "nltk", "--level", "char"], "--splitter applies to word vocabularies"),
])
def test_bad_vocabulary_input_is_one_sentence_on_stderr(files, capsys, monkeypatch, extra, message):
    monkeypatch.chdir(files)
    (files / "empty.txt").write_text("  \n", encoding="utf-8")
    code = main(["lm", "train_LM.txt", "--writing_params_path", "x.safetensors", *TINY, *extra])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: ") and message in err and len(err.splitlines()) == 1
    assert not (files / "x.safetensors").exists()


def test_functions_without_a_word_vocabulary_refuse_the_options(files, capsys):
    code = main(["mlm", str(files / "train_LM.txt"), "--vocab-from", str(files / "train_LM.txt"),
                 "--writing_params_path", str(files / "m.safetensors")])
    err = capsys.readouterr().err
    assert code == 2 and "unrecognized arguments: --vocab-from" in err  # argparse's own refusal (mlm's subparser)
    assert not (files / "m.safetensors").exists()
