"""The parts of a training recipe CSE 256 PA2's numbers depend on (issue 30): `--init pytorch` (the torch.nn
modules' own initialisation, which a model with no init code of its own has), and AdamW as
`torch.optim.AdamW(model.parameters(), lr)` builds it: `--betas 0.9 0.999 --weight-decay 0.01 --decay all
--grad-clip 0`. The defaults stay what existing models were trained with."""

from __future__ import annotations

import json

import pytest
import torch

from core.data.datasets import LanguageModelDataset
from core.io import checkpoint as ckpt
from core.model.config import ConfigError, ModelConfig
from core.model.tokenizer import WordTokenizer
from core.train.cli import CommandError, build_parser, main, trainer_config
from core.train.trainer import Trainer, TrainerConfig
from tests.conftest import tiny_model

TEXT = "We will build roads . We will build schools . Do n't wait for the economy to grow .\n" * 12
COURSE_OPTIMIZER = ["--betas", "0.9", "0.999", "--weight-decay", "0.01", "--decay", "all", "--grad-clip", "0"]


def _data(block_size: int = 8):
    tokenizer = WordTokenizer.from_corpus(TEXT)
    return tokenizer, LanguageModelDataset(TEXT, tokenizer, block_size)


def test_gpt2_init_is_the_default_and_pytorch_init_keeps_the_modules_own():
    gpt2, pytorch = tiny_model(30), tiny_model(30, init="pytorch")
    assert gpt2.config.init == "gpt2"
    assert gpt2.tok_emb.weight.std().item() == pytest.approx(0.02, rel=0.1)
    assert not gpt2.pos.table.any() and not gpt2.blocks[0].attn.key.bias.any()
    # nn.Embedding's N(0, 1), for the token embedding and (as an nn.Embedding would be) the position table
    assert pytorch.tok_emb.weight.std().item() == pytest.approx(1.0, rel=0.1)
    assert pytorch.pos.table.std().item() == pytest.approx(1.0, rel=0.15)
    # nn.Linear's kaiming-uniform: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) weights and biases, std bound/sqrt(3)
    key = pytorch.blocks[0].attn.key
    bound = key.in_features ** -0.5
    assert key.weight.abs().max().item() <= bound and key.bias.abs().max().item() <= bound
    assert key.weight.std().item() == pytest.approx(bound / 3 ** 0.5, rel=0.1)
    assert key.bias.any() and pytorch.blocks[0].ln1.weight.eq(1).all()


def test_init_is_checked_and_a_config_saved_before_it_existed_is_gpt2():
    with pytest.raises(ConfigError, match="Unknown init 'xavier'; choose one of: gpt2, pytorch"):
        ModelConfig(vocab_size=10, block_size=8, init="xavier")
    old = ModelConfig(vocab_size=10, block_size=8).to_dict()
    del old["init"]
    assert ModelConfig.from_dict(old).init == "gpt2"


def test_the_all_policy_decays_every_parameter_biases_included():
    tokenizer, data = _data()
    trainer = Trainer(tiny_model(tokenizer.vocab_size), data, TrainerConfig(decay="all", weight_decay=0.01))
    [group] = trainer.optimizer.param_groups
    assert group["weight_decay"] == 0.01
    assert {id(p) for p in group["params"]} == {id(p) for p in trainer.model.parameters()}


@pytest.mark.parametrize("clip", [0.0, 1e-12])
def test_grad_clip_zero_means_no_clipping(clip):
    """Adam's first step moves each weight by about lr * sign(gradient) when the gradient dwarfs eps (1e-8);
    a gradient clipped to a norm of 1e-12 moves it by far less. Clipping to 0 would zero every gradient."""
    tokenizer, data = _data()
    model = tiny_model(tokenizer.vocab_size, dropout=0.0, block_size=8)
    before = model.head.unembed.weight.detach().clone()
    Trainer(model, data, TrainerConfig(max_steps=1, batch_size=4, learning_rate=1e-2, weight_decay=0.0,
                                       grad_norm_clip=clip, device="cpu")).train()
    moved = (model.head.unembed.weight.detach() - before).abs().max().item()
    if clip == 0:
        assert moved == pytest.approx(1e-2, rel=0.01)
    else:
        assert moved < 1e-3


def _trainer(argv: list[str], function: str = "lm") -> TrainerConfig:
    return trainer_config(build_parser().parse_args([function, "corpus.txt", *argv]), function)


def test_the_optimizer_defaults_are_unchanged_and_each_option_sets_its_field():
    lm, pretrain = _trainer([]), _trainer([], "pretrain")
    assert (lm.betas, lm.weight_decay, lm.decay, lm.grad_norm_clip) == ((0.9, 0.95), 0.1, "mingpt", 1.0)
    assert (pretrain.betas, pretrain.weight_decay, pretrain.decay) == ((0.9, 0.95), 0.1, "cs224n")
    course = _trainer(COURSE_OPTIMIZER)
    assert (course.betas, course.weight_decay, course.decay, course.grad_norm_clip) == ((0.9, 0.999), 0.01,
                                                                                         "all", 0.0)
    assert _trainer(["--betas", "0.8", "0.99"]).betas == (0.8, 0.99)
    assert _trainer(["--weight-decay", "0"]).weight_decay == 0.0
    assert _trainer(["--decay", "cs224n"]).decay == "cs224n"
    assert _trainer(["--grad-clip", "0.5"]).grad_norm_clip == 0.5


@pytest.mark.parametrize("argv, message", [
    (["--betas", "0.9", "1.0"], "--betas must be two numbers in [0, 1), not 0.9 1.0."),
    (["--weight-decay", "-0.1"], "--weight-decay must be 0 or more."),
    (["--grad-clip", "-1"], "--grad-clip must be 0 or more."),
])
def test_impossible_optimizer_options_are_one_sentence(argv, message):
    with pytest.raises(CommandError) as raised:
        _trainer(argv)
    assert str(raised.value) == message


def test_a_checkpoint_records_the_init_and_the_optimizer(tmp_path, capsys):
    corpus = tmp_path / "train.txt"
    corpus.write_text(TEXT, encoding="utf-8")
    tiny = ["--level", "word", "--n-layer", "1", "--n-head", "2", "--n-embd", "16", "--block-size", "8",
            "--batch-size", "4", "--max-iters", "2", "--val-fraction", "0", "--device", "cpu"]
    course, default = tmp_path / "course.safetensors", tmp_path / "default.safetensors"
    assert main(["lm", str(corpus), *tiny, "--init", "pytorch", *COURSE_OPTIMIZER,
                 "--writing_params_path", str(course)]) == 0, capsys.readouterr().err
    assert main(["lm", str(corpus), *tiny, "--writing_params_path", str(default)]) == 0, capsys.readouterr().err
    metadata = ckpt.read_metadata(course)
    assert metadata["config"]["init"] == "pytorch"
    trainer = json.loads(metadata["trainer"])
    assert (trainer["betas"], trainer["weight_decay"], trainer["decay"], trainer["grad_norm_clip"]) == \
        ([0.9, 0.999], 0.01, "all", 0.0)
    assert "--init pytorch --betas 0.9 0.999" in metadata["command"]
    assert ckpt.read_metadata(default)["config"]["init"] == "gpt2"
    # loading builds the model (its init draws afresh), then the saved weights replace every drawn one
    torch.manual_seed(123)
    first = ckpt.load(course).model
    torch.manual_seed(456)
    assert first.config.init == "pytorch" and torch.equal(first.pos.table, ckpt.load(course).model.pos.table)
