"""What opening a model gives: the types shared by our checkpoints and Hugging Face folders.

`core.io.checkpoint` (our .safetensors files) and `core.io.hf` (Hugging Face folders) both return
these, so every page and analysis handles one kind of loaded model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.model.config import ModelConfig
from core.model.tokenizer import Tokenizer
from core.model.transformer import Transformer


class CheckpointError(ValueError):
    """A file that cannot be opened as a checkpoint; str() is one sentence for the user."""


@dataclass
class CheckpointInfo:
    """What the picker needs, read from the header alone (no tensors)."""

    path: Path
    name: str
    size_bytes: int
    modified: float
    metadata: dict[str, Any] = field(default_factory=dict)  # decoded JSON values
    error: str | None = None

    @property
    def task(self) -> str | None:
        return self.metadata.get("task")

    @property
    def config(self) -> dict[str, Any]:
        return self.metadata.get("config") or {}


@dataclass
class LoadedCheckpoint:
    model: Transformer
    tokenizer: Tokenizer
    metadata: dict[str, Any]
    path: Path
    step: int | None = None  # a training-step snapshot's step (core/io/snapshots.py); None: the checkpoint
    edits: str | None = None  # a session's kept edits on these weights, as a version (ui/kept_edits.py)

    @property
    def config(self) -> ModelConfig:
        return self.model.config

    @property
    def task(self) -> str:
        return self.metadata["task"]

    @property
    def labels(self) -> list[str]:
        return self.metadata.get("labels") or []

    @property
    def history(self) -> list[dict[str, Any]]:
        return self.metadata.get("history") or []
