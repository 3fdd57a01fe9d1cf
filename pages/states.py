"""Every page's shareable state, declared once (pages/page_state.py binds, restores and writes it).

Per field: the URL key (short and stable: changing one breaks links people have shared), the widget key, the
parser with its bounds, and how it is written. Links between pages are built from these classes
(`page_state.page_url`), never by hand. Keys of the positional page are prefixed `pos_` where a bare name
would collide with another page's (`text`, `layer`, `head`); the "Where from" view's `wf`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from core.lens.history.curves import DEFAULT_SMOOTHING, MAX_SMOOTHING, X_AXES
from core.lens.history.records import MAX_NAME_CHARS
from core.lens.probe.inputs import MAX_INPUT_CHARS
from pages.page_state import (
    MAX_INDEX,
    MAX_MODEL_NAME,
    decimal_in,
    flag,
    names,
    number_in,
    one_of,
    show_names,
    show_span,
    span,
    url_field,
    whole_number,
)
from pages.page_state import (
    name as short_name,
)
from pages.page_state import (
    text as free_text,
)


def zero_one(value: str) -> bool:
    if value not in ("0", "1"):
        raise ValueError(value)
    return value == "1"


class _Replace:
    def replace(self, **changes: Any):
        return replace(self, **changes)


# --- the attention page ------------------------------------------------------------------------------------

ATTENTION_VIEWS = ("single", "model", "token", "qk", "combine", "compare")
COMBINE_METHODS = ("mean", "max", "rollout")
MAX_URL_TEXT = 4000  # characters; browsers accept far longer URLs, but a link should stay pasteable
INDEX = whole_number(MAX_INDEX)


@dataclass(frozen=True)
class AttentionState(_Replace):
    """What a link to the attention page reopens. `text=None` means "the checkpoint's default"."""

    text: str | None = url_field(url="text", widget="attn_text", parse=free_text(MAX_URL_TEXT), always=True,
                                 show=lambda t: t[:MAX_URL_TEXT])
    layer: int = url_field(0, url="layer", widget="attn_layer", parse=INDEX, always=True)
    head: int = url_field(0, url="head", widget="attn_head", parse=INDEX, always=True)
    view: str = url_field("single", url="view", widget="attn_view", parse=one_of(ATTENTION_VIEWS), always=True)
    # query position for the one-token view; None: the last token
    token: int | None = url_field(url="token", widget="attn_token", parse=INDEX)
    combine: str = url_field("mean", url="combine", widget="attn_combine", parse=one_of(COMBINE_METHODS))
    # the second checkpoint of the compare view
    compare: str | None = url_field(url="vs", widget="attn_compare", parse=free_text(MAX_MODEL_NAME, blank=False))
    # run past the block size (positional schemes without a hard limit)
    past: bool = url_field(False, url="past", widget="attn_past", parse=flag)
    hide_first: bool = url_field(False, url="hidefirst", widget="attn_hide_first", parse=flag)  # combine view
    hide_special: bool = url_field(False, url="hidespecial", widget="attn_hide_special", parse=flag)  # PAD, MASK
    # query-key view: the key taken apart; None: the one the query weighs most
    key: int | None = url_field(url="key", widget="attn_key", parse=INDEX)
    # long inputs: first and last position drawn; None: the start
    window: tuple[int, int] | None = url_field(url="window", widget="attn_window", parse=span, show=show_span)
    # training step of a kept snapshot (core/io/snapshots.py); None: the checkpoint itself
    step: int | None = url_field(url="step", widget="attn_step", parse=whole_number())


# --- the birthplace probe ----------------------------------------------------------------------------------

PROBE_TABS = {"ask": "Ask", "fabricate": "Fabricate", "dev": "Dev set"}  # URL value -> tab label


@dataclass(frozen=True)
class ProbeState(_Replace):
    """The tab, the name typed on Ask (None: the default name; only Ask writes it), the model the details are
    drawn for (None: the sidebar's model)."""

    tab: str = url_field("ask", url="tab", widget="probe_tab", parse=one_of(PROBE_TABS, fold_case=True),
                         always=True, labels=PROBE_TABS)
    name: str | None = url_field(url="name", widget="probe_ask", parse=free_text(MAX_INPUT_CHARS, blank=False),
                                 show=lambda t: t[:MAX_INPUT_CHARS])
    focus: str | None = url_field(url="focus", parse=free_text(MAX_MODEL_NAME, blank=False),
                                  show=lambda t: t[:MAX_MODEL_NAME])


# --- training curves -----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class CurvesState(_Replace):
    """What a link to the curves page reopens. Runs the link names but this server lacks are dropped by the page."""

    runs: tuple[str, ...] = url_field((), url="runs", widget="curves_runs", parse=names, show=show_names,
                                      always=True)
    metric: str = url_field("loss", url="metric", widget="curves_metric", parse=short_name(MAX_NAME_CHARS), always=True,
                            note="The metric in the link is not valid; showing loss.")
    x: str = url_field("step", url="x", widget="curves_x", parse=one_of(X_AXES), always=True,
                       note="The x axis in the link is not one of step, epoch, tokens, wall_time.")
    smoothing: float = url_field(DEFAULT_SMOOTHING, url="smoothing", widget="curves_smoothing",
                                 parse=decimal_in(0.0, MAX_SMOOTHING), always=True,
                                 note=f"Smoothing in the link must be between 0 and {MAX_SMOOTHING}.")
    logy: bool = url_field(False, url="logy", widget="curves_logy", parse=flag, always=True)


# --- the positional page -----------------------------------------------------------------------------------

POSITIONAL_SECTION_TITLES = {"tables": "Tables", "similarity": "Similarity", "alibi": "ALiBi", "rope": "RoPE",
                             "sentence": "One sentence", "training": "Training",
                             "extrapolation": "Longer than trained"}
POSITIONAL_SECTIONS = tuple(POSITIONAL_SECTION_TITLES)
POSITIONAL_ENCODING_SECTIONS = POSITIONAL_SECTIONS[:4]  # need no checkpoint
POSITIONAL_METRICS = ("loss", "perplexity")
POSITIONAL_DEFAULT_SENTENCE = "Karl Long was a British cyclist and engineer born in Leeds ."
MAX_POSITIONAL_TEXT = 1000
POSITIONAL_LENGTHS = range(8, 257, 8)  # the sliders' steps
POSITIONAL_DIMS = range(8, 257, 8)


@dataclass(frozen=True)
class PositionalState(_Replace):
    """Layer and head are only bounded here (0..63); the page clips them to the model it shows."""

    section: str = url_field("tables", url="pos_section", widget="pos_tab", parse=one_of(POSITIONAL_SECTIONS),
                             labels=POSITIONAL_SECTION_TITLES)
    text: str = url_field(POSITIONAL_DEFAULT_SENTENCE, url="pos_text", widget="pos_text",
                          parse=free_text(MAX_POSITIONAL_TEXT))
    layer: int = url_field(0, url="pos_layer", widget="pos_layer", parse=number_in(range(64)))
    head: int = url_field(0, url="pos_head", widget="pos_head", parse=number_in(range(64)))
    length: int = url_field(64, url="pos_length", widget="pos_length", parse=number_in(POSITIONAL_LENGTHS))
    dim: int = url_field(128, url="pos_dim", widget="pos_dim", parse=number_in(POSITIONAL_DIMS))
    heads: int = url_field(8, url="pos_heads", widget="pos_heads", parse=number_in(range(1, 17)))  # ALiBi heads
    metric: str = url_field("loss", url="pos_metric", widget="pos_metric", parse=one_of(POSITIONAL_METRICS))
    # also the per-batch training curve
    train: bool = url_field(False, url="pos_train", widget="pos_train", parse=zero_one)


# --- the "Where from" view (probe page's Ask and Dev set tabs, attention page) -----------------------------

WHERE_FROM_CORRUPTIONS = ("noise", "swap")


@dataclass(frozen=True)
class WhereFromState(_Replace):
    """Whether the view is open, the corruption, its samples and seed. Widget keys carry the view's prefix."""

    open: bool = url_field(False, url="wf", widget="{prefix}_open", parse=flag)
    corruption: str = url_field("noise", url="wf_corrupt", widget="{prefix}_corruption",
                                parse=one_of(WHERE_FROM_CORRUPTIONS))
    samples: int = url_field(10, url="wf_samples", widget="{prefix}_samples", parse=number_in(range(1, 21)))
    seed: int = url_field(0, url="wf_seed", widget="{prefix}_seed", parse=number_in(range(10000)))
