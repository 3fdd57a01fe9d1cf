"""The positional page's tabs (pages/positional.py runs only the open one) and their caches: the encodings
(tables, similarity, ALiBi, RoPE), one sentence through each model, their training, and train short, test long.

Not a page itself (app.py lists pages explicitly). Data are cached with st.cache_data on (checkpoint
path, modification time, inputs); figures with st.cache_resource on the same keys, because a cached
plotly Figure is read-only and pickling it back costs as much as building it.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import streamlit as st

from core.figures import positional as figs
from core.figures.attention import attention_heatmap
from core.figures.common import figure_title
from core.lens import positional as pv
from core.lens.extrapolation.plan import ExtrapolationUnit, planned_work, run_extrapolation, unit_work
from core.lens.extrapolation.recorded import covers, recorded_scores
from core.lens.extrapolation.report import SPREAD_COLUMN, extrapolation_rows, extrapolation_summary, variant_labels
from core.lens.extrapolation.scoring import (
    DEFAULT_LIMITS,
    EXTRAPOLATION_FACTORS,
    EXTRAPOLATION_PROTOCOLS,
    PROTOCOL_DESCRIPTIONS,
    SPREAD_PARTS,
    DevText,
    ExtrapolationError,
    LengthScore,
    family_dev_text,
    score_length,
    token_stream,
)
from core.lens.perplexities import AtOne, positional_sentence, trainer_dev
from core.model.positional import scheme_label
from core.text import markdown_escape
from ui.display import show_figure, within_limit
from ui.shared_caches import by_name, load_checkpoint

SENTENCE_CHARS, DEV_TEXT_CHARS = 1000, 200_000  # what the sentence and the pasted dev text boxes read


def mtime(info) -> float:
    return Path(info.path).stat().st_mtime


def stamp(infos) -> tuple[tuple[str, float], ...]:
    return tuple((str(i.path), mtime(i)) for i in infos)


@by_name
@st.cache_data(show_spinner=False, max_entries=64)
def sentence_run(path: str, modified: float, text: str, limit: int, _loaded) -> pv.SentenceAttention:
    return pv.sentence_attention(_loaded.model, _loaded.tokenizer, text, limit)


@by_name
@st.cache_resource(show_spinner=False, max_entries=32)  # figures are read-only: shared, never copied
def encoding_figures(length: int, dim: int, n_head: int, learned_key: tuple | None, learned_name, _table):
    sinusoid, alibi = pv.sinusoidal_values(length, dim), pv.alibi_view(n_head, length)
    panels = pv.similarity_panels(sinusoid, _table, learned_name, alibi, length, dim)
    shown = min(length, 64)
    return dict(
        sin=figs.position_table_heatmap(sinusoid, f"Sinusoidal table ({length} x {dim})"),
        learned=None if _table is None else figs.position_table_heatmap(
            _table, f"Learned table of {learned_name} ({_table.shape[0]} x {_table.shape[1]})"),
        similarity=[(p, None if p.matrix is None else figs.position_matrix_heatmap(
            p.matrix, p.title, p.value, zmin=p.zmin, zmax=p.zmax)) for p in panels],
        alibi=figs.alibi_bias_figure(pv.alibi_view(n_head, shown).bias, alibi.slopes,
                                     f"{n_head} heads, first {shown} positions"),
        slopes=pd.DataFrame(alibi.slope_rows()), rope=figs.rope_distance_figure(*pv.rope_curves(dim, 4 * length), dim))


@by_name
@st.cache_resource(show_spinner=False, max_entries=32)
def sentence_figures(key: tuple, layer: int, head: int, _runs):
    """One map a row, on one colour scale: side by side at 1024x768 each plot had ~70 px (~135 px with shared
    labels and colour bar); stacked it has ~350 px."""
    maps, series = [], []
    top = max(float(run.attention[layer, head].max()) for _, run in _runs)
    for m, run in _runs:
        label = figure_title(f"{scheme_label(m.config.get('positional', ''))}, layer {layer}, head {head}", m.name,
                             key[1])  # the model and the sentence, also in an exported PNG (issue 63)
        maps.append((m.name, attention_heatmap(run.attention[layer, head], run.tokens, run.allowed, title=label,
                                               height=460, zmax=top)))
        distances, means = pv.attention_by_distance(run.attention, run.allowed)
        series.append((scheme_label(m.config.get("positional", "")), m.config.get("positional", ""), distances,
                       means[layer]))  # short panel titles: the maps above name the checkpoints
    return maps, figs.attention_distance_figure(series, figure_title(f"Attention by distance, layer {layer}",
                                                                     text=key[1]))


@by_name
@st.cache_resource(show_spinner=False, max_entries=16)
def training_figure(key: tuple, metric: str, splits: tuple[str, ...], _infos):
    frame, notes = pv.training_frame(_infos)
    fig = figs.positional_training_figure(frame, [m.name for m in _infos],
                                          [m.config.get("positional", "") for m in _infos], metric, splits,
                                          title=f"Dev {metric} during training")
    return fig, pv.training_table(frame, _infos), notes


def tables(shown) -> None:
    left, right = st.columns(2)
    with left:
        show_figure(shown["sin"], "sinusoidal-table", key="pos_sin_table")
        st.markdown(r"$PE_{p,2i} = \sin(p / 10000^{2i/d})$ and $PE_{p,2i+1} = \cos(p / 10000^{2i/d})$: "
                    "fast waves in the first dimensions, slow ones in the last.")  # inline math wraps
    with right:
        if shown["learned"] is not None:
            show_figure(shown["learned"], "learned-table", key="pos_learned_table")
            st.caption("model.pos.table as training left it; one row per position up to the block size and "
                       "nothing past it.")
        else:
            st.info("No checkpoint with learned positions is loaded, so there is no learned table to show.")


def similarity(shown) -> None:
    panels = shown["similarity"]
    for row in (panels[:2], panels[2:]):
        for column, (panel, fig) in zip(st.columns(2), row):
            with column:
                if fig is None:
                    st.info("No learned table loaded.")
                    continue
                show_figure(fig, f"similarity-{panel.key}", key=f"pos_sim_{panel.key}")
                if panel.note:
                    st.caption(panel.note)


def alibi(shown) -> None:
    show_figure(shown["alibi"], "alibi-biases", key="pos_alibi")
    st.markdown(r"Added to $q \cdot k / \sqrt{d}$ before the softmax, not scaled by $1/\sqrt{d}$ (Press et "
                r"al.). The slopes are a geometric sequence starting at $2^{-8/n}$; for $n$ not a power of two, "
                "those of the nearest smaller power of two, then every other slope of the next one.")
    st.dataframe(shown["slopes"], hide_index=True)


def rope(shown) -> None:
    show_figure(shown["rope"], "rope-distance", key="pos_rope")
    st.caption("A query at position m and a key at n, both rotated: their dot product depends on m - n only. "
               "Right: Su et al.'s long-term decay bound (their figure 2 uses d = 128). Distances up to 4x the "
               "chosen length, the range of the extrapolation test.")


def encodings(section: str, infos, members) -> None:
    """One of the tabs about the encodings themselves (tables, similarity, ALiBi, RoPE): one or two
    charts each, so a tab draws quickly on a projector laptop."""
    c1, c2, c3 = st.columns(3)
    length = c1.slider("Length (positions)", 8, 256, step=8, key="pos_length")
    dim = c2.slider("Dimension d (model width; RoPE: head size)", 8, 256, step=8, key="pos_dim")
    n_head = int(c3.number_input("ALiBi heads", 1, 16, key="pos_heads",
                                 help="Non-powers of two get Press et al.'s interleaved slopes."))
    table, name, key = None, None, None
    learned_infos = [i for i in infos if i.config.get("positional") == "learned"]
    if learned_infos and section in ("tables", "similarity"):
        names = [i.name for i in learned_infos]
        ours = [n for n in names if n in {m.name for m in members}]  # the compared set's own table first
        name = st.selectbox("Learned table from", names, index=names.index(ours[0]) if ours else 0,
                            key="pos_learned_source")
        source = learned_infos[names.index(name)]
        loaded = load_checkpoint(source)
        table = pv.learned_table(loaded.model) if loaded else None
        key = (str(source.path), mtime(source)) if table is not None else None
    shown = encoding_figures(length, dim, n_head, key, name, table)
    {"tables": tables, "similarity": similarity, "alibi": alibi, "rope": rope}[section](shown)


def sentence(loaded) -> None:
    config = loaded[0][1].config
    text = within_limit(st.text_input("Sentence", key="pos_text"), SENTENCE_CHARS, "The sentence")
    c1, c2 = st.columns(2)
    layer = c1.selectbox("Layer", range(config.n_layer), key="pos_layer")
    head = c2.selectbox("Head", range(config.n_head), key="pos_head")
    runs = []
    for m, lc in loaded:
        try:
            runs.append((m, sentence_run(str(m.path), mtime(m), text, config.block_size, lc)))
        except pv.SentenceError as exc:
            st.warning(str(exc))
            return
    first = runs[0][1]
    if first.unknown:  # the unit is the model's own (character, word, piece): the bundled lm-* read pieces
        unit = loaded[0][1].tokenizer.unit
        st.warning(f"{len(first.unknown)} {unit}(s) are not in the vocabulary; they are read as PAD.")
        st.text("Not in the vocabulary: " + " ".join(first.unknown[:20]))
    if first.cut:
        st.caption(f"{first.cut} token(s) past the block size ({config.block_size}) are left out.")
    maps, by_distance = sentence_figures((stamp(m for m, _ in loaded), text), layer, head, runs)
    st.caption(f"Layer {layer}, head {head} of each model, one under another, on one colour scale.")
    for k, (name, fig) in enumerate(maps):
        show_figure(fig, f"{name}-L{layer}-H{head}", key=f"pos_map_{k}")
    show_figure(by_distance, "attention-by-distance", key="pos_by_distance")
    st.caption("Mean attention weight at each distance i - j, over the queries that have a key that far "
               "back. A steep fall at short distances is a head that looks locally.")


def training(loaded) -> None:
    c1, c2 = st.columns(2)
    metric = c1.radio("Metric", ["loss", "perplexity"], horizontal=True, key="pos_metric")
    splits = ("val", "train") if c2.checkbox("Also the training curve (per batch)", key="pos_train") else ("val",)
    infos = [m for m, _ in loaded]
    fig, table, notes = training_figure(stamp(infos), metric, splits, infos)
    for note in notes:
        st.caption(markdown_escape(note))
    show_figure(fig, "positional-training", key="pos_training")
    st.dataframe(table.style.format(precision=4, na_rep="–"), hide_index=True)
    st.caption("Train loss is the last logged batch; train perplexity is exp of it. Dev = the split training "
               "validated on.")


# --- train short, test long --------------------------------------------------------------------------------
# `core.lens.extrapolation.run_extrapolation` (the CLI's runner) scores every (model, protocol, length) with
# `score_length` through a cache keyed on (checkpoint path, modification time, text, settings), so a result
# is computed once per server process and a later visit shows it at once; a progress bar shows from the
# first unit while new ones run. Scores recorded in the checkpoints (`core.lens.extrapolation.recorded`, written
# by `make checkpoints`) for this very text and these weights are read instead of computed; when they cover the
# default settings for every model, the tab shows the results on its first visit, before any click.


SCORES_KEPT = 1024


@st.cache_resource(show_spinner=False)
def _scores() -> dict:
    """Every length score computed in this server process, shared by all sessions: (path, modification time,
    text digest, predictions cap, protocol, factor, length) -> LengthScore. A plain store rather than
    st.cache_data: the scorer draws its progress (and a Stop click interrupts it there), which a cached function
    may not do."""
    return {}


def length_score(path: str, modified: float, text: str, max_tokens: int | None, protocol: str, factor: float,
                 length: int, loaded, progress=None) -> tuple[LengthScore, bool]:
    """(the score, whether it was computed now); `progress` (done, total) moves the bar within the unit."""
    import hashlib

    store = _scores()
    key = (path, modified, hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest(), max_tokens,
           protocol, factor, length)
    if key in store:
        return store[key], False
    ids, _ = token_stream(loaded.tokenizer, text, max_tokens)
    result = score_length(loaded.model, ids, length, protocol, factor, progress=progress)
    while len(store) >= SCORES_KEPT:
        store.pop(next(iter(store)))  # the oldest first
    store[key] = result
    return result, True


@by_name
@st.cache_data(show_spinner=False, max_entries=16)
def dev_text(key: tuple, _members) -> DevText:
    return family_dev_text(_members)


@by_name
@st.cache_data(show_spinner=False, max_entries=64)
def recorded(path: str, modified: float, text: str, _loaded) -> dict:
    # the loaded file's metadata: the folder listing is kept 30 s and may predate the record
    return recorded_scores(_loaded.metadata, text, _loaded.model)


DEFAULTS = (EXTRAPOLATION_FACTORS, EXTRAPOLATION_PROTOCOLS, DEFAULT_LIMITS["windows"],
            DEFAULT_LIMITS["sliding"])


def where_from(read: int, computed: int, work: int, reused: int = 0) -> str:
    """Where this run's numbers came from, counted while it ran."""
    if not computed and reused:
        recorded_part = f"{read} were read from the checkpoints' records and " if read else ""
        return (f"Nothing was recomputed: {recorded_part}{reused} were reused from this server's cache, computed "
                "earlier with these same settings.")
    if not computed:
        return (f"All {read} results were read from the checkpoints: `make checkpoints` recorded them "
                "(`python -m core.train.extrapolation record`) for this dev text and these weights, both checked "
                "by digest. Other settings are computed when you run them.")
    recorded_part = f"{read} of {read + computed} results were read from the checkpoints' records; " if read else ""
    return (f"{recorded_part}this run read about {work:,} token positions through the models (sliding: one "
            "forward pass of L tokens per prediction); each (model, protocol, length) is cached once computed.")


STOPPED_KEY = "pos_extrapolation_stopped"


def announce_run() -> None:
    """Run's callback: a toast in the rerun's first message, before the page is drawn again (the bar under the
    button follows once the run starts)."""
    st.toast("Running the extrapolation: its progress and a Stop button are under the Run button.")


def stop_extrapolation() -> None:
    """The Stop button: its click reruns the tab, which interrupts the run at its next progress step (Streamlit
    stops a script at its next element call when a widget changes); the settings are dropped so the rerun does
    not start the same work again. Lengths finished before the click stay cached."""
    st.session_state[STOPPED_KEY] = st.session_state.get("pos_extrapolation_settings")
    st.session_state["pos_extrapolation_settings"] = None


def show_results(loaded, text: str, recorded_split: bool, factors, protocols, max_windows: int,
                 max_sliding: int, records: dict, again: bool = False, running=None) -> None:
    """`again`: Run was clicked with the settings already shown (then the page says what it reused); `running`:
    where the bar and the Stop button go (under the Run button, where the eye is after the click)."""
    counts = {"read": 0, "computed": 0, "work": 0, "reused": 0}

    def score(info, lc, max_tokens: int | None, unit: ExtrapolationUnit, progress) -> LengthScore:
        found = records.get(info.name, {}).get((unit.protocol, unit.length, max_tokens))
        if found is not None:
            counts["read"] += 1
            return found
        result, ran = length_score(str(info.path), mtime(info), text, max_tokens, unit.protocol, unit.factor,
                                   unit.length, lc, progress)
        if ran:
            counts["computed"] += 1
            counts["work"] += unit_work(unit, max_tokens, len(text), lc.model.max_length)
        else:
            counts["reused"] += 1
        return result

    running = running or st.empty()  # the bar and the Stop button, drawn before any work and removed after it
    with running.container():
        bar = st.progress(0.0, text="Evaluating…")
        st.button("Stop", key="pos_extrapolation_stop", on_click=stop_extrapolation,
                  help="Stops the run at its next step; lengths already finished stay computed.")
    try:
        run = run_extrapolation(loaded, len(text), factors, protocols,
                                   {"windows": max_windows, "sliding": max_sliding}, recorded_split, score,
                                   lambda fraction, what: bar.progress(fraction, text=markdown_escape(what)))
    except ExtrapolationError as exc:
        running.empty()
        st.error(markdown_escape(str(exc)))
        return
    running.empty()
    if again and not counts["computed"]:
        st.info(f"These are the settings already shown: all {counts['read'] + counts['reused']} results were "
                "reused, nothing was recomputed.")
    for problem in run.problems:
        st.warning(markdown_escape(problem))
    variants = run.variants
    labels = variant_labels(variants)
    show_figure(figs.extrapolation_figure(variants, labels, list(protocols), title="Dev perplexity by length"),
                "extrapolation", key="pos_extrapolation_fig")
    st.caption(where_from(counts["read"], counts["computed"], counts["work"], counts["reused"]))
    if run.checked and not run.problems:
        st.caption("Checked: at 1x over the whole dev split, every model gives back the dev loss its "
                   "training recorded.")
    for sentence in extrapolation_summary(variants):
        st.markdown(markdown_escape(sentence))
    table = pd.DataFrame(extrapolation_rows(variants))
    # st.table wraps long column names and cells at 1024 px, where a data grid's fitted widths cut "window" and
    # "perplexity"; factor, loss and windows stay in the CSV (loss = log perplexity; factor = length / block)
    shown = table.drop(columns=["checkpoint", "positional", "factor", "loss", "windows"]).set_index("variant")
    st.table(shown.style.format({"perplexity": "{:.4f}", "tokens scored": "{:,}"}, na_rep="–"))
    st.caption(f"{SPREAD_COLUMN}: how far the perplexity moves with which predictions are scored (the "
               f"'Predictions scored' setting): the scored predictions cut into {SPREAD_PARTS} consecutive parts, "
               f"the standard error of their mean loss from the parts' spread, perplexity at loss ± 2 s.e.")
    for line in held_out_lines(loaded, variants, run.checks) if recorded_split else []:
        st.caption(markdown_escape(line))
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


def held_out_lines(loaded, variants, checks: dict[str, float]) -> list[str]:
    """What the 1x windows rows on the recorded dev split score, and why Training curves and Errors give other
    numbers (core.lens.perplexities; issue 63): one sentence for the family."""
    rows = []
    for (info, lc), variant in zip(loaded, variants):
        score = variant.score("windows", 1.0)
        dev = trainer_dev(info.name, info.metadata, lc.history)
        if dev is None or score is None or not score.applicable or variant.name != info.name:
            continue
        whole = checks.get(info.name)
        rows.append(AtOne(dev, score.perplexity, score.tokens, score.windows,
                          math.exp(min(whole, 50.0)) if whole is not None else None))
    return [positional_sentence(rows)] if rows else []


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
        text = within_limit(st.text_area("Text to evaluate on", key="pos_dev_text"), DEV_TEXT_CHARS, "The text")
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
        submitted = st.form_submit_button("Run extrapolation", type="primary", on_click=announce_run)
        if submitted:
            st.session_state["pos_extrapolation_settings"] = (tuple(factors), tuple(protocols),
                                                              int(max_windows), int(max_sliding))
            st.session_state[STOPPED_KEY] = None
    running = st.empty()  # under the button: a run's progress and its Stop button
    for protocol, description in PROTOCOL_DESCRIPTIONS.items():
        st.markdown(f"- **{protocol}**: {description}")
    settings = st.session_state.get("pos_extrapolation_settings")
    records = {info.name: recorded(str(info.path), mtime(info), text, lc)
               for info, lc in loaded} if recorded_split and (text or "").strip() else {}
    if settings is None and records and all(covers(records[info.name], lc.config.block_size, *DEFAULTS)
                                            for info, lc in loaded):
        settings = DEFAULTS  # every number is in the checkpoints: shown before any click
    again = submitted and settings == st.session_state.get("pos_extrapolation_shown")
    with results:
        if st.session_state.get(STOPPED_KEY):
            st.info("Stopped. The lengths finished before the click are kept and are not computed again; "
                    "click Run extrapolation to go on.")
        if settings and not (text or "").strip():
            st.warning("There is no text to evaluate on.")
        elif settings and (not settings[0] or not settings[1]):
            st.warning("Choose at least one length and one protocol.")
        elif settings:
            show_results(loaded, text, recorded_split, *settings, records, again=again, running=running)
            st.session_state["pos_extrapolation_shown"] = settings
    st.caption("The whole dev text: `python -m core.train.extrapolation extrapolation checkpoints/lm-*.safetensors` "
               "(add `--max-tokens N` to shorten, `--device cuda` on a GPU).")
