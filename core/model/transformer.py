"""The Transformer: embeddings, pre-norm blocks, a head; forward and cached generation.

One readable file in the spirit of minGPT / nanoGPT. Variants come from registries:
`core.model.positional.POSITIONAL`, `core.model.attention.ATTENTION`, `HEADS` and `INITS` below. Parameter names
follow minGPT (tok_emb, blocks.{i}.attn.key, ..., ln_f, head) so course checkpoints map
onto this model one name at a time.

`forward(idx, targets) -> (logits, loss)` is the training path (fused attention kernels).
`run_with_attention(idx) -> (logits, attention)` is kept apart, as TransformerLens keeps
`run_with_cache` apart from `forward`: it returns every layer's attention probabilities in one
tensor, shape (n_layer, B, n_head, T, T), computed by an explicit softmax. A test checks both give
the same logits. Analyses never call it directly: they ask `core.lens.trace.trace` for a `Trace`.

"head" means the attention heads (n_head) everywhere except `Transformer.head`, the output module
(minGPT's name); its weights are `unembed` (LM) or `classifier` (classification).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from core.model.attention import ATTENTION, KVCache, QueryKey, Step
from core.model.config import ModelConfig, register_choices
from core.model.hooks import Hooks
from core.model.positional import POSITIONAL, LearnedPositions


class Block(nn.Module):
    def __init__(self, config: ModelConfig, layer: int = 0) -> None:
        super().__init__()
        self.layer = layer  # what this block reports to hook points (core.model.hooks)
        self.ln1 = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.attn = ATTENTION[config.attention](config)
        self.attn.layer = layer
        self.ln2 = nn.LayerNorm(config.n_embd, bias=config.bias) if config.mlp else None
        self.mlp = nn.Sequential(
            nn.Linear(config.n_embd, config.feed_forward_width, bias=config.bias),
            nn.GELU(),  # exact (erf) GELU, as minGPT's course code and nanoGPT use
            nn.Linear(config.feed_forward_width, config.n_embd, bias=config.bias),
            nn.Dropout(config.dropout),
        ) if config.mlp else None  # attention-only: the block adds nothing after its attention

    def _feed_forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.mlp(self.ln2(x)) if self.mlp is not None else torch.zeros_like(x)

    def forward(self, x: torch.Tensor, step: Step, cache: KVCache | None = None):
        hooks = step.hooks
        if hooks is None:
            attended, weights = self.attn(self.ln1(x), step, cache)  # (B, T, C), (B, nh, T, Tk) | None
            x = x + attended
            if self.mlp is not None:
                x = x + self.mlp(self.ln2(x))
            return x, weights
        x = hooks.resid_pre(self.layer, x)  # the same sums, through the hook points (core.model.hooks)
        attended, weights = self.attn(self.ln1(x), step, cache)
        x = x + hooks.attn_out(self.layer, attended)
        x = x + hooks.mlp_out(self.layer, self._feed_forward(x))  # attention-only: a zero the views can read
        return hooks.resid_post(self.layer, x), weights


class LMHead(nn.Module):
    """Next-token logits at every position; the loss ignores PAD targets (CS224N convention)."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.unembed = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.pad_id = config.pad_id

    def forward(self, h, idx, targets):
        logits = self.unembed(h)  # (B, T, V)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1),
                                   ignore_index=self.pad_id)
        return logits, loss


def _pool_mean(h: torch.Tensor, real: torch.Tensor) -> torch.Tensor:
    weights = real.unsqueeze(-1).to(h.dtype)  # (B, T, 1)
    return (h * weights).sum(1) / weights.sum(1)  # (B, C)


def _pool_last(h: torch.Tensor, real: torch.Tensor) -> torch.Tensor:
    last = real.long().cumsum(1).argmax(dim=1)  # index of the last real token
    return h[torch.arange(h.size(0)), last]  # (B, C)


def _pool_first(h: torch.Tensor, real: torch.Tensor) -> torch.Tensor:
    return h[:, 0]  # (B, C)


# How a classifier turns (B, T, C) hidden states into one vector per sentence; `real` (B, T) marks non-PAD.
POOLINGS = {"mean": _pool_mean, "last": _pool_last, "first": _pool_first}


class ClassifierHead(nn.Module):
    """Pool the final hidden states (mean over non-PAD tokens, last non-PAD, or first), then an MLP."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.pooling = config.pooling
        self.pad_id = config.pad_id
        self.classifier = nn.Sequential(
            nn.Linear(config.n_embd, config.n_embd), nn.ReLU(), nn.Linear(config.n_embd, config.n_classes)
        )

    def pool(self, h: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        real = (idx != self.pad_id)  # (B, T)
        real = torch.where(real.any(dim=1, keepdim=True), real, torch.ones_like(real))  # all-PAD: use all
        return POOLINGS[self.pooling](h, real)  # (B, C)

    def forward(self, h, idx, targets):
        logits = self.classifier(self.pool(h, idx))  # (B, n_classes)
        loss = F.cross_entropy(logits, targets) if targets is not None else None
        return logits, loss


HEADS: dict[str, type[nn.Module]] = {"lm": LMHead, "classifier": ClassifierHead}
register_choices("head", HEADS)
register_choices("pooling", POOLINGS)


def _gpt2_init(module: nn.Module) -> None:
    """GPT-2 / minGPT: every Linear and Embedding weight N(0, 0.02), biases 0, LayerNorms 1 and 0
    (a learned position table stays at its zeros, as minGPT's does)."""
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)
    elif isinstance(module, nn.LayerNorm):
        nn.init.ones_(module.weight)
        if module.bias is not None:
            nn.init.zeros_(module.bias)


def _pytorch_init(module: nn.Module) -> None:
    """What a model built of torch.nn modules with no initialisation code of its own starts from, as
    CSE 256 PA2's does: the modules keep PyTorch's defaults (Linear kaiming-uniform weights and uniform
    biases, Embedding N(0, 1)), and the learned position table is N(0, 1), as an nn.Embedding's would be.
    Embeddings of norm ~sqrt(n_embd) move slowly at lr 1e-3, which is why the course's model fits its
    training text less in 500 steps (train perplexity ~170 against ~80 from GPT-2's init)."""
    if isinstance(module, LearnedPositions):
        nn.init.normal_(module.table, mean=0.0, std=1.0)


# How a new model's weights start (a loaded model's are overwritten, so this matters for training only).
INITS = {"gpt2": _gpt2_init, "pytorch": _pytorch_init}
register_choices("init", INITS)


class Transformer(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        self.tok_emb = nn.Embedding(config.vocab_size, config.n_embd)
        self.pos = POSITIONAL[config.positional](config)
        self.drop = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList([Block(config, i) for i in range(config.n_layer)])
        self.ln_f = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.head = HEADS[config.head](config)
        self.apply(INITS[config.init])

    @property
    def max_length(self) -> int | None:
        """Longest input this model can encode at all (None: no hard limit)."""
        limits = [self.pos.max_positions, self.blocks[0].attn.max_positions if self.blocks else None]
        limits = [n for n in limits if n is not None]
        return min(limits) if limits else None

    def num_parameters(self, trainable_only: bool = False) -> int:
        return sum(p.numel() for p in self.parameters() if p.requires_grad or not trainable_only)

    def attention_mask(self, idx: torch.Tensor, start: int = 0, t_key: int | None = None) -> torch.Tensor:
        """Boolean (B|1, 1, Tq, Tk), True where a query may attend a key: causal for decoders,
        key padding for encoders. Public so pages can draw exactly the mask the model uses."""
        t_key = start + idx.size(1) if t_key is None else t_key
        T = idx.size(1)
        if self.config.causal:
            query_pos = torch.arange(start, start + T, device=idx.device).view(T, 1)
            key_pos = torch.arange(t_key, device=idx.device).view(1, t_key)
            return (key_pos <= query_pos).view(1, 1, T, t_key)
        real = idx != self.config.pad_id  # (B, T)
        real = torch.where(real.any(dim=1, keepdim=True), real, torch.ones_like(real))
        return real.view(idx.size(0), 1, 1, T).expand(-1, 1, T, T)

    def _check_length(self, end: int) -> None:
        limit = self.max_length
        if limit is not None and end > limit:
            raise ValueError(f"This model can read at most {limit} tokens "
                             f"({self.config.positional} positions, {self.config.attention} attention); "
                             f"got {end}.")

    def hidden_states(self, idx: torch.Tensor, start: int = 0, caches: list[KVCache] | None = None,
                      need_weights: bool = False, queries_keys: list[QueryKey | None] | None = None,
                      hooks: Hooks | None = None) -> tuple[torch.Tensor, list[torch.Tensor]]:
        B, T = idx.shape
        self._check_length(start + T)
        embedded = self.tok_emb(idx) if hooks is None else hooks.embed(self.tok_emb(idx))
        x = self.drop(self.pos.embed(embedded, start))  # (B, T, C)
        step = Step(self.pos, self.attention_mask(idx, start, start + T), start, need_weights, queries_keys, hooks)
        weights = []
        for i, block in enumerate(self.blocks):
            x, w = block(x, step, caches[i] if caches else None)
            if need_weights:
                weights.append(w)
        return self.ln_f(x if hooks is None else hooks.final(x)), weights

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None):
        """idx (B, T) token ids -> (logits (B, T, V) or (B, n_classes), loss or None)."""
        h, _ = self.hidden_states(idx)
        return self.head(h, idx, targets)

    def run_with_attention(self, idx: torch.Tensor, queries_keys: list[QueryKey | None] | None = None,
                           hooks: Hooks | None = None, logits: bool = True) -> tuple[torch.Tensor | None, torch.Tensor]:
        """idx (B, T) -> (logits, attention (n_layer, B, n_head, T, T)); rows sum to 1, masked entries 0.
        With a `queries_keys` list, each layer appends what its scores were made of (QueryKey or None);
        with `hooks`, every hook point of core.model.hooks is called in the same pass. `logits=False`: the
        attention only, the output head skipped (logits None)."""
        h, weights = self.hidden_states(idx, need_weights=True, queries_keys=queries_keys, hooks=hooks)
        out = self.head(h, idx, None)[0] if logits else None
        return out, torch.stack(weights)

    def readout(self) -> tuple[nn.LayerNorm, torch.Tensor]:
        """(final LayerNorm, unembedding (V, C)): how a residual stream becomes next-token logits
        (the logit lens and direct attribution read a stream through exactly these)."""
        if self.config.head != "lm":
            raise ValueError("Only language models read their residual stream out as next-token logits.")
        return self.ln_f, self.head.unembed.weight

    @torch.no_grad()
    def generate(self, idx: torch.Tensor, max_new_tokens: int, do_sample: bool = False,
                 temperature: float = 1.0, top_k: int | None = None,
                 generator: torch.Generator | None = None, use_cache: bool = True,
                 stop_id: int | None = None) -> torch.Tensor:
        """Extend a batch of equal-length prompts (B, T) by max_new_tokens -> (B, T + new).

        With the cache each step costs one token's work. When the sequence reaches the model's
        context (block_size), it continues as minGPT does, on the last block_size tokens, uncached.
        With `stop_id`, generation ends early once every row has produced that token (the rows'
        text up to it is exactly what the full run would give; the output is then shorter).
        """
        if not self.config.causal or self.config.head != "lm":
            raise ValueError("Only causal language models can generate text.")
        context = self.config.block_size if self.max_length is None else self.max_length
        caches = [KVCache() for _ in self.blocks] if use_cache else None
        fed = 0  # tokens of idx already in the cache
        stopped = None
        for _ in range(max_new_tokens):
            if caches is not None and idx.size(1) <= context:
                h, _ = self.hidden_states(idx[:, fed:], start=fed, caches=caches)
                fed = idx.size(1)
            else:
                h, _ = self.hidden_states(idx[:, -context:])
            logits = self.head.unembed(h[:, -1]) / max(temperature, 1e-8)  # (B, V)
            if do_sample:
                if top_k is not None:
                    kth = torch.topk(logits, min(top_k, logits.size(-1))).values[:, [-1]]
                    logits = logits.masked_fill(logits < kth, float("-inf"))
                next_id = torch.multinomial(F.softmax(logits, dim=-1), 1, generator=generator)
            else:
                next_id = logits.argmax(dim=-1, keepdim=True)
            idx = torch.cat((idx, next_id), dim=1)
            if stop_id is not None:
                stopped = next_id[:, 0] == stop_id if stopped is None else stopped | (next_id[:, 0] == stop_id)
                if bool(stopped.all()):
                    break
        return idx
