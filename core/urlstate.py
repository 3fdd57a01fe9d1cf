"""Shareable page state <-> URL query parameters (strings only).

`st.query_params` holds strings. Everything a link should reopen (sentence, layer, head, view, ...)
is encoded and decoded here, in one place, so a page never parses the URL itself. Decoding never
raises: a missing or bad value (hand-edited links, old links, other tools) becomes the default.
The checkpoint is not here: the shared sidebar picker owns `model`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

ATTENTION_VIEWS = ("single", "model", "token", "combine", "compare")
COMBINE_METHODS = ("mean", "max", "rollout")
MAX_URL_TEXT = 4000  # characters; browsers accept far longer URLs, but a link should stay pasteable
DIGITS = re.compile(r"[0-9]{1,9}")
MAX_INDEX = 4096  # layers, heads and token positions above this are not real, whatever the URL says


@dataclass(frozen=True)
class AttentionPageState:
    """What a link to the attention page reopens. `text=None` means "the checkpoint's default"."""

    text: str | None = None
    layer: int = 0
    head: int = 0
    view: str = "single"
    token: int | None = None  # query position for the one-token view; None: the last token
    combine: str = "mean"
    compare: str | None = None  # name of the second checkpoint for the compare view
    past: bool = False  # run past the block size (positional schemes without a hard limit)
    hide_first: bool = False  # combine view: hide the first token
    hide_special: bool = False  # combine view: hide PAD / MASK

    def replace(self, **changes: Any) -> AttentionPageState:
        return replace(self, **changes)


# URL key per field: short, stable names (changing one breaks links people have shared).
URL_KEYS = {"text": "text", "layer": "layer", "head": "head", "view": "view", "token": "token",
            "combine": "combine", "compare": "vs", "past": "past", "hide_first": "hidefirst",
            "hide_special": "hidespecial"}
TRUE, FALSE = "1", "0"


def _last(value: Any) -> str | None:
    """st.query_params gives strings; AppTest and repeated keys can give lists: take the last."""
    if isinstance(value, (list, tuple)):
        value = value[-1] if value else None
    return value if isinstance(value, str) else None


def _index(value: str | None, default: int | None) -> int | None:
    if value is None or not DIGITS.fullmatch(value.strip()):  # ASCII digits: no sign, '1e3', '²'
        return default
    number = int(value.strip())
    return number if number <= MAX_INDEX else default


def _choice(value: str | None, choices: tuple[str, ...], default: str) -> str:
    return value if value in choices else default


def _flag(value: str | None, default: bool) -> bool:
    if value is None:
        return default
    value = value.strip().lower()
    return True if value in (TRUE, "true", "yes") else False if value in (FALSE, "false", "no") else default


def decode(params: Mapping[str, Any]) -> AttentionPageState:
    """Query parameters -> state; every missing or invalid value falls back to its default."""
    default = AttentionPageState()
    text = _last(params.get(URL_KEYS["text"]))
    compare = _last(params.get(URL_KEYS["compare"]))
    return AttentionPageState(
        text=text[:MAX_URL_TEXT] if text is not None else None,
        layer=_index(_last(params.get(URL_KEYS["layer"])), default.layer),
        head=_index(_last(params.get(URL_KEYS["head"])), default.head),
        view=_choice(_last(params.get(URL_KEYS["view"])), ATTENTION_VIEWS, default.view),
        token=_index(_last(params.get(URL_KEYS["token"])), default.token),
        combine=_choice(_last(params.get(URL_KEYS["combine"])), COMBINE_METHODS, default.combine),
        compare=compare[:200] if compare else None,
        past=_flag(_last(params.get(URL_KEYS["past"])), default.past),
        hide_first=_flag(_last(params.get(URL_KEYS["hide_first"])), default.hide_first),
        hide_special=_flag(_last(params.get(URL_KEYS["hide_special"])), default.hide_special),
    )


ALWAYS_IN_URL = ("text", "layer", "head", "view")  # the rest only when not at their defaults


def encode(state: AttentionPageState) -> dict[str, str]:
    """State -> query parameters (strings). Options at their defaults (and None) are left out, so
    links stay short; a page writing these should drop the URL_KEYS that are absent."""
    default = AttentionPageState()
    params: dict[str, str] = {}
    for f in fields(state):
        value = getattr(state, f.name)
        if value is None or (f.name not in ALWAYS_IN_URL and value == getattr(default, f.name)):
            continue
        if f.name == "text":
            value = value[:MAX_URL_TEXT]
        params[URL_KEYS[f.name]] = (TRUE if value else FALSE) if isinstance(value, bool) else str(value)
    return params
