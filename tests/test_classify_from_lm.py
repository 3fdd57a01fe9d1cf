"""A pretrained language model of any level into a classifier, and into finetuning, through the CLI: the file
brings its tokenizer and shape, its weights are kept, the head is new; a flag that contradicts the file, and a
file that cannot fit, get one sentence."""

import pytest
import torch

from core.data.world import generate_world, write_world
from core.io import checkpoint as ckpt
from core.train.cli import main

TINY = ["--n-layer", "1", "--n-head", "2", "--n-embd", "32", "--block-size", "48", "--epochs", "1",
        "--batch-size", "64"]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    folder = tmp_path_factory.mktemp("world")
    write_world(generate_world(seed=1, n_people=160, n_dev=30, n_test=10), folder)
    return folder


def _run(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture(scope="module")
def piece_lm(world, tmp_path_factory):
    """A tiny piece-level LM trained here (next-token prediction over the world's wiki.txt)."""
    path = tmp_path_factory.mktemp("lm") / "pre.safetensors"
    assert main(["pretrain", str(world / "wiki.txt"), "--level", "bpe", "--vocab-size", "300", "--objective", "lm",
                 *TINY, "--writing_params_path", str(path)]) == 0
    return path


def _classify(capsys, world, pre, out, *extra):
    return _run(capsys, "classify", world / "names_train.tsv", "--eval_corpus_path", world / "names_test.tsv",
                "--reading_params_path", pre, "--writing_params_path", out, *extra)


def test_a_piece_level_lm_becomes_a_classifier_with_its_tokenizer_shape_and_weights(world, piece_lm, tmp_path,
                                                                                      capsys):
    out = tmp_path / "cls.safetensors"
    code, stdout, stderr = _classify(capsys, world, piece_lm, out, "--epochs", "1", "--lr", "1e-12")
    assert code == 0, stderr
    lm, cls = ckpt.load(piece_lm), ckpt.load(out)
    assert cls.tokenizer.kind == "bpe" and cls.tokenizer.to_dict()["spec"] == lm.tokenizer.to_dict()["spec"]
    for text in ("Where was Ada Lovelace born?", "Jean Dupont", "Ærøskøbing 1815"):
        assert cls.tokenizer.tokenize(text).tokens == lm.tokenizer.tokenize(text).tokens  # same pieces
        assert cls.tokenizer.encode(text) == lm.tokenizer.encode(text)
    for field in ("n_layer", "n_head", "n_embd", "block_size", "positional", "vocab_size", "causal"):
        assert getattr(cls.config, field) == getattr(lm.config, field), field
    assert cls.config.causal and cls.config.pooling == "last" and cls.config.head == "classifier"
    kept, pretrained = cls.model.state_dict(), lm.model.state_dict()
    body = [k for k in pretrained if not k.startswith("head.")]
    assert body and all(torch.allclose(kept[k], pretrained[k], atol=1e-6) for k in body)  # lr ~0: still its weights
    assert not any(k.startswith("head.") and k in pretrained for k in kept)  # the LM head is gone: a new one
    assert cls.metadata["pretrained_from"] == "pre.safetensors"


def test_pooling_is_a_choice(world, piece_lm, tmp_path, capsys):
    code, _, stderr = _classify(capsys, world, piece_lm, tmp_path / "m.safetensors", "--epochs", "1",
                                "--pooling", "mean")
    assert code == 0, stderr
    assert ckpt.load(tmp_path / "m.safetensors").config.pooling == "mean"


def test_classify_level_bpe_from_scratch(world, tmp_path, capsys):
    out = tmp_path / "bpe.safetensors"
    code, _, stderr = _run(capsys, "classify", world / "names_train.tsv", "--eval_corpus_path",
                           world / "names_test.tsv", "--level", "bpe", "--vocab-size", "300", *TINY,
                           "--writing_params_path", out)
    assert code == 0, stderr
    loaded = ckpt.load(out)
    assert loaded.tokenizer.kind == "bpe" and loaded.tokenizer.vocab_size == 300 and not loaded.config.causal


def test_finetune_needs_only_the_pretrained_file(world, piece_lm, tmp_path, capsys):
    out = tmp_path / "fine.safetensors"
    code, _, stderr = _run(capsys, "finetune", world / "wiki.txt", "--reading_params_path", piece_lm,
                           "--finetune_corpus_path", world / "birth_places_train.tsv", "--epochs", "1",
                           "--writing_params_path", out)
    assert code == 0, stderr
    fine, lm = ckpt.load(out), ckpt.load(piece_lm)
    assert (fine.config.n_embd, fine.config.block_size, fine.tokenizer.kind) == (32, 48, "bpe")
    assert fine.tokenizer.encode("Where was Ada born?") == lm.tokenizer.encode("Where was Ada born?")


@pytest.mark.parametrize("function,flags,named", [
    ("finetune", ["--n-embd", "64"], ["--n-embd 64", "n_embd is 32"]),
    ("finetune", ["--block-size", "128"], ["--block-size 128", "block_size is 48"]),
    ("finetune", ["--level", "char"], ["--level char", "tokenizer is bpe"]),
    ("classify", ["--n-layer", "3"], ["--n-layer 3", "n_layer is 1"]),
    ("classify", ["--vocab-size", "500"], ["--vocab-size 500", "has 300 pieces"]),
])
def test_a_flag_that_contradicts_the_file_gets_one_sentence_naming_both(world, piece_lm, tmp_path, capsys,
                                                                         function, flags, named):
    data = (["--finetune_corpus_path", world / "birth_places_train.tsv"] if function == "finetune"
            else ["--eval_corpus_path", world / "names_test.tsv"])
    corpus = world / ("wiki.txt" if function == "finetune" else "names_train.tsv")
    code, _, stderr = _run(capsys, function, corpus, "--reading_params_path", piece_lm, *data, *flags,
                           "--writing_params_path", tmp_path / "o.safetensors")
    assert code == 2 and len(stderr.strip().splitlines()) == 1 and "Traceback" not in stderr
    assert all(part in stderr for part in named), stderr
    assert not (tmp_path / "o.safetensors").exists()


def test_a_flag_that_agrees_with_the_file_is_fine(world, piece_lm, tmp_path, capsys):
    code, _, stderr = _classify(capsys, world, piece_lm, tmp_path / "o.safetensors", "--n-embd", "32",
                                "--level", "bpe", "--epochs", "1")
    assert code == 0, stderr


def test_a_char_lm_into_a_char_classifier_still_works(world, tmp_path, capsys):
    pre = tmp_path / "char.safetensors"
    code, _, stderr = _run(capsys, "pretrain", world / "wiki.txt", *TINY, "--writing_params_path", pre)
    assert code == 0, stderr
    out = tmp_path / "cls.safetensors"
    code, _, stderr = _classify(capsys, world, pre, out, "--epochs", "1")
    assert code == 0, stderr
    cls, lm = ckpt.load(out), ckpt.load(pre)
    assert cls.tokenizer.kind == "char" and cls.tokenizer.to_dict() == lm.tokenizer.to_dict()
    assert cls.tokenizer.encode("Jean Dupont") == lm.tokenizer.encode("Jean Dupont")


def test_files_that_cannot_fit_get_one_sentence(world, piece_lm, tmp_path, capsys):
    cls = tmp_path / "cls.safetensors"
    assert _classify(capsys, world, piece_lm, cls, "--epochs", "1")[0] == 0
    # a classifier's head cannot continue as a language model
    code, _, stderr = _run(capsys, "finetune", world / "wiki.txt", "--reading_params_path", cls,
                           "--finetune_corpus_path", world / "birth_places_train.tsv",
                           "--writing_params_path", tmp_path / "o.safetensors")
    assert code == 2 and len(stderr.strip().splitlines()) == 1 and "cls.safetensors is a classifier" in stderr
    # a character model pretrained on another text has another vocabulary
    other = tmp_path / "other.txt"
    other.write_text("Zoe. Zoe was born in Quito .\n" * 50)
    char = tmp_path / "char.safetensors"
    assert main(["pretrain", str(other), *TINY, "--writing_params_path", str(char)]) == 0
    capsys.readouterr()
    code, _, stderr = _run(capsys, "finetune", world / "wiki.txt", "--reading_params_path", char,
                           "--finetune_corpus_path", world / "birth_places_train.tsv",
                           "--writing_params_path", tmp_path / "o.safetensors")
    assert code == 2 and len(stderr.strip().splitlines()) == 1 and "another vocabulary" in stderr
