"""The positional page's "Train short, test long" tab (pages/positional.py runs it when open).

`core.lens.extrapolation.run_extrapolation` (the CLI's runner) scores every (model, protocol, length) with
`score_length` through a cache keyed on (checkpoint path, modification time, text, settings), so a result
is computed once per server process and a later visit shows it at once; a progress bar shows from the
first unit while new ones run. Scores recorded in the checkpoints (`core.lens.extrapolation.recorded`, written
by `make checkpoints`) for this very text and these weights are read instead of computed; when they cover the
default settings for every model, the tab shows the results on its first visit, before any click.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from core.figures import positional as figs
from core.lens.extrapolation.plan import ExtrapolationUnit, planned_work, run_extrapolation, unit_work
from core.lens.extrapolation.recorded import covers, recorded_scores
from core.lens.extrapolation.report import extrapolation_rows, extrapolation_summary, variant_labels
from core.lens.extrapolation.scoring import (
    DEFAULT_LIMITS,
    EXTRAPOLATION_FACTORS,
    EXTRAPOLATION_PROTOCOLS,
    PROTOCOL_DESCRIPTIONS,
    DevText,
    ExtrapolationError,
    LengthScore,
    family_dev_text,
    score_length,
    token_stream,
)
from core.text import markdown_escape
from pages.display import fitted_columns, show_figure
from pages.positional_views import mtime, stamp


@st.cache_data(show_spinner=False, max_entries=1024)
def length_score(path: str, modified: float, text: str, max_tokens: int | None, protocol: str, factor: float,
                 length: int, _loaded) -> LengthScore:
    ids, _ = token_stream(_loaded.tokenizer, text, max_tokens)
    return score_length(_loaded.model, ids, length, protocol, factor)


@st.cache_data(show_spinner=False, max_entries=16)
def dev_text(key: tuple, _members) -> DevText:
    return family_dev_text(_members)


@st.cache_data(show_spinner=False, max_entries=64)
def recorded(path: str, modified: float, text: str, _loaded) -> dict:
    # the loaded file's metadata: the folder listing is kept 30 s and may predate the record
    return recorded_scores(_loaded.metadata, text, _loaded.model)


DEFAULTS = (EXTRAPOLATION_FACTORS, EXTRAPOLATION_PROTOCOLS, DEFAULT_LIMITS["windows"],
            DEFAULT_LIMITS["sliding"])


def where_from(read: int, computed: int, work: int) -> str:
    """Where this run's numbers came from, counted while it ran."""
    if not computed:
        return (f"All {read} results were read from the checkpoints: `make checkpoints` recorded them "
                "(`python -m core.train.extrapolation record`) for this dev text and these weights, both checked "
                "by digest. Other settings are computed when you run them.")
    recorded_part = f"{read} of {read + computed} results were read from the checkpoints' records; " if read else ""
    return (f"{recorded_part}this run read about {work:,} token positions through the models (sliding: one "
            "forward pass of L tokens per prediction); each (model, protocol, length) is cached once computed.")


def show_results(loaded, text: str, recorded_split: bool, factors, protocols, max_windows: int,
                 max_sliding: int, records: dict) -> None:
    counts = {"read": 0, "computed": 0, "work": 0}

    def score(info, lc, max_tokens: int | None, unit: ExtrapolationUnit, _progress) -> LengthScore:
        found = records.get(info.name, {}).get((unit.protocol, unit.length, max_tokens))
        if found is not None:
            counts["read"] += 1
            return found
        counts["computed"] += 1
        counts["work"] += unit_work(unit, max_tokens, len(text), lc.model.max_length)
        return length_score(str(info.path), mtime(info), text, max_tokens, unit.protocol, unit.factor,
                            unit.length, lc)

    bar = st.progress(0.0, text="Evaluating…")
    try:  # progress within a unit is not drawn: the scorer is cached, and a cache hit draws nothing
        run = run_extrapolation(loaded, len(text), factors, protocols,
                                   {"windows": max_windows, "sliding": max_sliding}, recorded_split, score,
                                   lambda fraction, what: bar.progress(fraction, text=what))
    except ExtrapolationError as exc:
        st.error(markdown_escape(str(exc)))
        return
    bar.empty()
    for problem in run.problems:
        st.warning(markdown_escape(problem))
    variants = run.variants
    labels = variant_labels(variants)
    show_figure(figs.extrapolation_figure(variants, labels, list(protocols), title="Dev perplexity by length"),
                "extrapolation", key="pos_extrapolation_fig")
    st.caption(where_from(counts["read"], counts["computed"], counts["work"]))
    if run.checked and not run.problems:
        st.caption("Checked: at 1x over the whole dev split, every model gives back the dev loss its "
                   "training recorded.")
    for sentence in extrapolation_summary(variants):
        st.markdown(markdown_escape(sentence))
    table = pd.DataFrame(extrapolation_rows(variants))
    shown = table.drop(columns=["checkpoint", "positional"])
    st.dataframe(shown.style.format(precision=4, na_rep="–"), hide_index=True,  # "–", not "None": no number
                 column_config=fitted_columns(shown))  # widths that fit 1024 px
    st.download_button("Download CSV", table.to_csv(index=False).encode(), "extrapolation.csv", "text/csv")
    if "windows" in protocols:
        lengths = sorted({s.length for v in variants for s in v.scores if s.protocol == "windows"})
        chosen = st.selectbox("Loss by position within a window of", lengths, index=len(lengths) - 1,
                              key="pos_position_length", format_func=lambda n: f"{n} tokens")
        show_figure(figs.position_loss_figure(variants, labels, chosen,
                                              title="Loss at each position of a window (non-overlapping)"),
                    "position-loss", key="pos_position_fig")
        missing = [label for label, v in zip(labels, variants)
                   if not any(s.applicable and s.length == chosen for s in v.scores)]
        if missing:
            st.caption(markdown_escape(f"Not drawn (cannot read {chosen} tokens): {', '.join(missing)}."))


def extrapolation(loaded) -> None:
    config = loaded[0][1].config
    st.write(f"Dev perplexity at window lengths that are multiples of the training block size "
             f"({config.block_size} tokens), under two protocols (described below the settings).")
    members = [m for m, _ in loaded]
    try:
        dev = dev_text(stamp(members), members)
        st.caption(markdown_escape(f"Text: {dev.source}."))
        for note in dev.notes:
            st.warning(markdown_escape(note))
        text, recorded_split = dev.text, True
    except ExtrapolationError as exc:
        st.info(markdown_escape(f"{exc} Paste one below."))
        text = st.text_area("Text to evaluate on", max_chars=200_000, key="pos_dev_text")
        recorded_split = False
    results = st.container()  # the figure before the settings: above the fold at 1024x768
    with st.form("pos_extrapolation"):  # two rows: at 1024 px four columns cut the chosen lengths to "0."
        c1, c2 = st.columns([3, 2])
        factors = c1.multiselect("Lengths (x block size)", EXTRAPOLATION_FACTORS, DEFAULTS[0],
                                 key="pos_factors", format_func=lambda f: f"{f:g}x", wrap=True)
        protocols = c2.multiselect("Protocols", EXTRAPOLATION_PROTOCOLS, DEFAULTS[1], key="pos_protocols",
                                   wrap=True)  # in columns a multiselect keeps one row and hides the rest
        c3, c4 = st.columns(2)
        max_windows = c3.number_input("Predictions scored, windows", 16, 1_000_000, DEFAULTS[2],
                                      key="pos_max_windows")
        max_sliding = c4.number_input("Predictions scored, sliding", 16, 1_000_000, DEFAULTS[3],
                                      key="pos_max_sliding",
                                      help="One forward pass per prediction; the CLI can run the whole text.")
        limits = {"windows": max_windows, "sliding": max_sliding}
        cost = planned_work(config.block_size, factors, protocols, limits, len(text or ""))
        st.caption(f"About {cost:,} token positions through each model (a 2-core CPU reads ~15,000 a second; "
                   "results are kept, so a second run is immediate).")
        if st.form_submit_button("Run extrapolation", type="primary"):
            st.session_state["pos_extrapolation_settings"] = (tuple(factors), tuple(protocols),
                                                              int(max_windows), int(max_sliding))
    for protocol, description in PROTOCOL_DESCRIPTIONS.items():
        st.markdown(f"- **{protocol}**: {description}")
    settings = st.session_state.get("pos_extrapolation_settings")
    records = {info.name: recorded(str(info.path), mtime(info), text, lc)
               for info, lc in loaded} if recorded_split and (text or "").strip() else {}
    if settings is None and records and all(covers(records[info.name], lc.config.block_size, *DEFAULTS)
                                            for info, lc in loaded):
        settings = DEFAULTS  # every number is in the checkpoints: shown before any click
    with results:
        if settings and not (text or "").strip():
            st.warning("There is no text to evaluate on.")
        elif settings and (not settings[0] or not settings[1]):
            st.warning("Choose at least one length and one protocol.")
        elif settings:
            show_results(loaded, text, recorded_split, *settings, records)
    st.caption("The whole dev text: `python -m core.train.extrapolation extrapolation checkpoints/lm-*.safetensors` "
               "(add `--max-tokens N` to shorten, `--device cuda` on a GPU).")
