"""One forward pass, recorded: what every analysis reads instead of running the model itself.

`trace(model, ids)` is to this lab what TransformerLens's `run_with_cache` is to its users: the attention
page, the positional page's sentence view, the probe's "where does it look" and the export command
all ask for a `Trace`, so the pass (device, inference mode, the model's own mask) is written once.
`trace(..., queries_keys=True)` also keeps each layer's queries and keys from that same pass (the
query-key view: why a weight is what it is).
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
class LayerQueryKey:
    """One layer's queries and keys as its scores used them: scores = q @ k^T * scale + bias, masked, softmax."""

    q: np.ndarray  # (n_head, T, hs) float32, after the positional scheme (RoPE: rotated)
    k: np.ndarray  # (n_head, T, hs) float32
    scale: float  # 1/sqrt(hs), or what a Hugging Face module scales by
    bias: np.ndarray | None  # (n_head, T, T) added after scaling (ALiBi), or None


def layer_queries_keys(records: list) -> list[LayerQueryKey | None]:
    """The model's QueryKey records (batch 0) as numpy; a bias equal to the previous layer's is shared."""
    out: list[LayerQueryKey | None] = []
    last_bias = None
    for record in records:
        if record is None:  # a layer without a query-key product (the synthesizer)
            out.append(None)
            continue
        bias = None if record.bias is None else record.bias.float().cpu().numpy()
        if bias is not None and last_bias is not None and np.array_equal(bias, last_bias):
            bias = last_bias  # ALiBi's bias is the same in every layer: kept (and cached) once
        last_bias = bias if bias is not None else last_bias
        out.append(LayerQueryKey(q=record.q[0].float().cpu().numpy(), k=record.k[0].float().cpu().numpy(),
                                 scale=float(record.scale), bias=bias))
    return out


@dataclass
class Trace(AttentionShape):
    ids: list[int]  # what the model read, (T,)
    tokens: list[str]  # one display label per id (core.text.visible_token)
    attention: np.ndarray  # (n_layer, n_head, T, T) float32: the model's own probabilities
    allowed: np.ndarray  # (T, T) bool: exactly the model's mask, True where a query may attend a key
    logits: torch.Tensor  # (1, T, V) for language models, (1, n_classes) for classifiers; model's device
    idx: torch.Tensor  # (1, T) the ids as a tensor on the model's device (for generation after the pass)
    queries_keys: list[LayerQueryKey | None] | None = None  # per layer, when asked for; None: not recorded


def model_device(model) -> torch.device:
    return next(model.parameters()).device


def trace(model, ids: Sequence[int], tokens: Sequence[str] | None = None, queries_keys: bool = False) -> Trace:
    """Run `model` once on `ids` with attention recorded. `tokens`: the raw token strings for the
    labels (default: one per id, unlabelled positions numbered). `queries_keys`: also keep every layer's
    queries and keys (recorded by the attention layers themselves in this pass)."""
    ids = [int(i) for i in ids]
    if tokens is not None and len(tokens) != len(ids):
        raise ValueError(f"{len(tokens)} token labels for {len(ids)} ids.")
    idx = torch.tensor([ids], dtype=torch.long, device=model_device(model))  # (1, T)
    try:
        with torch.inference_mode():
            records: list | None = [] if queries_keys else None
            logits, attention = (model.run_with_attention(idx) if records is None else  # (L, 1, H, T, T)
                                 model.run_with_attention(idx, queries_keys=records))
            allowed = model.attention_mask(idx)[0, 0]  # (T, T)
    except ValueError as exc:  # a length the model refuses: already one sentence
        raise TraceError(str(exc)) from None
    labels = [visible_token(t) for t in tokens] if tokens is not None else [str(i) for i in range(len(ids))]
    return Trace(ids=ids, tokens=labels, attention=attention[:, 0].float().cpu().numpy(),
                 allowed=allowed.cpu().numpy().astype(bool), logits=logits, idx=idx,
                 queries_keys=layer_queries_keys(records) if records is not None else None)
