"""Tiny random checkpoints of every task (language model, birthplace, classifier), built in a second with
no download: the tests' fixtures (tests/conftest.py re-exports these) and what the browser tests and the
load test run on when the bundled checkpoints/ are not there."""

from __future__ import annotations

from pathlib import Path

import torch

from core.io import checkpoint
from core.model.config import ModelConfig
from core.model.tokenizer import CharTokenizer, WordTokenizer
from core.model.transformer import Transformer

TINY_CORPUS = "Ada Lovelace. Ada Lovelace was born in London .\nAlan Turing was born in Maida Vale .\n"
TINY_TASKS = {"tiny-lm": "lm", "tiny-birthplace": "birthplace", "tiny-classifier": "classify"}


def tiny_model(vocab_size: int = 30, **overrides) -> Transformer:
    fields = dict(vocab_size=vocab_size, block_size=32, n_layer=2, n_head=4, n_embd=32, dropout=0.0)
    fields.update(overrides)
    torch.manual_seed(0)
    return Transformer(ModelConfig(**fields)).eval()


def save_tiny_checkpoint(path: Path, task: str = "lm", **overrides) -> Path:
    """A small random checkpoint of any kind, with a short history so curve pages have data."""
    if task == "classify":
        tokenizer = WordTokenizer.from_corpus(TINY_CORPUS)
        overrides = {"head": "classifier", "n_classes": 3, "causal": False, **overrides}
        labels = ["England", "France", "Italy"]
    else:
        tokenizer = CharTokenizer.from_corpus(TINY_CORPUS + "Where was born?")
        labels = None
    model = tiny_model(tokenizer.vocab_size, **overrides)
    history = [
        {"run": path.stem, "step": s, "epoch": s // 2, "tokens": 64 * s, "wall_time": 0.1 * s,
         "split": "train", "metric": "loss", "value": 3.0 - 0.2 * s} for s in range(1, 6)
    ] + [{"run": path.stem, "step": 5, "epoch": 2, "tokens": 320, "wall_time": 0.5, "split": "val",
          "metric": "loss", "value": 2.5}]
    return checkpoint.save(path, model, tokenizer, task, labels=labels, history=history,
                           metrics={"val_loss": 2.5}, command="pytest", seed=0)


def tiny_checkpoint_folder(folder: Path) -> Path:
    """`folder` with one tiny checkpoint of each task (TINY_TASKS)."""
    for name, task in TINY_TASKS.items():
        save_tiny_checkpoint(folder / f"{name}.safetensors", task)
    return folder


def bundled_has_checkpoints() -> bool:
    """The bundled checkpoints/ folder holds at least one readable checkpoint."""
    return any(info.error is None for info in checkpoint.list_checkpoints(checkpoint.DEFAULT_DIR))
