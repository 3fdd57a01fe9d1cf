"""Positional schemes, one registry.

A scheme acts at one of two hook points, both called from `core.model.transformer`:
- `embed(x, start)`: additive schemes (learned, sinusoidal) add a vector to each token embedding;
- `transform_qk(q, k, q_start, k_start)` and `score_bias(...)`: relative schemes act on queries/keys
  (RoPE, Su et al. 2021) or on the attention scores (ALiBi, Press et al. 2022).
Every method has a no-op default, so a new scheme is one class and one registry line.

`max_positions` is the longest sequence a scheme can encode: a learned table cannot be indexed past
its rows, and we refuse rather than silently clamp positions.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from core.model.config import ModelConfig, register_choices


class PositionalScheme(nn.Module):
    max_positions: int | None = None  # None: any length
    # How the dashboard shows the scheme, everywhere (one colour per scheme on every chart and page):
    label: str = "?"
    color: str = "#7F7F7F"
    order: int = 99  # display order: the encodings in the order a lecture introduces them

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config

    def embed(self, x: torch.Tensor, start: int = 0) -> torch.Tensor:
        return x  # (B, T, C)

    def transform_qk(self, q: torch.Tensor, k: torch.Tensor, q_start: int, k_start: int
                     ) -> tuple[torch.Tensor, torch.Tensor]:
        return q, k  # (B, nh, Tq, hs), (B, nh, Tk, hs)

    def score_bias(self, t_query: int, t_key: int, q_start: int, device: torch.device
                   ) -> torch.Tensor | None:
        return None  # or (nh, Tq, Tk), added to the scaled scores


class NoPositions(PositionalScheme):
    """No position information at all (a causal mask alone still leaks some; see Haviv et al.)."""
    label, color, order = "no positions", "#7F7F7F", 4


class LearnedPositions(PositionalScheme):
    label, color, order = "learned", "#EF553B", 1

    def __init__(self, config: ModelConfig) -> None:
        super().__init__(config)
        self.table = nn.Parameter(torch.zeros(config.block_size, config.n_embd))
        self.max_positions = config.block_size

    def embed(self, x: torch.Tensor, start: int = 0) -> torch.Tensor:
        end = start + x.size(1)
        if end > self.table.size(0):
            raise ValueError(f"A learned position table has {self.table.size(0)} rows; "
                             f"position {end - 1} does not exist.")
        return x + self.table[start:end]


def sinusoidal_table(length: int, dim: int, base: float = 10000.0) -> torch.Tensor:
    """Vaswani et al. (2017), section 3.5: PE(pos, 2i) = sin(pos / base^(2i/d)), PE(pos, 2i+1) = cos(...)."""
    position = torch.arange(length, dtype=torch.float64).unsqueeze(1)  # (L, 1)
    inv_freq = base ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)  # (ceil(d/2),)
    angles = position * inv_freq  # (L, ceil(d/2))
    table = torch.zeros(length, dim, dtype=torch.float64)
    table[:, 0::2] = torch.sin(angles)
    table[:, 1::2] = torch.cos(angles[:, : dim // 2])
    return table.float()


class SinusoidalPositions(PositionalScheme):
    """Vaswani et al. add the fixed table to embeddings multiplied by sqrt(d_model) (section 3.4);
    without that factor the +-1 table swamps 0.02-scale embeddings (measured: 2.28 vs 1.25 nats/char
    against learned positions on the bundled LM recipe)."""

    label, color, order = "sinusoidal", "#636EFA", 0

    def embed(self, x: torch.Tensor, start: int = 0) -> torch.Tensor:
        table = sinusoidal_table(start + x.size(1), x.size(2), self.config.rope_base)
        return x * math.sqrt(x.size(2)) + table[start:].to(x.device, x.dtype)


def alibi_slopes(n_head: int) -> list[float]:
    """Head slopes as the official ALiBi code computes them (Press et al. 2022).

    For a power of two n: the geometric sequence starting at 2^(-8/n) with that same ratio.
    Otherwise: the slopes of the closest smaller power of two, then every other slope of the
    next power of two, so 6 heads get 2^-2, 2^-4, 2^-6, 2^-8, 2^-1, 2^-3.
    """
    def power_of_two(n: int) -> list[float]:
        start = 2 ** (-(2 ** -(math.log2(n) - 3)))
        return [start * start**i for i in range(n)]

    if math.log2(n_head).is_integer():
        return power_of_two(n_head)
    closest = 2 ** math.floor(math.log2(n_head))
    return power_of_two(closest) + alibi_slopes(2 * closest)[0::2][: n_head - closest]


def alibi_bias(n_head: int, t_query: int, t_key: int, q_start: int = 0, causal: bool = True
               ) -> torch.Tensor:
    """-slope * distance, shape (nh, Tq, Tk); not scaled by 1/sqrt(d) (Press et al.).

    Causal models only ever see keys j <= i, so -slope*(i-j) there; encoders use |i-j|.
    """
    slopes = torch.tensor(alibi_slopes(n_head)).view(n_head, 1, 1)
    query_pos = torch.arange(q_start, q_start + t_query).view(t_query, 1)
    key_pos = torch.arange(t_key).view(1, t_key)
    distance = (query_pos - key_pos).float()
    distance = distance.clamp(min=0) if causal else distance.abs()
    return -slopes * distance  # (nh, Tq, Tk)


class ALiBi(PositionalScheme):
    label, color, order = "ALiBi", "#00CC96", 2

    def score_bias(self, t_query: int, t_key: int, q_start: int, device: torch.device
                   ) -> torch.Tensor:
        bias = alibi_bias(self.config.n_head, t_query, t_key, q_start, self.config.causal)
        return bias.to(device)


def rope_angles(positions: torch.Tensor, head_size: int, base: float = 10000.0) -> torch.Tensor:
    """theta_{p,i} = p * base^(-2i/d) for i < d/2 (Su et al. 2021, eq. 15). Shape (T, d/2)."""
    inv_freq = base ** (-torch.arange(0, head_size, 2, dtype=torch.float64) / head_size)
    return positions.double().unsqueeze(1) * inv_freq


def rope_rotate(x: torch.Tensor, angles: torch.Tensor) -> torch.Tensor:
    """Rotate each pair (x_{2i}, x_{2i+1}) by its angle. x: (..., T, hs), angles: (T, hs/2)."""
    cos = angles.cos().to(x.dtype)
    sin = angles.sin().to(x.dtype)
    even, odd = x[..., 0::2], x[..., 1::2]
    rotated = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1)
    return rotated.flatten(-2)


class RoPE(PositionalScheme):
    label, color, order = "RoPE", "#AB63FA", 3

    def transform_qk(self, q: torch.Tensor, k: torch.Tensor, q_start: int, k_start: int
                     ) -> tuple[torch.Tensor, torch.Tensor]:
        hs = q.size(-1)
        q_angles = rope_angles(torch.arange(q_start, q_start + q.size(-2)), hs, self.config.rope_base)
        k_angles = rope_angles(torch.arange(k_start, k_start + k.size(-2)), hs, self.config.rope_base)
        return rope_rotate(q, q_angles.to(q.device)), rope_rotate(k, k_angles.to(k.device))


POSITIONAL: dict[str, type[PositionalScheme]] = {
    "learned": LearnedPositions,
    "sinusoidal": SinusoidalPositions,
    "alibi": ALiBi,
    "rope": RoPE,
    "none": NoPositions,
}
register_choices("positional", POSITIONAL)


def scheme_label(name: str) -> str:
    return POSITIONAL[name].label if name in POSITIONAL else name


def scheme_color(name: str, fallback: str = "#7F7F7F") -> str:
    return POSITIONAL[name].color if name in POSITIONAL else fallback


def scheme_order(name: str) -> int:
    return POSITIONAL[name].order if name in POSITIONAL else 99
