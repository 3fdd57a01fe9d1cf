"""Attention variants, one registry.

Every variant maps hidden states (B, T, C) to (B, T, C) and, when asked, returns its attention
probabilities (B, nh, Tq, Tk) computed by an explicit softmax, so what the dashboard shows is what
the model computed. Without that request, vanilla attention takes the fused
`scaled_dot_product_attention` path, which never materialises the weights.

Every layer of one forward call shares a `Step` (the positional scheme, the mask, where the queries
start, whether probabilities are wanted); `allowed` is a boolean mask broadcastable to
(B, nh, Tq, Tk), True where a query may attend a key; masked probabilities are exactly 0.

When a Step carries a `queries_keys` list, every layer appends a `QueryKey` to it: the queries and keys
its scores are made of (after the positional scheme), the scale and the score bias, recorded in the
same pass (the query-key view reads them; there is no second implementation of attention). A layer
without a query-key product (the synthesizer) appends None.

When a Step carries `hooks` (core.model.hooks), every layer reports its heads' value-weighted sums and its
output projection through `hooks.heads(layer, z, proj)` (each head's share of the residual: the where-from
views' direct attribution).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from core.model.config import ModelConfig, register_choices
from core.model.hooks import Hooks
from core.model.positional import PositionalScheme


@dataclass
class KVCache:
    """What one layer keeps between generation steps; keys are stored already rotated."""

    k: torch.Tensor | None = None  # (B, nh, T_past, hs)
    v: torch.Tensor | None = None  # (B, nh, T_past, hs)

    @property
    def length(self) -> int:
        return 0 if self.v is None else self.v.size(2)

    def expand(self, batch: int) -> KVCache:
        """This one-row cache as `batch` rows that share it (a view, no copy): a prompt read once, continued by many."""
        return KVCache(*(None if t is None else t.expand(batch, -1, -1, -1) for t in (self.k, self.v)))

    def rows(self, index: torch.Tensor, length: int) -> KVCache:
        """The given rows' first `length` positions (a copy)."""
        return KVCache(*(None if t is None else t[index, :, :length] for t in (self.k, self.v)))

    def extend(self, k: torch.Tensor | None, v: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor]:
        if k is not None:
            self.k = k if self.k is None else torch.cat((self.k, k), dim=2)
        self.v = v if self.v is None else torch.cat((self.v, v), dim=2)
        return self.k, self.v


@dataclass
class QueryKey:
    """What one layer's scores are made of: scores = (q @ k^T) * scale, soft-capped to softcap * tanh(s / softcap)
    where there is a cap, + bias, then the mask, then softmax."""

    q: torch.Tensor  # (B, nh, Tq, hs): after the positional scheme (RoPE: rotated)
    k: torch.Tensor  # (B, nh, Tk, hs): likewise
    scale: float  # 1 / sqrt(hs) here; Hugging Face modules record their own `scaling`
    bias: torch.Tensor | None  # (nh, Tq, Tk) added after scaling (ALiBi), or None
    softcap: float | None = None  # Gemma 2's attn_logit_softcapping; None: scores are not capped


@dataclass
class Step:
    """What every layer of one forward call shares (nanoGPT's blocks take x alone; ours also need this)."""

    positional: PositionalScheme
    allowed: torch.Tensor  # (B|1, 1, Tq, Tk) bool: True where a query may attend a key
    start: int = 0  # position of the first query: > 0 only when generating with a cache
    need_weights: bool = False  # return probabilities (explicit softmax) instead of the fused path
    queries_keys: list[QueryKey | None] | None = None  # when a list: each layer appends what its scores use
    hooks: Hooks | None = None  # hook points to read or patch activations (core.model.hooks); None: none

    @property
    def plain_causal(self) -> bool:
        """The mask is exactly lower-triangular from position 0, so the fused kernel may build it."""
        return self.positional.config.causal and self.start == 0


def masked_softmax(scores: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    """Softmax over keys with disallowed entries exactly 0 (and an all-masked row all 0, not NaN)."""
    scores = scores.masked_fill(~allowed, float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    return torch.nan_to_num(probs, nan=0.0)


class Attention(nn.Module):
    """Interface: a variant sets `max_positions` if it cannot run past some length."""

    max_positions: int | None = None
    layer: int = 0  # this layer's index, set by its Block: what it reports to hook points

    @classmethod
    def incompatibility(cls, config: ModelConfig) -> str | None:
        return None

    def forward(self, x: torch.Tensor, step: Step, cache: KVCache | None = None
                ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """x (B, T, C) -> (y (B, T, C), probabilities (B, nh, T, Tk) if step.need_weights else None)."""
        raise NotImplementedError

    def _split_heads(self, x: torch.Tensor, n_head: int) -> torch.Tensor:
        B, T, C = x.shape
        return x.view(B, T, n_head, C // n_head).transpose(1, 2)  # (B, nh, T, hs)


class VanillaAttention(Attention):
    """Scaled dot-product attention (Vaswani et al. 2017); minGPT's parameter names."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.n_head = config.n_head
        self.key = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.query = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.value = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.attn_drop = nn.Dropout(config.dropout)
        self.resid_drop = nn.Dropout(config.dropout)
        self.dropout = config.dropout

    def forward(self, x, step, cache=None):
        B, T, C = x.shape
        positional, allowed, start = step.positional, step.allowed, step.start
        q = self._split_heads(self.query(x), self.n_head)  # (B, nh, T, hs)
        k = self._split_heads(self.key(x), self.n_head)
        v = self._split_heads(self.value(x), self.n_head)
        q, k = positional.transform_qk(q, k, start, start)
        if cache is not None:
            k, v = cache.extend(k, v)  # (B, nh, start+T, hs)
        bias = positional.score_bias(T, k.size(2), start, x.device)  # (nh, T, Tk) or None
        if step.queries_keys is not None:
            step.queries_keys.append(QueryKey(q, k, 1.0 / math.sqrt(q.size(-1)), bias))

        weights = None
        if step.need_weights:
            scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.size(-1))  # (B, nh, T, Tk)
            if bias is not None:
                scores = scores + bias
            weights = masked_softmax(scores, allowed)
            y = self.attn_drop(weights) @ v  # (B, nh, T, hs)
        else:
            dropout = self.dropout if self.training else 0.0
            if bias is None and step.plain_causal:
                y = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout, is_causal=True)
            else:
                mask = allowed if bias is None else bias.masked_fill(~allowed, float("-inf"))
                y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout)
        if step.hooks is not None:
            step.hooks.heads(self.layer, y, self.proj)  # y (B, nh, T, hs): each head's sum before the projection
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # (B, T, C)
        return self.resid_drop(self.proj(y)), weights


class SynthesizerAttention(Attention):
    """The CS224N dense synthesizer: softmax(ReLU(X A_i + b1) B_i + b2) (X V_i).

    Scores come from each query alone and a learned column per key *position* (w2), so there is
    no query-key product to fuse: this variant always takes the explicit softmax path. Its w2 has
    block_size - 1 columns, as in the assignment, which bounds the length it can run.
    """

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.n_head = config.n_head
        self.w1 = nn.Linear(config.n_embd, config.n_embd)
        self.w2 = nn.Parameter(torch.zeros(config.n_embd // config.n_head, config.block_size - 1))
        self.b2 = nn.Parameter(torch.zeros(config.block_size - 1))
        self.value = nn.Linear(config.n_embd, config.n_embd)
        self.proj = nn.Linear(config.n_embd, config.n_embd)
        self.attn_drop = nn.Dropout(config.dropout)
        self.resid_drop = nn.Dropout(config.dropout)
        self.max_positions = config.block_size - 1
        nn.init.uniform_(self.w2, -0.001, 0.001)

    @classmethod
    def incompatibility(cls, config: ModelConfig) -> str | None:
        if config.positional == "rope":
            return ("The synthesizer has no query-key product for RoPE to rotate; "
                    "choose another positional scheme.")
        if config.block_size < 2:
            return "The synthesizer needs block_size >= 2."
        if not config.bias:
            return "The synthesizer is built with biases; bias=False is for vanilla attention."
        return None

    def forward(self, x, step, cache=None):
        B, T, C = x.shape
        positional, allowed, start = step.positional, step.allowed, step.start
        t_key = start + T
        if t_key > self.w2.size(1):
            raise ValueError(f"The synthesizer has key columns for {self.w2.size(1)} positions; "
                             f"{t_key} were asked for.")
        d = F.relu(self._split_heads(self.w1(x), self.n_head))  # (B, nh, T, hs)
        v = self._split_heads(self.value(x), self.n_head)  # (B, nh, T, hs)
        if cache is not None:
            _, v = cache.extend(None, v)  # (B, nh, Tk, hs)
        scores = d @ self.w2[:, :t_key] + self.b2[:t_key]  # (B, nh, T, Tk)
        if step.queries_keys is not None:
            step.queries_keys.append(None)  # no query-key product to record
        bias = positional.score_bias(T, t_key, start, x.device)
        if bias is not None:
            scores = scores + bias
        weights = masked_softmax(scores, allowed)
        y = self.attn_drop(weights) @ v  # (B, nh, T, hs)
        if step.hooks is not None:
            step.hooks.heads(self.layer, y, self.proj)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_drop(self.proj(y)), (weights if step.need_weights else None)


ATTENTION: dict[str, type[Attention]] = {
    "vanilla": VanillaAttention,
    "synthesizer": SynthesizerAttention,
}
register_choices("attention", ATTENTION)
