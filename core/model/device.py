"""The device a model runs on, as the command lines name it: 'auto' (CUDA when there is one), 'cpu',
'cuda' or 'cuda:N'. One home for training and evaluation alike."""

from __future__ import annotations

import torch

from core.model.config import ConfigError


def pick_device(name: str) -> str:
    """'auto' -> 'cuda' where torch sees a GPU, else 'cpu'; a named CUDA device must exist."""
    device = name if name != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"--device {name}: CUDA is not available on this machine; use --device cpu or auto.")
    return device
