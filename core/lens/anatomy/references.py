"""Reference models the course material uses, as real modules: the PyTorch tutorial model and the
named course presets (CS224N minGPT, its synthesizer variant, the tutorial's two heads), built on the
meta device so the big ones allocate nothing. Their formulas live with the others in `formulas`."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from core.model.config import PRESETS, ModelConfig
from core.model.meta_device import shapes_only
from core.model.transformer import Transformer


class TutorialPositionalEncoding(nn.Module):
    """The tutorial's sinusoidal table, kept as a buffer: saved with the model, never trained."""

    def __init__(self, d_model: int, dropout: float = 0.1, max_len: int = 5000) -> None:
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        position = torch.arange(max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        pe = torch.zeros(max_len, 1, d_model)
        pe[:, 0, 0::2] = torch.sin(position * div_term)
        pe[:, 0, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(x + self.pe[: x.size(0)])  # x: (T, B, C)


class TutorialTransformer(nn.Module):
    """"Language Modeling with nn.Transformer" (PyTorch tutorial): embedding, sinusoidal positions,
    post-norm ReLU `nn.TransformerEncoderLayer`s, a linear head (vocabulary, or n_out classes)."""

    def __init__(self, ntoken: int, d_model: int, nhead: int, d_hid: int, nlayers: int,
                 dropout: float = 0.5, n_out: int | None = None) -> None:
        super().__init__()
        self.d_model = d_model
        self.embedding = nn.Embedding(ntoken, d_model)
        self.pos_encoder = TutorialPositionalEncoding(d_model, dropout)
        layer = nn.TransformerEncoderLayer(d_model, nhead, d_hid, dropout)  # post-norm, ReLU
        self.transformer_encoder = nn.TransformerEncoder(layer, nlayers, enable_nested_tensor=False)
        self.linear = nn.Linear(d_model, n_out or ntoken)

    def forward(self, src: torch.Tensor, src_mask: torch.Tensor | None = None) -> torch.Tensor:
        x = self.pos_encoder(self.embedding(src) * math.sqrt(self.d_model))  # (T, B, C)
        return self.linear(self.transformer_encoder(x, src_mask))


# --- course presets, built as real modules -------------------------------------------------------

@dataclass(frozen=True)
class CoursePreset:
    label: str
    source: str  # one sentence: where the course uses it
    build: Callable[[], nn.Module]
    stated_parameters: int | None = None  # the count the course material states, if it states one


COURSE_PRESETS: dict[str, CoursePreset] = {
    "cs224n-mingpt": CoursePreset(
        "CS224N minGPT (a5)",
        "The assignment's minGPT: vocabulary 256, block 128, 4 layers, 8 heads, 256 dimensions.",
        lambda: Transformer(ModelConfig(**PRESETS["cs224n-mingpt"])), 3_323_392),
    "cs224n-synthesizer": CoursePreset(
        "CS224N minGPT with synthesizer attention (a5)",
        "The same minGPT with the assignment's dense synthesizer in place of self-attention.",
        lambda: Transformer(ModelConfig(**PRESETS["cs224n-synthesizer"]))),
    "pytorch-tutorial-lm": CoursePreset(
        "PyTorch tutorial model, language-model head",
        "'Language Modeling with nn.Transformer' with vocabulary 50,001, 200 dimensions, 2 heads, "
        "feed-forward 200, 4 layers.",
        lambda: TutorialTransformer(50_001, 200, 2, 200, 4), 21_018_401),
    "pytorch-tutorial-2class": CoursePreset(
        "PyTorch tutorial model, 2-class head",
        "The same encoder with a 2-class linear head instead of the vocabulary-sized one.",
        lambda: TutorialTransformer(50_001, 200, 2, 200, 4, n_out=2), 10_968_602),
}


def build_preset(name: str) -> nn.Module:
    """Build on the meta device: shapes and counts are exact, no memory is allocated."""
    with shapes_only():
        return COURSE_PRESETS[name].build()
