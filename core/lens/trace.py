"""One forward pass, recorded: what every analysis reads instead of running the model itself.

`trace(model, ids)` is to this lab what TransformerLens's `run_with_cache` is to its users: the attention
page, the positional page's sentence view, the probe's "where does it look" and the export command
all ask for a `Trace`, so the pass (device, inference mode, the model's own mask) is written once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from core.text import visible_token


class TraceError(ValueError):
    """Input the model refuses (too long for its positions); str() is one sentence for the user."""


class AttentionShape:
    """Sizes read from `attention` (n_layer, n_head, T, T) and `ids`, for every record of a pass."""

    attention: np.ndarray
    ids: list[int]

    @property
    def n_layer(self) -> int:
        return self.attention.shape[0]

    @property
    def n_head(self) -> int:
        return self.attention.shape[1]

    @property
    def n_tokens(self) -> int:
        return len(self.ids)


@dataclass
class Trace(AttentionShape):
    ids: list[int]  # what the model read, (T,)
    tokens: list[str]  # one display label per id (core.text.visible_token)
    attention: np.ndarray  # (n_layer, n_head, T, T) float32: the model's own probabilities
    allowed: np.ndarray  # (T, T) bool: exactly the model's mask, True where a query may attend a key
    logits: torch.Tensor  # (1, T, V) for language models, (1, n_classes) for classifiers; model's device
    idx: torch.Tensor  # (1, T) the ids as a tensor on the model's device (for generation after the pass)


def model_device(model) -> torch.device:
    return next(model.parameters()).device


def trace(model, ids: Sequence[int], tokens: Sequence[str] | None = None) -> Trace:
    """Run `model` once on `ids` with attention recorded. `tokens`: the raw token strings for the
    labels (default: one per id, unlabelled positions numbered)."""
    ids = [int(i) for i in ids]
    if tokens is not None and len(tokens) != len(ids):
        raise ValueError(f"{len(tokens)} token labels for {len(ids)} ids.")
    idx = torch.tensor([ids], dtype=torch.long, device=model_device(model))  # (1, T)
    try:
        with torch.inference_mode():
            logits, attention = model.run_with_attention(idx)  # attention: (L, 1, H, T, T)
            allowed = model.attention_mask(idx)[0, 0]  # (T, T)
    except ValueError as exc:  # a length the model refuses: already one sentence
        raise TraceError(str(exc)) from None
    labels = [visible_token(t) for t in tokens] if tokens is not None else [str(i) for i in range(len(ids))]
    return Trace(ids=ids, tokens=labels, attention=attention[:, 0].float().cpu().numpy(),
                 allowed=allowed.cpu().numpy().astype(bool), logits=logits, idx=idx)
