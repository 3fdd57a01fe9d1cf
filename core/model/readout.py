"""A model's final norm as the where-from views read it: the module itself (the logit lens applies it) and the
numbers direct attribution freezes.

LayerNorm: y = gain * (x - mean(x)) / sqrt(var(x) + eps) + bias. RMSNorm (LLaMA, Qwen, Mistral): y = gain * x /
sqrt(mean(x^2) + eps), no centring and no bias; Gemma's gain is (1 + w). With the divisor frozen at its value
in one pass, y is linear in x, so the answer's logit splits over the pieces that add up to x.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn


class FinalNorm(nn.Module):
    """Wraps the model's own final norm module: calling it is calling the model's norm."""

    def __init__(self, module: nn.Module, weight: torch.Tensor | None, bias: torch.Tensor | None, eps: float,
                 centered: bool) -> None:
        super().__init__()
        self.module = module
        self.gain = weight  # the effective gain (Gemma: 1 + w); None: no gain
        self.shift = bias
        self.eps = eps
        self.centered = centered
        self.label = "LayerNorm" if centered else "RMSNorm"

    @property
    def weight(self) -> torch.Tensor | None:
        return self.gain

    @property
    def bias(self) -> torch.Tensor | None:
        return self.shift

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.module(x)


def is_centered(norm) -> bool:
    """LayerNorm (ours, nn.LayerNorm) subtracts the mean; a FinalNorm says whether it does."""
    return bool(getattr(norm, "centered", True))


def norm_divisor(norm, x: np.ndarray) -> np.ndarray:
    """(T,) the divisor the norm applies to each row of x (T, C): sqrt(var + eps), or RMSNorm's
    sqrt(mean(x^2) + eps)."""
    x = x.astype(np.float64)
    if is_centered(norm):
        return np.sqrt(x.var(axis=-1) + float(norm.eps))  # biased variance, as LayerNorm
    return np.sqrt((x * x).mean(axis=-1) + float(norm.eps))


def norm_label(norm) -> str:
    """What the pages call the final norm: "LayerNorm" (ours, GPT-2, GPT-NeoX, Phi, OPT) or "RMSNorm"."""
    return str(getattr(norm, "label", "LayerNorm"))
