"""The one place model options live.

A `ModelConfig` is saved verbatim (as JSON) in every checkpoint, so a model can be rebuilt
from its file alone. Variant names are validated against the registries, so a typo fails at
construction time with the list of valid choices, not deep inside a forward pass.

This module imports nothing of the model: each registry (attention kinds, positional schemes,
output heads, poolings) registers itself here with `register_choices` when its module is imported,
and `core/model/__init__.py` imports them all, so a config is always checked against every registry.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any


class ConfigError(ValueError):
    """A configuration that cannot describe a model; the message is one sentence for the user."""


@dataclass
class ModelConfig:
    vocab_size: int
    block_size: int  # longest sequence the model was trained on (and learned tables can hold)
    n_layer: int = 4
    n_head: int = 8
    n_embd: int = 256
    ffn_width: int = 0  # hidden units of each block's feed-forward; 0: 4 * n_embd (GPT-2); CSE 256 PA2: 100
    dropout: float = 0.1
    causal: bool = True  # True: decoder (lower-triangular mask); False: encoder (padding mask)
    positional: str = "learned"  # key of core.model.positional.POSITIONAL
    attention: str = "vanilla"  # key of core.model.attention.ATTENTION
    head: str = "lm"  # key of core.model.transformer.HEADS: "lm" or "classifier"
    n_classes: int = 0  # classifier head only
    pooling: str = "mean"  # classifier head only: "mean" over non-pad tokens | "last" | "first"
    pad_id: int = 0  # PAD is 0 in both tokenizers; the padding mask and the loss use it
    rope_base: float = 10000.0  # Su et al.'s theta base; also the sinusoidal base of Vaswani et al.
    init: str = "gpt2"  # key of core.model.transformer.INITS: "gpt2" N(0, 0.02); "pytorch" the modules' defaults
    bias: bool = True  # biases in the blocks' Linears and every LayerNorm; nanoGPT's bias=False has none at all
    mlp: bool = True  # False: attention-only blocks, no feed-forward (Olsson et al.'s small induction-head models)

    def __post_init__(self) -> None:
        for name in ("vocab_size", "block_size", "n_layer", "n_head", "n_embd"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"{name} must be a positive integer, got {value!r}.")
        for name in ("dropout", "rope_base"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                raise ConfigError(f"{name} must be a number, got {value!r}.")
        for name in ("n_classes", "pad_id", "ffn_width"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ConfigError(f"{name} must be a non-negative integer, got {value!r}.")
        for name in ("causal", "bias", "mlp"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{name} must be true or false, got {getattr(self, name)!r}.")
        if not self.rope_base > 1:
            raise ConfigError(f"rope_base must be greater than 1, got {self.rope_base!r}.")
        for name in ("positional", "attention", "head", "pooling", "init"):
            _check_choice(name, getattr(self, name), _CHOICES[name])
        if self.n_embd % self.n_head:
            raise ConfigError(f"n_embd ({self.n_embd}) must be divisible by n_head ({self.n_head}).")
        if self.positional == "rope" and (self.n_embd // self.n_head) % 2:
            raise ConfigError("RoPE rotates pairs of dimensions, so the head size must be even.")
        if not 0.0 <= float(self.dropout) < 1.0:
            raise ConfigError(f"dropout must be in [0, 1), got {self.dropout!r}.")
        if self.head == "classifier" and self.n_classes < 2:
            raise ConfigError("A classifier head needs n_classes >= 2.")
        problem = _CHOICES["attention"][self.attention].incompatibility(self)  # type: ignore[index]
        if problem:
            raise ConfigError(problem)

    @property
    def head_size(self) -> int:
        return self.n_embd // self.n_head

    @property
    def feed_forward_width(self) -> int:
        return self.ffn_width or 4 * self.n_embd

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelConfig:
        if not isinstance(data, dict):
            raise ConfigError("The model config must be a JSON object.")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"The model config has unknown fields: {', '.join(unknown)}.")
        try:
            return cls(**data)
        except TypeError as exc:  # a missing required field
            raise ConfigError(f"The model config is incomplete: {exc}.") from None

    def replace(self, **changes: Any) -> ModelConfig:
        return dataclasses.replace(self, **changes)


# field -> its registry; filled by the registry modules (see the module docstring).
_CHOICES: dict[str, Collection[str]] = {}


def register_choices(field: str, registry: Collection[str]) -> None:
    """Make `registry`'s keys the valid values of `field` (called once by each registry module)."""
    _CHOICES[field] = registry


def _check_choice(field: str, value: str, registry) -> None:
    if not isinstance(value, str) or value not in registry:
        raise ConfigError(f"Unknown {field} {value!r}; choose one of: {', '.join(registry)}.")


# Presets the course material uses, as plain data (minGPT style). Built through ModelConfig.
PRESETS: dict[str, dict[str, Any]] = {
    # CS224N a5 "knowledge access": minGPT with these sizes (3,323,392 parameters).
    "cs224n-mingpt": dict(vocab_size=256, block_size=128, n_layer=4, n_head=8, n_embd=256,
                          positional="learned", attention="vanilla"),
    "cs224n-synthesizer": dict(vocab_size=256, block_size=128, n_layer=4, n_head=8, n_embd=256,
                               positional="learned", attention="synthesizer"),
}
