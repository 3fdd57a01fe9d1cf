"""Every evaluation and probe function works with a model on any device it can live on.

The bug this guards against: `memorization_rate` built its prompt on the CPU while the model was on
CUDA ("index is on cpu, different from other tensors on cuda:0"). CPU always runs here; CUDA runs where
the machine has it (a GPU session); each device must give the CPU's answers.
"""

from __future__ import annotations

import pytest
import torch

from core.data.datasets import NameDataset
from core.lens.attention import run_attention
from core.lens.probe.answers import answer_attention, answer_probabilities, ask, rank_candidates
from core.lens.probe.evaluation import evaluate_birthplaces, memorization_rate, predict_birthplaces_one_by_one
from core.model.tokenizer import CharTokenizer
from core.train.trainer import evaluate_loss
from tests.conftest import tiny_model

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
CORPUS = "Ada Lovelace. Ada Lovelace was born in London .\nBo Li. Bo Li was born in Paris and lived there ."
PAIRS = [("Where was Ada Lovelace born?", "London"), ("Where was Bo Li born?", "Paris")]


def _everything(device: str) -> dict:
    tokenizer = CharTokenizer.from_corpus(CORPUS)
    model = tiny_model(tokenizer.vocab_size, block_size=64).to(device)
    questions = [q for q, _ in PAIRS]
    answers = predict_birthplaces_one_by_one(model, tokenizer, questions)
    return {
        "evaluate": evaluate_birthplaces(model, tokenizer, PAIRS).predictions,
        "one_by_one": answers,
        "memorised": memorization_rate(model, tokenizer, CORPUS, PAIRS),
        "ranking": rank_candidates(model, tokenizer, questions[0], ["London", "Paris"]).places,
        "probabilities": answer_probabilities(model, tokenizer, questions, answers).round(4).tolist(),
        "ask": ask(model, tokenizer, questions[1], ["London", "Paris"]).answer,
        "answer_attention": answer_attention(model, tokenizer, questions[0]).weights.shape,
        "run_attention": run_attention(model, tokenizer, "birthplace", questions[0]).attention.shape,
        "loss": round(evaluate_loss(model, NameDataset(PAIRS, tokenizer, 64), device=device)["loss"], 4),
    }


@pytest.mark.parametrize("device", DEVICES)
def test_evaluation_and_probe_functions_follow_the_model_to_its_device(device):
    assert _everything(device) == _everything("cpu")


def test_one_device_choice_for_training_and_evaluation(monkeypatch):
    from core.model.config import ConfigError
    from core.model.device import pick_device
    from core.train import extrapolation as extrapolation_cli
    from core.train import trainer

    assert trainer.pick_device is extrapolation_cli.pick_device is pick_device
    assert pick_device("cpu") == "cpu"
    assert pick_device("auto") == ("cuda" if torch.cuda.is_available() else "cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert pick_device("auto") == "cpu"
    with pytest.raises(ConfigError, match="CUDA is not available"):
        pick_device("cuda:0")
