"""The positional page's shareable state <-> URL query parameters (strings only).

Like `core.urlstate` for the attention page: everything a link should reopen (section, sentence, layer,
head, the encodings' sizes, the training metric) is encoded and decoded here, and decoding never raises:
a missing or bad value becomes the default. Parameters are prefixed `pos_` where a bare name could
collide with another page's (`text`, `layer`, `head`); the sidebar picker owns `model`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

SECTIONS = ("tables", "similarity", "alibi", "rope", "sentence", "training", "extrapolation")
SECTION_TITLES = {"tables": "Tables", "similarity": "Similarity", "alibi": "ALiBi", "rope": "RoPE",
                  "sentence": "One sentence", "training": "Training", "extrapolation": "Longer than trained"}
ENCODING_SECTIONS = SECTIONS[:4]  # need no checkpoint
METRICS = ("loss", "perplexity")
DEFAULT_SENTENCE = "Karl Long was a British cyclist and engineer born in Leeds ."
MAX_TEXT = 1000
LENGTHS = range(8, 257, 8)  # the sliders' steps
DIMS = range(8, 257, 8)
DIGITS = re.compile(r"[0-9]{1,4}")


@dataclass(frozen=True)
class PositionalPageState:
    section: str = "tables"
    text: str = DEFAULT_SENTENCE
    layer: int = 0
    head: int = 0
    length: int = 64
    dim: int = 128
    heads: int = 8  # ALiBi heads
    metric: str = "loss"
    train: bool = False  # also the per-batch training curve


URL_KEYS = {"section": "pos_section", "text": "pos_text", "layer": "pos_layer", "head": "pos_head",
            "length": "pos_length", "dim": "pos_dim", "heads": "pos_heads", "metric": "pos_metric",
            "train": "pos_train"}


def _last(value: Any) -> str | None:
    if isinstance(value, (list, tuple)):
        value = value[-1] if value else None
    return value if isinstance(value, str) else None


def _int(value: str | None, allowed, default: int) -> int:
    if value is None or not DIGITS.fullmatch(value.strip()):
        return default
    number = int(value)
    return number if number in allowed else default


def decode(params: Mapping[str, Any]) -> PositionalPageState:
    """Query parameters -> state; every missing or invalid value falls back to its default. Layer and
    head are only bounded here (0..63); the page clips them to the model it shows."""
    d = PositionalPageState()
    get = {field: _last(params.get(key)) for field, key in URL_KEYS.items()}
    section = get["section"] if get["section"] in SECTIONS else d.section
    metric = get["metric"] if get["metric"] in METRICS else d.metric
    text = get["text"][:MAX_TEXT] if get["text"] is not None else d.text
    return PositionalPageState(
        section=section, text=text, layer=_int(get["layer"], range(64), d.layer),
        head=_int(get["head"], range(64), d.head), length=_int(get["length"], LENGTHS, d.length),
        dim=_int(get["dim"], DIMS, d.dim), heads=_int(get["heads"], range(1, 17), d.heads), metric=metric,
        train=get["train"] == "1" if get["train"] in ("0", "1") else d.train)


def encode(state: PositionalPageState) -> dict[str, str]:
    """State -> query parameters; values at their defaults are left out so links stay short (a page
    writing these should drop the URL_KEYS that are absent)."""
    default = PositionalPageState()
    params = {}
    for f in fields(state):
        value = getattr(state, f.name)
        if value == getattr(default, f.name):
            continue
        params[URL_KEYS[f.name]] = ("1" if value else "0") if isinstance(value, bool) else str(value)
    return params
