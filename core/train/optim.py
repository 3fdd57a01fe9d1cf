"""Which parameters are weight-decayed, and the learning-rate schedule: the two halves of a training
recipe that its numbers depend on, kept apart from the loop so a recipe names them and a test can
compare them with the course's own description.

Every parameter falls in one category: `bias` (a module's `bias`), `norm` (a LayerNorm gain),
`embedding` (token embedding, learned position table) or `matrix` (everything else, including the
synthesizer's `w2`/`b2`). A decay policy is the set of categories it exempts:

- `cs224n` exempts biases only. The assignment's trainer exempts parameters whose *name* contains
  "bias" or "LayerNorm.weight"; its LayerNorms are called ln1/ln2/ln_f, so its token embedding,
  position embedding and LayerNorm gains are all decayed. Its numbers (loss ~0.5, ~20% dev accuracy)
  depend on that (checkpoints/README.md has the ablation).
- `mingpt` exempts biases, LayerNorm gains and embeddings: the convention of later minGPT/nanoGPT.
- `all` exempts nothing: `torch.optim.AdamW(model.parameters())`, as CSE 256 PA2 builds its optimizer.

Schedules, in tokens (every target position counts, PAD included, as in the assignment):
- `cosine`: linear warmup, then 0.5*(1+cos(pi*progress)) floored at 0.1 and NOT clamped at
  progress 1, so the rate rises again after final_tokens (the assignment's code does exactly this);
- `cosine-clamped`: the same, but held at the floor once progress reaches 1;
- `constant`: the base rate throughout.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import torch
from torch import nn

from core.model.positional import PositionalScheme

CATEGORIES = ("matrix", "embedding", "norm", "bias")


@dataclass(frozen=True)
class DecayPolicy:
    name: str
    exempt: frozenset[str]
    description: str


DECAY_POLICIES: dict[str, DecayPolicy] = {p.name: p for p in (
    DecayPolicy("cs224n", frozenset({"bias"}),
                "every parameter but biases (the assignment: embeddings and LayerNorm gains decayed)"),
    DecayPolicy("mingpt", frozenset({"bias", "norm", "embedding"}),
                "weight matrices only (biases, LayerNorm gains and embeddings exempt)"),
    DecayPolicy("all", frozenset(),
                "every parameter, biases included (torch.optim.AdamW(model.parameters()): CSE 256 PA2)"),
    DecayPolicy("no-embedding", frozenset({"bias", "embedding"}),
                "ablation: as cs224n, but embeddings exempt"),
    DecayPolicy("no-norm", frozenset({"bias", "norm"}),
                "ablation: as cs224n, but LayerNorm gains exempt"),
)}

SCHEDULES = ("cosine", "cosine-clamped", "constant")


def categorised_parameters(model: nn.Module) -> Iterator[tuple[str, str, nn.Parameter]]:
    """(name, category, parameter) for every trainable parameter, each once."""
    seen: set[int] = set()
    for module_name, module in model.named_modules():
        for leaf, param in module.named_parameters(recurse=False):
            if id(param) in seen or not param.requires_grad:
                continue
            seen.add(id(param))
            if leaf == "bias":
                category = "bias"
            elif isinstance(module, nn.LayerNorm):
                category = "norm"
            elif isinstance(module, (nn.Embedding, PositionalScheme)):
                category = "embedding"
            else:
                category = "matrix"
            yield (f"{module_name}.{leaf}" if module_name else leaf), category, param


def parameter_groups(model: nn.Module, policy: str, weight_decay: float) -> list[dict]:
    """AdamW parameter groups: decayed first, then exempt (empty groups dropped)."""
    if policy not in DECAY_POLICIES:
        raise ValueError(f"Unknown decay policy {policy!r}; choose from {', '.join(DECAY_POLICIES)}.")
    exempt = DECAY_POLICIES[policy].exempt
    decay, rest = [], []
    for _, category, param in categorised_parameters(model):
        (rest if category in exempt else decay).append(param)
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": rest, "weight_decay": 0.0}]
    return [g for g in groups if g["params"]]


def make_adamw(model: nn.Module, policy: str, learning_rate: float, weight_decay: float,
               betas: tuple[float, float]) -> torch.optim.AdamW:
    groups = parameter_groups(model, policy, weight_decay)
    on_cuda = any(p.is_cuda for g in groups for p in g["params"])
    # fused AdamW is one kernel per step on CUDA (the numbers match the default to rounding)
    return torch.optim.AdamW(groups, lr=learning_rate, betas=tuple(betas), fused=on_cuda or None)


def lr_multiplier(schedule: str, tokens: int, warmup_tokens: int, final_tokens: int) -> float:
    """The factor on the base rate after `tokens` target positions have been trained on."""
    if schedule == "constant":
        return 1.0
    if schedule not in SCHEDULES:
        raise ValueError(f"Unknown schedule {schedule!r}; choose from {', '.join(SCHEDULES)}.")
    if tokens < warmup_tokens:
        return tokens / max(1, warmup_tokens)
    progress = (tokens - warmup_tokens) / max(1, final_tokens - warmup_tokens)
    if schedule == "cosine-clamped":
        progress = min(1.0, progress)
    return max(0.1, 0.5 * (1.0 + math.cos(math.pi * progress)))
