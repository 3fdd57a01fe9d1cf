"""Page state: every page's shareable state, declared once (the dataclasses at the end of this file), and the
one generic way widgets, state and URL query parameters meet.

A page's state is a frozen dataclass whose fields are made with `url_field`: per field, its URL key (short and
stable: changing one breaks links people have shared), its widget key, a parser (URL string -> value, raising
ValueError on anything it does not accept, bounds included) and how the value is written back. Three generic
steps then serve every page:

- `restore(cls)`: the state a page opens with (the URL on a first visit or when a link brings values this page
  did not write last; else this session's last state), with every widget it names seeded from it;
- `bind(cls, last)`: the state the widgets hold now, written to the URL (values at their defaults left out,
  so links stay short) and kept as this session's last state;
- `to_url(state)` / `from_url(cls, params)`: the codec, also used for links between pages (`page_url`).

Decoding never raises: a missing or bad value (hand-edited links, old links, other tools) becomes the
default, and a field that declares a `note` says so in one sentence. `st.query_params` holds strings;
AppTest and repeated keys can give lists, of which the last counts.

Links between pages are built from the declared classes (`page_url`), never by hand. Keys of the positional
page are prefixed `pos_` where a bare name would collide with another page's (`text`, `layer`, `head`); the
"Where from" view's `wf`.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import string
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import quote, unquote, urlencode

import streamlit as st

from core.lens.history.curves import DEFAULT_SMOOTHING, MAX_SMOOTHING, X_AXES
from core.lens.history.records import MAX_NAME_CHARS
from core.lens.probe.questions import MAX_INPUT_CHARS

TRUE, FALSE = "1", "0"
DIGITS = re.compile(r"[0-9]{1,9}")  # ASCII digits only: no sign, '1e3', '²'
MAX_INDEX = 4096  # layers, heads and token positions above this are not real, whatever the URL says
MODEL_KEY, MAX_MODEL_NAME = "model", 200  # the sidebar's model, on every page


# --- parsers: URL string -> value, ValueError when not accepted -----------------------------------------

def whole_number(limit: int | None = None) -> Callable[[str], int]:
    """A whole number written in ASCII digits, at most `limit` (None: any a run can reach, e.g. a step)."""
    def parse(value: str) -> int:
        if not DIGITS.fullmatch(value.strip()):
            raise ValueError(value)
        number = int(value.strip())
        if limit is not None and number > limit:
            raise ValueError(value)
        return number
    return parse


def number_in(allowed: range) -> Callable[[str], int]:
    """A whole number that is one of `allowed` (a slider's steps)."""
    def parse(value: str) -> int:
        number = whole_number()(value)
        if number not in allowed:
            raise ValueError(value)
        return number
    return parse


def decimal_in(low: float, high: float) -> Callable[[str], float]:
    def parse(value: str) -> float:
        number = float(value)
        if not low <= number <= high:  # NaN fails too
            raise ValueError(value)
        return number
    return parse


def one_of(choices: Iterable[str], fold_case: bool = False) -> Callable[[str], str]:
    choices = tuple(choices)

    def parse(value: str) -> str:
        value = value.strip().lower() if fold_case else value
        if value not in choices:
            raise ValueError(value)
        return value
    return parse


def flag(value: str) -> bool:
    value = value.strip().lower()
    if value in (TRUE, "true", "yes", "on"):
        return True
    if value in (FALSE, "false", "no", "off"):
        return False
    raise ValueError(value)


def free_text(limit: int, blank: bool = True) -> Callable[[str], str]:
    """Free text cut to `limit`; `blank=False`: empty or only whitespace is refused (the default holds)."""
    def parse(value: str) -> str:
        if not blank and not value.strip():
            raise ValueError(value)
        return value[:limit]
    return parse


def short_name(limit: int) -> Callable[[str], str]:
    """A name (a metric, a model): one to `limit` characters."""
    def parse(value: str) -> str:
        if not 0 < len(value) <= limit:
            raise ValueError(value)
        return value
    return parse


def span(value: str) -> tuple[int, int]:
    """'100-147' -> (100, 147): the first and last position a long input's views draw."""
    first, _, last = value.partition("-")
    index = whole_number(MAX_INDEX)
    return index(first), index(last)


def show_span(value: tuple[int, int]) -> str:
    return f"{int(value[0])}-{int(value[1])}"


# Names joined with ',' in one parameter may themselves hold ',' and '%': those two are percent-encoded (and
# anything outside printable ASCII); the rest of a name stays readable in the link.
NAME_SAFE = "".join(c for c in string.punctuation + " " if c not in "%,")


def names(value: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(unquote(n) for n in value.split(",") if n))


def show_names(value: Iterable[str]) -> str:
    return ",".join(quote(n, safe=NAME_SAFE) for n in value)


def show_plain(value: Any) -> str:
    if isinstance(value, bool):
        return TRUE if value else FALSE
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


# --- declaring a page's state ------------------------------------------------------------------------------

def url_field(default: Any = None, *, url: str, parse: Callable[[str], Any], widget: str | None = None,
              show: Callable[[Any], str] = show_plain, always: bool = False, note: str | None = None,
              labels: Mapping[Any, str] | None = None, default_factory: Callable[[], Any] | None = None):
    """One field of a page's state. `widget` may hold '{prefix}' (a view drawn on several pages); `labels`:
    the widget shows a label per value (a tab title); `always`: written even at its default; `note`: the
    sentence shown when a link's value is refused."""
    metadata = dict(url=url, parse=parse, widget=widget, show=show, always=always, note=note, labels=labels)
    if default_factory is not None:
        return dataclasses.field(default_factory=default_factory, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


@functools.cache
def _class_fields(cls) -> tuple[dataclasses.Field, ...]:
    return tuple(f for f in dataclasses.fields(cls) if "url" in f.metadata)


def _fields(cls_or_state) -> tuple[dataclasses.Field, ...]:
    """A state class's URL fields, read once per class (every page's restore and bind ask on every rerun)."""
    return _class_fields(cls_or_state if isinstance(cls_or_state, type) else type(cls_or_state))


@functools.cache
def url_keys(cls) -> frozenset[str]:
    return frozenset(f.metadata["url"] for f in _fields(cls))


@functools.cache
def _defaults(cls):
    """The state with every field at its default (frozen, so one per class serves every comparison)."""
    return cls()


def _last(value: Any) -> str | None:
    if isinstance(value, (list, tuple)):
        value = value[-1] if value else None
    return value if isinstance(value, str) else None


def from_url(cls, params: Mapping[str, Any]):
    """(state, notes): every missing or refused value is the field's default; refusals with a note say so."""
    state, values, notes = _defaults(cls), {}, []
    for f in _fields(cls):
        raw = _last(params.get(f.metadata["url"]))
        if raw is None:
            continue
        try:
            values[f.name] = f.metadata["parse"](raw)
        except (ValueError, OverflowError):
            if f.metadata["note"]:
                notes.append(f.metadata["note"])
    return dataclasses.replace(state, **values), notes


def to_url(state, short: bool = False) -> dict[str, str]:
    """State -> query parameters (strings); None, and values at their defaults unless `always`, left out
    (`short`: every value at its default left out, as in a link from another page)."""
    default, params = _defaults(type(state)), {}
    for f in _fields(state):
        value = getattr(state, f.name)
        if value is None or ((short or not f.metadata["always"]) and value == getattr(default, f.name)):
            continue
        params[f.metadata["url"]] = f.metadata["show"](value)
    return params


def page_url(*states, model: str | None = None) -> dict[str, str]:
    """The query parameters of a link to another page: its states, only what differs from their defaults
    (and the sidebar's model)."""
    params = {MODEL_KEY: model[:MAX_MODEL_NAME]} if model else {}
    for state in states:
        params.update(to_url(state, short=True))
    return params


def link_text(page: str, params: Mapping[str, str]) -> str:
    """The link as text, where a page link cannot be drawn (the page is not in this app's navigation)."""
    return f"{page}?" + urlencode(dict(params), quote_via=quote)


# --- widgets <-> state <-> URL --------------------------------------------------------------------------------

def _saved_key(cls, prefix: str) -> str:
    return f"{prefix or cls.__name__}_saved_state"


def widget_key(cls, field_name: str, prefix: str = "") -> str | None:
    f = next(f for f in _fields(cls) if f.name == field_name)
    return f.metadata["widget"].format(prefix=prefix) if f.metadata["widget"] else None


def last_state(cls, prefix: str = ""):
    """This session's last state of a page (None before its first visit): what a link to it keeps."""
    return st.session_state.get(_saved_key(cls, prefix))


def linked(cls, params: Mapping[str, Any] | None = None, prefix: str = "") -> bool:
    """The URL brings values of this state other than the page wrote last: a link (from another page, a pasted
    link, a lesson's slide), whose values then win over the widgets'."""
    params = st.query_params.to_dict() if params is None else params
    ours = {k: v for k, v in params.items() if k in url_keys(cls)}
    return bool(ours) and ours != st.session_state.get(_saved_key(cls, prefix) + "_url")


def restore(cls, prefix: str = "", params: Mapping[str, Any] | None = None, links: bool = True):
    """(state, notes) a page opens with, every widget it names seeded where not drawn yet. The URL counts on a
    first visit and when a link brings values other than this page wrote last (a link from another page, a
    pasted link: then the widgets are reset to it); else this session's last state (views come and go).
    `links=False`: the URL counts on a first visit only (a view drawn on several tabs of one page)."""
    params = st.query_params.to_dict() if params is None else params
    last = last_state(cls, prefix)
    notes: list[str] = []
    if last is None or (links and linked(cls, params, prefix)):
        state, notes = from_url(cls, params)
        if last is not None:
            for f in _fields(cls):
                if f.metadata["widget"]:
                    st.session_state.pop(f.metadata["widget"].format(prefix=prefix), None)
    else:
        state = last
    for f in _fields(cls):
        key = f.metadata["widget"].format(prefix=prefix) if f.metadata["widget"] else None
        if key and key not in st.session_state:
            value = getattr(state, f.name)
            labels = f.metadata["labels"]
            st.session_state[key] = labels[value] if labels and value in labels else value
    return state, notes


def forget_all() -> None:
    """Every page's last state and the widgets it seeded forgotten: the next page opens from its URL alone, as a link
    opened in a new session would (a lesson's slide: fields the slide does not name are at their defaults, not this
    session's last values). A saved key is `<class name>_saved_state`, or `<prefix>_saved_state` for a view drawn
    under a prefix (its widget keys hold '{prefix}')."""
    classes = [v for v in globals().values() if isinstance(v, type) and dataclasses.is_dataclass(v) and _fields(v)]
    for key in [k for k in st.session_state if isinstance(k, str) and k.endswith("_saved_state")]:
        name = key.removesuffix("_saved_state")
        for cls in classes:
            prefixed = any("{prefix}" in (f.metadata["widget"] or "") for f in _fields(cls))
            if cls.__name__ == name or (prefixed and isinstance(st.session_state.get(key), cls)):
                for f in _fields(cls):
                    if f.metadata["widget"]:
                        st.session_state.pop(f.metadata["widget"].format(prefix="" if cls.__name__ == name else name),
                                             None)
        st.session_state.pop(key, None)
        st.session_state.pop(key + "_url", None)


def current(cls, last=None, prefix: str = "", **values):
    """The state the widgets hold now (fields without a drawn widget keep `last`'s value; `values` win)."""
    base = last if last is not None else _defaults(cls)
    now = {}
    for f in _fields(cls):
        key = f.metadata["widget"].format(prefix=prefix) if f.metadata["widget"] else None
        if key and key in st.session_state:
            value = st.session_state[key]
            labels = f.metadata["labels"]
            if labels:
                value = next((v for v, shown in labels.items() if shown == value), getattr(base, f.name))
            now[f.name] = value
    return dataclasses.replace(base, **{**now, **values})


def set_params(params: Mapping[str, str], stale: Iterable[str] = ()) -> None:
    """Into the URL: `params` set and the `stale` keys dropped. Each change of st.query_params sends the browser
    the whole query string; a rerun that changes nothing (most of them: every page writes its state on every
    rerun) now sends nothing."""
    now = st.query_params
    for key in stale:
        if key in now:
            now.pop(key)
    changed = {key: value for key, value in params.items() if now.get_all(key) != [value]}
    if changed:
        now.update(changed)


def write(state, prefix: str = "", shown=None) -> None:
    """Into the URL (this state's keys that are absent dropped) and kept as this session's last state.
    `shown`: what the URL shows, where a page leaves part of its state out of links."""
    params = to_url(state if shown is None else shown)
    set_params(params, url_keys(type(state)) - set(params))
    st.session_state[_saved_key(type(state), prefix)] = state
    st.session_state[_saved_key(type(state), prefix) + "_url"] = params


def bind(cls, last=None, prefix: str = "", **values):
    """`current` then `write`: the one call a page makes once its widgets are drawn."""
    state = current(cls, last, prefix, **values)
    write(state, prefix)
    return state


@dataclass
class PageRun:
    """A mark a page's run hands to a fragment whose widgets are part of the page's state. Streamlit reruns a
    fragment alone with the arguments of the page's last run, this same object, so the first call is the page's
    run (which bound its state before the fragment) and every later call is the fragment's own rerun, which
    must `bind` itself for the URL to follow its widgets."""

    page_ran: bool = True

    def fragment_rerun(self) -> bool:
        first, self.page_ran = self.page_ran, False
        return not first


# --- the sidebar's model (every page) ----------------------------------------------------------------------

def model_from_url(params: Mapping[str, Any]) -> str | None:
    """The checkpoint name a link asks for (the picker checks that it exists)."""
    value = _last(params.get(MODEL_KEY))
    return value[:MAX_MODEL_NAME] if value and value.strip() else None


def model_to_url(model: str) -> dict[str, str]:
    return {MODEL_KEY: model[:MAX_MODEL_NAME]}


# === every page's state, declared once ===================================================================

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
    # the single-head and model views read by words (a word's pieces joined); kept while a view without the toggle
    # shows and across pages (issue 63: Streamlit drops an undrawn toggle's value)
    words: bool = url_field(False, url="words", widget="attn_words", parse=flag)


# --- the birthplace probe ----------------------------------------------------------------------------------

PROBE_TABS = {"ask": "Ask", "fabricate": "Fabricate", "dev": "Dev set", "edit": "Edit"}  # URL value -> tab label


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


# --- the Errors page ---------------------------------------------------------------------------------------

ERRORS_SOURCES = {"bundled": "bundled test file", "upload": "upload a file", "folder": "a file in a server folder"}
ERRORS_VIEWS = {"examples": "Examples", "slices": "Slices", "calibration": "Calibration", "compare": "Two models",
                "documents": "Documents", "tokens": "Tokens"}
ERRORS_OUTCOMES = ("all", "right", "wrong")
ERRORS_SORTS = ("line", "loss", "p(gold)", "p(predicted)", "pieces", "text", "confidence")
ERRORS_UNITS = ("line", "file")
MAX_ERRORS_TEXT = 500


@dataclass(frozen=True)
class ErrorsState(_Replace):
    """The evaluation file (bundled name, or a file in an allowed server folder; an upload is not in links), the
    view, the table's filters and sort, the selected and pinned examples, the slice pattern, the model compared,
    and for language models the document, the piece clicked and what a document is."""

    source: str = url_field("bundled", url="err_source", widget="err_source", parse=one_of(ERRORS_SOURCES))
    file: str | None = url_field(url="err_file", widget="err_file", parse=short_name(MAX_MODEL_NAME))
    folder: str = url_field("", url="err_folder", widget="err_folder", parse=free_text(1024))
    path: str | None = url_field(url="err_path", widget="err_path", parse=short_name(MAX_MODEL_NAME))
    paths: tuple[str, ...] = url_field((), url="err_paths", widget="err_paths", parse=names, show=show_names)  # LMs
    view: str = url_field("examples", url="err_view", widget="err_view", parse=one_of(ERRORS_VIEWS))
    gold: tuple[str, ...] = url_field((), url="err_gold", widget="err_gold", parse=names, show=show_names)
    predicted: tuple[str, ...] = url_field((), url="err_pred", widget="err_pred", parse=names, show=show_names)
    outcome: str = url_field("all", url="err_outcome", widget="err_outcome", parse=one_of(ERRORS_OUTCOMES))
    search: str = url_field("", url="err_search", widget="err_search", parse=free_text(MAX_ERRORS_TEXT))
    sort: str = url_field("line", url="err_sort", widget="err_sort", parse=one_of(ERRORS_SORTS))
    descending: bool = url_field(False, url="err_desc", widget="err_desc", parse=flag)
    example: int | None = url_field(url="err_example", parse=whole_number())
    pins: tuple[str, ...] = url_field((), url="err_pins", parse=names, show=show_names)  # example numbers
    edit: str | None = url_field(url="err_edit", widget="err_edit", parse=free_text(MAX_ERRORS_TEXT))
    pattern: str = url_field("", url="err_pattern", widget="err_pattern", parse=free_text(MAX_ERRORS_TEXT))
    regex: bool = url_field(False, url="err_regex", widget="err_regex", parse=flag)
    compare: str | None = url_field(url="err_vs", widget="err_vs", parse=short_name(MAX_MODEL_NAME))
    attention: bool = url_field(False, url="err_attn", widget="err_attention", parse=flag)  # the example's
    layer: int = url_field(0, url="err_layer", widget="err_layer", parse=INDEX)
    head: int = url_field(0, url="err_head", widget="err_head", parse=INDEX)
    unit: str = url_field("line", url="err_unit", widget="err_unit", parse=one_of(ERRORS_UNITS))
    document: int | None = url_field(url="err_doc", parse=whole_number())
    token: int | None = url_field(url="err_token", parse=whole_number())
    piece_layer: int = url_field(0, url="err_piece_layer", widget="err_piece_layer", parse=INDEX)


# --- the Representations page (probes, the embedding map) ----------------------------------------------------

REP_SOURCES = {"world": "the birthplace world", "file": "a bundled LABEL<TAB>TEXT file",
               "upload": "your LABEL<TAB>TEXT file", "tags": "your token tag file"}
REP_POSITIONS = ("prompt", "span", "name", "last", "word", "piece")  # core.lens.probes' WORLD_/FILE_/TAG_POSITIONS
REP_LABELS = ("country", "place")
REP_COLOURS = {"label": "label", "prediction": "the probe's prediction (right / wrong)"}
REP_VIEWS = {"probes": "Probes", "map": "Embedding map", "features": "Features"}  # URL value -> tab label


@dataclass(frozen=True)
class RepresentationsState(_Replace):
    """The label source and, for the world, its folder and label; where the state is read; the bundled file; the
    layer the map draws (None: the last) and what colours it; the tab. An uploaded file is not in links."""

    source: str = url_field("world", url="rep_source", widget="rep_source", parse=one_of(REP_SOURCES))
    world: str = url_field("knowledge", url="rep_world", widget="rep_world", parse=short_name(MAX_MODEL_NAME))
    label: str = url_field("country", url="rep_label", widget="rep_label", parse=one_of(REP_LABELS))
    at: str = url_field("prompt", url="rep_at", widget="rep_at", parse=one_of(REP_POSITIONS))
    file: str = url_field("knowledge/names_test.tsv", url="rep_file", widget="rep_file",
                          parse=short_name(MAX_MODEL_NAME))
    layer: int | None = url_field(url="rep_layer", widget="rep_layer", parse=INDEX)
    colour: str = url_field("label", url="rep_colour", widget="rep_colour", parse=one_of(REP_COLOURS))
    view: str = url_field("probes", url="rep_view", widget="rep_view", parse=one_of(REP_VIEWS), labels=REP_VIEWS)
