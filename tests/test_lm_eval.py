"""Language models measured on the files people are given (issue 16): per-file perplexity against a
hand computation, named validation splits in the history, vocabulary flags and the unknown share,
constant schedule, --max-iters, one progress line per epoch."""

from __future__ import annotations

import json
import math

import pytest
import torch

from core.data.datasets import DataError
from core.io import checkpoint as ckpt
from core.lens.lm_eval import score_text, split_names, unknown_count, unknown_warning
from core.model.tokenizer import CharTokenizer, TokenizerError, VocabularyChoice, WordTokenizer
from core.train.cli import main
from core.train.progress import EpochReport
from core.train.recipes import ModelShape, train_lm
from core.train.trainer import TrainerConfig
from tests.conftest import tiny_model

SHAPE = ModelShape(n_layer=1, n_head=2, n_embd=16, block_size=8, dropout=0.0)
TRAIN = ("The President spoke to Congress today. The Congress listened. " * 12
         + "We will build roads, and we will build schools.\n") * 3
TEST_A = "The President spoke to the Nation. Roads and schools!\n"
TEST_B = "Congress will build. The Nation listened to the President today.\n"


def hand_perplexity(model, ids: list[int]) -> float:
    """exp(mean -log p(token t | every token before it, within its window of block_size))."""
    block, nll, n = model.config.block_size, 0.0, 0
    for t in range(1, len(ids)):
        start = ((t - 1) // block) * block  # the window that predicts token t
        context = torch.tensor([ids[start:t]])
        with torch.no_grad():
            logits, _ = model(context)
        if ids[t] == model.config.pad_id:
            continue
        nll -= torch.log_softmax(logits[0, -1], dim=-1)[ids[t]].item()
        n += 1
    return math.exp(nll / n)


@pytest.mark.parametrize("length", [17, 8, 9, 30])  # a partial last window, exactly one, one plus one token
def test_file_perplexity_equals_a_hand_computation(length):
    tokenizer = CharTokenizer.from_corpus(TRAIN)
    model = tiny_model(tokenizer.vocab_size, block_size=8, n_layer=1, n_head=2, n_embd=16)
    text = TRAIN[:length]
    score = score_text(model, tokenizer, text, "t")
    assert score.tokens_scored == length - 1
    assert score.perplexity == pytest.approx(hand_perplexity(model, tokenizer.encode(text)), rel=1e-5)


def test_unknown_characters_are_counted_and_not_scored():
    tokenizer = CharTokenizer.from_corpus("abc ")
    model = tiny_model(tokenizer.vocab_size, block_size=8)
    score = score_text(model, tokenizer, "abzzc a", "t")
    assert (score.unknown, score.tokens) == (2, 7) and score.tokens_scored == 4  # z, z are PAD: not targets
    assert unknown_warning("t", score.unknown_share) is not None and unknown_warning("t", 0.05) is None


def test_vocabulary_flags_change_the_unknown_share_as_expected():
    train = "The cat sat. the Cat sat on THE mat. a rare word here.\n"
    test = "The cat sat on the mat. A rare word."
    shares = {}
    for lowercase in (False, True):
        for min_freq in (1, 2):
            tok = VocabularyChoice("word", lowercase, min_freq).build(train)
            unknown, total = unknown_count(tok, test)
            shares[lowercase, min_freq] = unknown / total
    assert shares[False, 1] == pytest.approx(1 / 11)  # only "A" (capital) is unseen as written
    assert shares[True, 1] == 0.0  # folding case: every word known
    assert shares[True, 2] > shares[True, 1] and shares[False, 2] > shares[False, 1]  # rare words dropped
    assert VocabularyChoice("word") == VocabularyChoice("word", lowercase=False, min_freq=1)  # one default
    with pytest.raises(TokenizerError, match="--level word"):
        VocabularyChoice("char", lowercase=True)
    assert CharTokenizer.from_corpus("aab", min_freq=2).chars[2:] == ["a"]
    assert CharTokenizer.from_corpus("aab").chars == CharTokenizer.from_corpus("aab", min_freq=1).chars


def test_lm_eval_files_are_named_splits_measured_every_epoch(tmp_path):
    (tmp_path / "train.txt").write_text(TRAIN)
    (tmp_path / "test_a.txt").write_text(TEST_A)
    (tmp_path / "test_b.txt").write_text(TEST_B)
    lines: list[str] = []
    report = EpochReport("tokens", best=("test-a_loss", False), out=lines.append)
    trainer = train_lm(str(tmp_path / "train.txt"), str(tmp_path / "lm.safetensors"), SHAPE,
                       TrainerConfig(max_epochs=3, batch_size=8, learning_rate=3e-3, seed=0),
                       eval_paths=[str(tmp_path / "test_a.txt"), str(tmp_path / "test_b.txt")],
                       vocabulary=VocabularyChoice("word"), report=report)
    loaded = ckpt.load(tmp_path / "lm.safetensors")
    rows = [r for r in loaded.history if r["split"] in ("test-a", "test-b", "val")]
    assert {(r["split"], r["metric"]) for r in rows} == {(s, m) for s in ("val", "test-a", "test-b")
                                                         for m in ("loss", "perplexity")}
    assert sorted({r["epoch"] for r in rows}) == [1, 2, 3]
    final = score_text(loaded.model, loaded.tokenizer, TEST_A, "test_a.txt")
    assert trainer.metrics["test-a_perplexity"] == pytest.approx(final.perplexity, rel=1e-6)
    lines += report.summary()
    assert len(lines) == 5 and all(line.startswith(f"epoch {i}/3  train loss ") for i, line in
                                   enumerate(lines[:3], 1))
    assert "test-b perplexity" in lines[0] and "tokens/s" in lines[0]
    assert lines[3].startswith("final (epoch 3)") and lines[4].startswith("best (epoch ")
    shares = json.loads(loaded.metadata["vocabulary"])["unknown_share"]
    assert set(shares) == {"val", "test-a", "test-b"} and shares["test-a"] > 0  # "Nation" never seen
    assert split_names(["a/test_1.txt", "b/test_1.txt", "val.txt"]) == ["test-1", "test-1-2", "val-file"]


def test_max_iters_and_a_constant_schedule(tmp_path):
    (tmp_path / "train.txt").write_text(TRAIN)
    trainer = train_lm(str(tmp_path / "train.txt"), str(tmp_path / "lm.safetensors"), SHAPE,
                       TrainerConfig(max_epochs=10**6, max_steps=7, batch_size=8, learning_rate=2e-3,
                                     lr_decay=False), val_fraction=0.0)
    assert trainer.step == 7
    rates = {r["value"] for r in trainer.history if r["metric"] == "lr"}
    assert rates == {2e-3}
    with pytest.raises(DataError, match="--val-fraction"):
        train_lm(str(tmp_path / "train.txt"), str(tmp_path / "x.safetensors"), SHAPE, TrainerConfig(),
                 val_fraction=1.0)


def test_a_new_output_folder_is_made_before_the_first_log_row(tmp_path):
    """The live log gets a row every log_every steps, before the first save would make the folder: a run
    into a folder that does not exist yet crashed at step 10 (seen on a GPU, where step 10 comes first)."""
    (tmp_path / "train.txt").write_text(TRAIN)
    out = tmp_path / "new" / "deeper" / "lm.safetensors"
    train_lm(str(tmp_path / "train.txt"), str(out), SHAPE,
             TrainerConfig(max_epochs=1, max_steps=2, batch_size=8, log_every=1), val_fraction=0.0)
    assert out.is_file() and out.with_name("lm.log.jsonl").is_file()


def test_classify_prints_sentences_per_second_and_the_unknown_share(tmp_path, capsys):
    train = "".join(f"{label}\t{text}\n" for label, text in
                    [("pos", "good great fine"), ("neg", "bad awful poor")] * 10)
    (tmp_path / "train.tsv").write_text(train)
    (tmp_path / "test.tsv").write_text("pos\tgood Great\nneg\tawful terrible\n")
    code = main(["classify", str(tmp_path / "train.tsv"), "--eval_corpus_path", str(tmp_path / "test.tsv"),
                 "--writing_params_path", str(tmp_path / "c.safetensors"), "--level", "word", "--n-layer", "1",
                 "--n-head", "2", "--n-embd", "16", "--block-size", "8", "--epochs", "2", "--batch-size", "8"])
    out = capsys.readouterr().out
    assert code == 0
    assert out.count("sentences/s") == 2 and "tokens/s" not in out
    assert "unknown share of split val: 50.0%" in out  # Great (case kept) and terrible
    assert "warning: 50.0% of split val is outside the vocabulary" in out
    assert "best (epoch" in out and "by val accuracy" in out


def test_evaluate_prints_per_file_perplexity_tokens_and_unknown_share(tmp_path, capsys):
    tokenizer = WordTokenizer.from_corpus(TRAIN, lowercase=False)
    model = tiny_model(tokenizer.vocab_size, block_size=8)
    ckpt.save(tmp_path / "lm.safetensors", model, tokenizer, "lm")
    (tmp_path / "a.txt").write_text(TEST_A)
    (tmp_path / "b.txt").write_text(TEST_B)
    code = main(["evaluate", "--reading_params_path", str(tmp_path / "lm.safetensors"),
                 "--eval_corpus_path", str(tmp_path / "a.txt"), "--eval_corpus_path", str(tmp_path / "b.txt")])
    out = capsys.readouterr().out.splitlines()
    assert code == 0
    expected = score_text(model, tokenizer, TEST_A, "a.txt")
    # what the vocabulary is comes first (issue 30); a model saved without a run's record has no sources
    assert out.pop(0) == f"vocabulary: {tokenizer.vocab_size:,} entries (word, regex splitter)"
    assert out[0] == (f"a.txt: perplexity {expected.perplexity:.4g} (loss {expected.loss:.4f}), "
                      f"{expected.tokens_scored:,} tokens scored, unknown {expected.unknown_share:.1%}")
    assert any(line.startswith("b.txt: perplexity ") for line in out)


@pytest.mark.parametrize("args,message", [
    (["evaluate", "--reading_params_path", "enc.safetensors", "--eval_corpus_path", "a.txt"], "left-to-right"),
    (["classify", "t.tsv", "--writing_params_path", "o.safetensors"], "classify needs --eval_corpus_path"),
    (["classify", "t.tsv", "--eval_corpus_path", "t.tsv", "--eval_corpus_path", "t.tsv",
      "--writing_params_path", "o.safetensors"], "takes one --eval_corpus_path"),
    (["lm", "a.txt", "--lowercase", "--writing_params_path", "o.safetensors"], "--level word"),
    (["lm", "a.txt", "--min-freq", "0", "--writing_params_path", "o.safetensors"], "--min-freq must be 1"),
    (["lm", "a.txt", "--val-fraction", "1.5", "--writing_params_path", "o.safetensors"], "--val-fraction"),
    (["lm", "vanilla", "a.txt", "b.txt"], "at most a variant and one corpus path"),
    (["lm", "a.txt", "--eval_corpus_path", "one.txt", "--writing_params_path", "o.safetensors"],
     "one.txt has fewer than two tokens"),
])
def test_bad_commands_are_one_sentence(tmp_path, monkeypatch, capsys, args, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.txt").write_text(TRAIN)
    (tmp_path / "t.tsv").write_text("pos\tgood\nneg\tbad\n")
    (tmp_path / "one.txt").write_text("T")
    tokenizer = CharTokenizer.from_corpus(TRAIN)
    ckpt.save(tmp_path / "enc.safetensors", tiny_model(tokenizer.vocab_size, causal=False), tokenizer, "lm")
    assert main(args) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_progress_survives_a_pipe(tmp_path):
    """Run as a user would, stdout a pipe: plain lines, one per epoch, no progress-bar carriage returns."""
    import subprocess
    import sys

    from tests.conftest import ROOT

    (tmp_path / "train.txt").write_text(TRAIN)
    (tmp_path / "test.txt").write_text(TEST_A)
    result = subprocess.run(
        [sys.executable, "-m", "core.train", "lm", "train.txt", "--eval_corpus_path", "test.txt", "--n-layer", "1",
         "--n-head", "2", "--n-embd", "16", "--block-size", "16", "--epochs", "2", "--batch-size", "16",
         "--writing_params_path", "lm.safetensors"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert [line.split("  ")[0] for line in lines[:2]] == ["epoch 1/2", "epoch 2/2"]
    assert all(k in lines[0] for k in ("train loss", "val loss", "test loss", "test perplexity", "tokens/s"))
    assert lines[2].startswith("final (epoch 2)") and lines[3].startswith("best (epoch")
    assert "unknown share of split test: " in result.stdout and "\r" not in result.stdout + result.stderr
