"""Shared fixtures: tiny models and checkpoints built in the test, never downloaded."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from core.io import checkpoint
from core.model.config import ModelConfig
from core.model.tokenizer import CharTokenizer, WordTokenizer
from core.model.transformer import Transformer

# Two test workers share two cores with whatever else runs; one thread each is faster overall.
torch.set_num_threads(1)

ROOT = Path(__file__).resolve().parent.parent
TINY_CORPUS = "Ada Lovelace. Ada Lovelace was born in London .\nAlan Turing was born in Maida Vale .\n"
HF_EXTRA = "requirements-hf.txt"


def require_hf_extra():
    """`transformers`, or skip naming the extra that is missing (CI installs it: .ci/run)."""
    return pytest.importorskip("transformers", reason=f"the optional Hugging Face extra is not installed "
                                                       f"(pip install -r {HF_EXTRA})")


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


@pytest.fixture
def tiny_checkpoints(tmp_path: Path) -> Path:
    """A folder with one checkpoint of each task, for app and page tests."""
    folder = tmp_path / "ckpts"
    save_tiny_checkpoint(folder / "tiny-lm.safetensors", "lm")
    save_tiny_checkpoint(folder / "tiny-birthplace.safetensors", "birthplace")
    save_tiny_checkpoint(folder / "tiny-classifier.safetensors", "classify")
    return folder
