"""Shareable page state <-> URL query parameters (strings only): the one codec of the app.

`st.query_params` holds strings. Everything a link should reopen (the sidebar's model; the attention
page's sentence, layer, head, view; the positional page's section, sentence and sizes; the probe page's
tab, name and focus model; the curves page's runs and settings) is encoded and decoded here, in one place,
so a page never parses the URL itself.
Decoding never raises: a missing or bad value (hand-edited links, old links, other tools) becomes the
default. No streamlit here: pages hand over `st.query_params.to_dict()` and write back what `encode*`
returns.
"""

from __future__ import annotations

import math
import re
import string
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any
from urllib.parse import quote, unquote

from core.lens.history.curves import DEFAULT_SMOOTHING, MAX_SMOOTHING, X_AXES
from core.lens.history.records import MAX_NAME_CHARS
from core.lens.probe.inputs import MAX_INPUT_CHARS

ATTENTION_VIEWS = ("single", "model", "token", "qk", "combine", "compare")
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
    key: int | None = None  # query-key view: the key taken apart; None: the one the query weighs most
    window: tuple[int, int] | None = None  # long inputs: first and last position drawn; None: the start
    step: int | None = None  # training step of a kept snapshot (core/io/snapshots.py); None: the checkpoint

    def replace(self, **changes: Any) -> AttentionPageState:
        return replace(self, **changes)


# URL key per field: short, stable names (changing one breaks links people have shared).
URL_KEYS = {"text": "text", "layer": "layer", "head": "head", "view": "view", "token": "token",
            "combine": "combine", "compare": "vs", "past": "past", "hide_first": "hidefirst",
            "hide_special": "hidespecial", "key": "key", "window": "window", "step": "step"}
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


def _window(value: str | None) -> tuple[int, int] | None:
    """'100-147' -> (100, 147): the first and last position a long input's views draw."""
    first, _, last = (value or "").partition("-")
    first_index, last_index = _index(first, None), _index(last, None)
    return None if first_index is None or last_index is None else (first_index, last_index)


def _step(value: str | None) -> int | None:
    """A training step: any whole number a run can reach (not bounded like an index); else None."""
    return int(value.strip()) if value is not None and DIGITS.fullmatch(value.strip()) else None


def _flag(value: str | None, default: bool) -> bool:
    if value is None:
        return default
    value = value.strip().lower()
    return True if value in (TRUE, "true", "yes") else False if value in (FALSE, "false", "no") else default


def _text(value: str | None, limit: int) -> str | None:
    """Free text from a link, cut to `limit`; None when absent, empty or only whitespace."""
    return value[:limit] if value and value.strip() else None


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
        key=_index(_last(params.get(URL_KEYS["key"])), default.key),
        window=_window(_last(params.get(URL_KEYS["window"]))),
        step=_step(_last(params.get(URL_KEYS["step"]))),
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
        if f.name == "window":
            value = f"{int(value[0])}-{int(value[1])}"
        params[URL_KEYS[f.name]] = (TRUE if value else FALSE) if isinstance(value, bool) else str(value)
    return params


# --- the sidebar's model (every page) -------------------------------------------------------------

MODEL_KEY = "model"
MAX_MODEL_NAME = 200


def decode_model(params: Mapping[str, Any]) -> str | None:
    """The checkpoint name a link asks for (the picker checks that it exists)."""
    return _text(_last(params.get(MODEL_KEY)), MAX_MODEL_NAME)


def encode_model(name: str) -> dict[str, str]:
    return {MODEL_KEY: name[:MAX_MODEL_NAME]}


# --- the birthplace probe ---------------------------------------------------------------------------

PROBE_TABS = {"ask": "Ask", "fabricate": "Fabricate", "dev": "Dev set"}  # URL value -> tab label
PROBE_KEYS = {"tab": "tab", "name": "name", "focus": "focus"}
MAX_PROBE_TEXT = MAX_INPUT_CHARS  # what the probe's text box accepts


@dataclass(frozen=True)
class ProbePageState:
    """What a link to the probe page reopens: the tab, the name typed on Ask (None: the default name),
    the model the details are drawn for (None: the sidebar's model)."""

    tab: str = "ask"
    name: str | None = None
    focus: str | None = None

    def replace(self, **changes: Any) -> ProbePageState:
        return replace(self, **changes)

    @property
    def tab_label(self) -> str:
        return PROBE_TABS[self.tab]


def probe_tab(label: str | None) -> str:
    """Tab label ('Dev set') -> URL value ('dev'); unknown labels -> 'ask'."""
    return next((value for value, shown in PROBE_TABS.items() if shown == label), "ask")


def decode_probe(params: Mapping[str, Any]) -> ProbePageState:
    tab = _last(params.get(PROBE_KEYS["tab"]))
    tab = tab.strip().lower() if tab else None
    return ProbePageState(tab=tab if tab in PROBE_TABS else "ask",
                          name=_text(_last(params.get(PROBE_KEYS["name"])), MAX_PROBE_TEXT),
                          focus=_text(_last(params.get(PROBE_KEYS["focus"])), MAX_MODEL_NAME))


def encode_probe(state: ProbePageState) -> dict[str, str]:
    """The tab always; the name on the Ask tab; the focus model when it is set."""
    params = {PROBE_KEYS["tab"]: state.tab}
    if state.tab == "ask" and state.name:
        params[PROBE_KEYS["name"]] = state.name[:MAX_PROBE_TEXT]
    if state.focus:
        params[PROBE_KEYS["focus"]] = state.focus[:MAX_MODEL_NAME]
    return params


# --- training curves ----------------------------------------------------------------------------------

CURVE_KEYS = ("runs", "metric", "x", "smoothing", "logy")


@dataclass
class CurveSettings:
    """What a link to the curves page reopens."""

    runs: list[str] = field(default_factory=list)
    metric: str = "loss"
    x: str = "step"
    smoothing: float = DEFAULT_SMOOTHING
    logy: bool = False


# Runs are joined with ',' in one parameter and names may hold ',' and '%': those two are percent-encoded
# (and anything outside printable ASCII); the rest of a name stays readable in the link.
RUN_NAME_SAFE = "".join(c for c in string.punctuation + " " if c not in "%,")


def _escape_run(name: str) -> str:
    return quote(name, safe=RUN_NAME_SAFE)


def encode_curves(settings: CurveSettings) -> dict[str, str]:
    return {"runs": ",".join(_escape_run(r) for r in settings.runs), "metric": settings.metric,
            "x": settings.x, "smoothing": f"{settings.smoothing:g}", "logy": TRUE if settings.logy else FALSE}


def decode_curves(params: Mapping[str, Any], known_runs: Iterable[str]) -> tuple[CurveSettings, list[str]]:
    """(settings, sentences about values that were ignored). Unknown runs are dropped."""
    notes: list[str] = []
    out = CurveSettings()
    known = set(known_runs)
    raw_runs = _last(params.get("runs"))
    if raw_runs:
        wanted = [unquote(r) for r in raw_runs.split(",") if r]
        out.runs = [r for r in dict.fromkeys(wanted) if r in known]
        missing = len(set(wanted) - known)
        if missing:
            notes.append(f"{missing} run(s) named in the link are not available here.")
    metric = _last(params.get("metric"))
    if metric is not None:
        if 0 < len(metric) <= MAX_NAME_CHARS:
            out.metric = metric
        else:
            notes.append("The metric in the link is not valid; showing loss.")
    x = _last(params.get("x"))
    if x is not None:
        if x in X_AXES:
            out.x = x
        else:
            notes.append("The x axis in the link is not one of step, epoch, tokens, wall_time.")
    smoothing = _last(params.get("smoothing"))
    if smoothing is not None:
        try:
            value = float(smoothing)
        except ValueError:
            value = math.nan
        if 0.0 <= value <= MAX_SMOOTHING:
            out.smoothing = value
        else:
            notes.append(f"Smoothing in the link must be between 0 and {MAX_SMOOTHING}.")
    logy = _last(params.get("logy"))
    if logy is not None:
        out.logy = _flag(logy, False) or logy.strip().lower() == "on"
    return out, notes


# --------------------------------------------------------------------------- the positional page
# Keys are prefixed `pos_` where a bare name would collide with another page's (`text`, `layer`, `head`).

POSITIONAL_SECTIONS = ("tables", "similarity", "alibi", "rope", "sentence", "training", "extrapolation")
POSITIONAL_SECTION_TITLES = {"tables": "Tables", "similarity": "Similarity", "alibi": "ALiBi", "rope": "RoPE",
                  "sentence": "One sentence", "training": "Training", "extrapolation": "Longer than trained"}
POSITIONAL_ENCODING_SECTIONS = POSITIONAL_SECTIONS[:4]  # need no checkpoint
POSITIONAL_METRICS = ("loss", "perplexity")
POSITIONAL_DEFAULT_SENTENCE = "Karl Long was a British cyclist and engineer born in Leeds ."
MAX_POSITIONAL_TEXT = 1000
POSITIONAL_LENGTHS = range(8, 257, 8)  # the sliders' steps
POSITIONAL_DIMS = range(8, 257, 8)
SMALL_DIGITS = re.compile(r"[0-9]{1,4}")


@dataclass(frozen=True)
class PositionalPageState:
    section: str = "tables"
    text: str = POSITIONAL_DEFAULT_SENTENCE
    layer: int = 0
    head: int = 0
    length: int = 64
    dim: int = 128
    heads: int = 8  # ALiBi heads
    metric: str = "loss"
    train: bool = False  # also the per-batch training curve


POSITIONAL_KEYS = {"section": "pos_section", "text": "pos_text", "layer": "pos_layer", "head": "pos_head",
                   "length": "pos_length", "dim": "pos_dim", "heads": "pos_heads", "metric": "pos_metric",
                   "train": "pos_train"}


def _int_in(value: str | None, allowed, default: int) -> int:
    if value is None or not SMALL_DIGITS.fullmatch(value.strip()):
        return default
    number = int(value)
    return number if number in allowed else default


def decode_positional(params: Mapping[str, Any]) -> PositionalPageState:
    """Query parameters -> state; every missing or invalid value falls back to its default. Layer and
    head are only bounded here (0..63); the page clips them to the model it shows."""
    d = PositionalPageState()
    get = {field: _last(params.get(key)) for field, key in POSITIONAL_KEYS.items()}
    section = get["section"] if get["section"] in POSITIONAL_SECTIONS else d.section
    metric = get["metric"] if get["metric"] in POSITIONAL_METRICS else d.metric
    text = get["text"][:MAX_POSITIONAL_TEXT] if get["text"] is not None else d.text
    return PositionalPageState(
        section=section, text=text, layer=_int_in(get["layer"], range(64), d.layer),
        head=_int_in(get["head"], range(64), d.head),
        length=_int_in(get["length"], POSITIONAL_LENGTHS, d.length), dim=_int_in(get["dim"], POSITIONAL_DIMS, d.dim),
        heads=_int_in(get["heads"], range(1, 17), d.heads), metric=metric,
        train=get["train"] == "1" if get["train"] in ("0", "1") else d.train)


def encode_positional(state: PositionalPageState) -> dict[str, str]:
    """State -> query parameters; values at their defaults are left out so links stay short (a page
    writing these should drop the POSITIONAL_KEYS that are absent)."""
    default = PositionalPageState()
    params = {}
    for f in fields(state):
        value = getattr(state, f.name)
        if value == getattr(default, f.name):
            continue
        params[POSITIONAL_KEYS[f.name]] = ("1" if value else "0") if isinstance(value, bool) else str(value)
    return params


# --- the "Where from" view (probe page's Ask and Dev set tabs, attention page) ------------------------------

WHERE_FROM_CORRUPTIONS = ("noise", "swap")
WHERE_FROM_SAMPLES = range(1, 21)
WHERE_FROM_SEEDS = range(0, 10000)


@dataclass(frozen=True)
class WhereFromState:
    """What a link to a "Where from" view reopens: whether it is open, the corruption, its samples and seed."""

    open: bool = False
    corruption: str = "noise"
    samples: int = 10
    seed: int = 0


WHERE_FROM_KEYS = {"open": "wf", "corruption": "wf_corrupt", "samples": "wf_samples", "seed": "wf_seed"}


def decode_where_from(params: Mapping[str, Any]) -> WhereFromState:
    d = WhereFromState()
    get = {name: _last(params.get(key)) for name, key in WHERE_FROM_KEYS.items()}
    return WhereFromState(open=_flag(get["open"], d.open),
                          corruption=_choice(get["corruption"], WHERE_FROM_CORRUPTIONS, d.corruption),
                          samples=_int_in(get["samples"], WHERE_FROM_SAMPLES, d.samples),
                          seed=_int_in(get["seed"], WHERE_FROM_SEEDS, d.seed))


def encode_where_from(state: WhereFromState) -> dict[str, str]:
    """Values at their defaults are left out (a page writing these drops the WHERE_FROM_KEYS that are absent)."""
    default, params = WhereFromState(), {}
    for f in fields(state):
        value = getattr(state, f.name)
        if value != getattr(default, f.name):
            params[WHERE_FROM_KEYS[f.name]] = ("1" if value else "0") if isinstance(value, bool) else str(value)
    return params
