"""Positional encodings: sinusoidal, learned, ALiBi and RoPE side by side.

Storyboard: (1) the encodings from `core.positional` via `core.positional_view` -> figures; (2) the
checkpoints whose configs differ only in `positional` (found by comparing configs) -> one sentence
through each -> attention maps and attention by distance; (3) their training histories (metadata
only); (4) train short, test long: `core.evaluate.score_length` per (model, protocol, length), each
cached on (checkpoint path, modification time, text, settings), behind a Run button.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from core import evaluate as ev
from core import positional_view as pv
from core.figures import positional as figs
from core.figures.attention import attention_heatmap
from core.positional import scheme_label
from core.text import markdown_escape
from pages.common import all_checkpoints, checkpoint_picker, load_checkpoint, selected_info, show_figure

checkpoint_picker()
st.title("Positional encodings")
st.write("Attention alone does not know word order. Four ways to tell it: add a fixed sinusoidal vector "
         "(Vaswani et al. 2017) or a learned one to each token, add a distance penalty to the attention "
         "scores (ALiBi, Press et al. 2022), or rotate queries and keys by their position (RoPE, Su et al. "
         "2021). Below: the encodings themselves, models that differ only in their encoding, and how "
         "each copes with text longer than it was trained on.")
DEFAULT_SENTENCE = "Karl Long was a British cyclist and engineer born in Leeds ."


def mtime(info) -> float:
    return Path(info.path).stat().st_mtime


@st.cache_data(show_spinner=False, max_entries=64)
def sentence_run(path: str, modified: float, text: str, limit: int, _loaded) -> pv.SentenceAttention:
    return pv.sentence_attention(_loaded.model, _loaded.tokenizer, text, limit)


@st.cache_data(show_spinner=False, max_entries=1024)
def length_score(path: str, modified: float, text: str, max_tokens: int | None, protocol: str, factor: float,
                 length: int, _loaded) -> ev.LengthScore:
    ids, _ = ev.token_stream(_loaded.tokenizer, text, max_tokens)
    return ev.score_length(_loaded.model, ids, length, protocol, factor)


infos = [i for i in all_checkpoints() if not i.error]
info = selected_info()
families = pv.positional_families([i for i in infos if pv.is_causal_lm(i)])  # by config, not by name
members = []
if families:
    index = pv.family_for(families, info.name if info else None)
    family = families[st.selectbox("Models compared", range(len(families)), index=index, key="pos_family",
                                   format_func=lambda i: families[i].describe()) if len(families) > 1
                      else 0]
    members = family.members
    st.caption(markdown_escape(family.describe() + "."))
elif info is not None and pv.is_causal_lm(info):
    members = [info]
    st.info("No checkpoints differ only in their positional encoding; sections 2-4 show the selected model "
            "alone. `make checkpoints` trains such a set (lm-learned, lm-sinusoidal, lm-alibi, lm-rope).")

# --- 1. the encodings -------------------------------------------------------------------------------
st.header("1. The encodings themselves")
c1, c2, c3 = st.columns(3)
length = c1.slider("Length (positions)", 8, 256, 64, step=8, key="pos_length")
dim = c2.slider("Dimension d (model width; RoPE: head size)", 8, 256, 128, step=8, key="pos_dim")
n_head = c3.number_input("ALiBi heads", 1, 16, 8, key="pos_heads",
                         help="Non-powers of two get Press et al.'s interleaved slopes.")
sinusoid = pv.sinusoidal_values(length, dim)
learned_infos = [i for i in infos if i.config.get("positional") == "learned"]
left, right = st.columns(2)
with left:
    show_figure(figs.position_table_heatmap(sinusoid, f"Sinusoidal table ({length} x {dim})"),
                "sinusoidal-table", key="pos_sin_table")
    st.caption("PE(p, 2i) = sin(p / 10000^(2i/d)), PE(p, 2i+1) = cos(p / 10000^(2i/d)): fast waves in the "
               "first dimensions, slow ones in the last.")
learned_table, learned_name = None, None
with right:
    if learned_infos:
        names = [i.name for i in learned_infos]
        ours = [n for n in names if n in {m.name for m in members}]  # the compared set's own table first
        learned_name = st.selectbox("Learned table from", names, index=names.index(ours[0]) if ours else 0,
                                    key="pos_learned_source")
        loaded_learned = load_checkpoint(learned_infos[names.index(learned_name)])
        learned_table = pv.learned_table(loaded_learned.model) if loaded_learned else None
    if learned_table is not None:
        show_figure(figs.position_table_heatmap(learned_table, f"Learned table of {learned_name} "
                                               f"({learned_table.shape[0]} x {learned_table.shape[1]})"),
                    "learned-table", key="pos_learned_table")
        st.caption("model.pos.table as training left it; it has one row per position up to the block size "
                   "and nothing past it.")
    else:
        st.info("No checkpoint with learned positions is loaded, so there is no learned table to show.")

st.subheader("How similar are two positions?")
alibi = pv.alibi_view(int(n_head), length)
for column, panel in zip(st.columns(4), pv.similarity_panels(sinusoid, learned_table, learned_name, alibi,
                                                              length, dim)):
    with column:
        if panel.matrix is None:
            st.info("No learned table loaded.")
            continue
        show_figure(figs.position_matrix_heatmap(panel.matrix, panel.title, panel.value, zmin=panel.zmin,
                                                zmax=panel.zmax), f"similarity-{panel.key}",
                    key=f"pos_sim_{panel.key}")
        if panel.note:
            st.caption(panel.note)

st.subheader("ALiBi: one bias matrix per head")
shown = min(length, 64)
show_figure(figs.alibi_bias_figure(pv.alibi_view(int(n_head), shown).bias, alibi.slopes,
                                  f"{int(n_head)} heads, first {shown} positions"), "alibi-biases",
            key="pos_alibi")
st.dataframe(pd.DataFrame(alibi.slope_rows()), hide_index=True)
st.caption("Added to q·k/√d before the softmax, not scaled by 1/√d (Press et al.). The slopes are a "
           "geometric sequence starting at 2^(-8/n); for n not a power of two, those of the nearest smaller "
           "power of two, then every other slope of the next one.")

st.subheader("RoPE: the score against relative distance")
show_figure(figs.rope_distance_figure(*pv.rope_curves(dim, 4 * length), dim), "rope-distance",  # dim is even
            key="pos_rope")
st.caption("A query at position m and a key at n, both rotated: their dot product depends on m - n only. "
           "Right: Su et al.'s long-term decay bound (their figure 2 uses d = 128). Distances up to 4x the "
           "chosen length, the range of the extrapolation test below.")

if not members:
    st.info("Sections 2-4 need causal language models; none is loaded. `make checkpoints` trains a set "
            "that differs only in positional encoding.")
    st.stop()
loaded = [(m, load_checkpoint(m)) for m in members]
loaded = [(m, lc) for m, lc in loaded if lc is not None]
if not loaded:
    st.stop()
config = loaded[0][1].config

# --- 2. one sentence ---------------------------------------------------------------------------------
st.header("2. The same sentence through each model")
text = st.text_input("Sentence", DEFAULT_SENTENCE, max_chars=1000, key="pos_text")
c1, c2 = st.columns(2)
layer = c1.selectbox("Layer", range(config.n_layer), key="pos_layer")
head = c2.selectbox("Head", range(config.n_head), key="pos_head")
runs, series = [], []
for m, lc in loaded:
    try:
        runs.append((m, sentence_run(str(m.path), mtime(m), text, config.block_size, lc)))
    except pv.SentenceError as exc:
        st.warning(str(exc))
        break
if runs:
    first = runs[0][1]
    if first.unknown:
        st.warning(f"{len(first.unknown)} character(s) are not in the vocabulary; they are read as PAD.")
        st.text("Not in the vocabulary: " + " ".join(first.unknown[:20]))
    if first.cut:
        st.caption(f"{first.cut} token(s) past the block size ({config.block_size}) are left out.")
    columns = st.columns(min(len(runs), 2))
    for k, (m, run) in enumerate(runs):
        with columns[k % len(columns)]:
            label = scheme_label(m.config.get("positional", ""))
            show_figure(attention_heatmap(run.attention[layer, head], run.tokens, run.allowed,
                                              title=f"{label} ({m.name}): layer {layer}, head {head}"),
                        f"{m.name}-L{layer}-H{head}", key=f"pos_map_{k}")
        distances, means = pv.attention_by_distance(run.attention, run.allowed)
        series.append((f"{label} ({m.name})", m.config.get("positional", ""), distances, means[layer]))
    show_figure(figs.attention_distance_figure(series, f"Attention by distance, layer {layer}"),
                "attention-by-distance", key="pos_by_distance")
    st.caption("Mean attention weight at each distance i - j, over the queries that have a key that far "
               "back. A steep fall at short distances is a head that looks locally.")

# --- 3. training ------------------------------------------------------------------------------------
st.header("3. Their training")
frame, notes = pv.training_frame([m for m, _ in loaded])
for note in notes:
    st.caption(markdown_escape(note))
c1, c2 = st.columns(2)
metric = c1.radio("Metric", ["loss", "perplexity"], horizontal=True, key="pos_metric")
splits = ("val", "train") if c2.checkbox("Also the training curve (per batch)", key="pos_train") else ("val",)
names, schemes = [m.name for m, _ in loaded], [m.config.get("positional", "") for m, _ in loaded]
show_figure(figs.positional_training_figure(frame, names, schemes, metric, splits,
                                           title=f"Dev {metric} during training"), "positional-training",
            key="pos_training")
st.dataframe(pv.training_table(frame, [m for m, _ in loaded]), hide_index=True)
st.caption("Train loss is the last logged batch; train perplexity is exp of it. Dev = the split training "
           "validated on.")

# --- 4. extrapolation -------------------------------------------------------------------------------
st.header("4. Train short, test long")
st.write(f"Dev perplexity at window lengths that are multiples of the training block size "
         f"({config.block_size} tokens). Two protocols:")
for protocol, description in ev.PROTOCOL_DESCRIPTIONS.items():
    st.markdown(f"- **{protocol}**: {description}")
try:
    dev = pv.family_dev_text([m for m, _ in loaded])
    st.caption(markdown_escape(f"Text: {dev.source}."))
    for note in dev.notes:
        st.warning(markdown_escape(note))
    dev_text, recorded_split = dev.text, True
except ev.ExtrapolationError as exc:
    st.info(markdown_escape(f"{exc} Paste one below."))
    dev_text = st.text_area("Text to evaluate on", max_chars=200_000, key="pos_dev_text")
    recorded_split = False
with st.form("pos_extrapolation"):
    c1, c2, c3, c4 = st.columns(4)
    factors = c1.multiselect("Lengths (x block size)", ev.EXTRAPOLATION_FACTORS, ev.EXTRAPOLATION_FACTORS,
                             key="pos_factors", format_func=lambda f: f"{f:g}x")
    protocols = c2.multiselect("Protocols", ev.EXTRAPOLATION_PROTOCOLS, ev.EXTRAPOLATION_PROTOCOLS,
                               key="pos_protocols")
    max_windows = c3.number_input("Predictions scored, windows", 16, 1_000_000, 4096, key="pos_max_windows")
    max_sliding = c4.number_input("Predictions scored, sliding", 16, 1_000_000, 512, key="pos_max_sliding",
                                  help="One forward pass per prediction; the CLI can run the whole text.")
    limits = {"windows": max_windows, "sliding": max_sliding}
    cost = pv.planned_work(config.block_size, factors, protocols, limits, len(dev_text or ""))
    st.caption(f"About {cost:,} token positions through each model (a 2-core CPU reads ~15,000 a second).")
    if st.form_submit_button("Run extrapolation", type="primary"):
        st.session_state["pos_extrapolation_settings"] = (tuple(factors), tuple(protocols),
                                                          int(max_windows), int(max_sliding))
settings = st.session_state.get("pos_extrapolation_settings")
if settings and not (dev_text or "").strip():
    st.warning("There is no text to evaluate on.")
elif settings and (not settings[0] or not settings[1]):
    st.warning("Choose at least one length and one protocol.")
elif settings:
    factors, protocols, max_windows, max_sliding = settings

    def score(info, lc, max_tokens: int | None, unit: pv.ExtrapolationUnit) -> ev.LengthScore:
        return length_score(str(info.path), mtime(info), dev_text, max_tokens, unit.protocol, unit.factor,
                            unit.length, lc)

    bar = st.progress(0.0, text="Evaluating…")
    try:
        run = pv.run_extrapolation(loaded, len(dev_text), factors, protocols,
                                   {"windows": max_windows, "sliding": max_sliding}, recorded_split, score,
                                   lambda fraction, what: bar.progress(fraction, text=what))
    except ev.ExtrapolationError as exc:
        st.error(markdown_escape(str(exc)))
        st.stop()
    bar.empty()
    st.caption(f"This run read about {run.work:,} token positions through the models (sliding: one forward "
               "pass of L tokens per prediction); each (model, protocol, length) is cached once computed.")
    for problem in run.problems:
        st.warning(markdown_escape(problem))
    if run.checked and not run.problems:
        st.caption("Checked: at 1x over the whole dev split, every model gives back the dev loss its "
                   "training recorded.")
    variants = run.variants
    labels = ev.variant_labels(variants)
    show_figure(figs.extrapolation_figure(variants, labels, list(protocols), title="Dev perplexity by length"),
                "extrapolation", key="pos_extrapolation_fig")
    for sentence in ev.extrapolation_summary(variants):
        st.markdown(markdown_escape(sentence))
    table = pd.DataFrame(ev.extrapolation_rows(variants))
    st.dataframe(table.drop(columns=["checkpoint", "positional"]), hide_index=True)
    st.download_button("Download CSV", table.to_csv(index=False).encode(), "extrapolation.csv", "text/csv")
    if "windows" in protocols:
        lengths = sorted({s.length for v in variants for s in v.scores if s.protocol == "windows"})
        chosen_length = st.selectbox("Loss by position within a window of", lengths, index=len(lengths) - 1,
                                     key="pos_position_length", format_func=lambda n: f"{n} tokens")
        show_figure(figs.position_loss_figure(variants, labels, chosen_length,
                                             title="Loss at each position of a window (non-overlapping)"),
                    "position-loss", key="pos_position_fig")
        missing = [label for label, v in zip(labels, variants)
                   if not any(s.applicable and s.length == chosen_length for s in v.scores)]
        if missing:
            st.caption(markdown_escape(f"Not drawn (cannot read {chosen_length} tokens): "
                                          f"{', '.join(missing)}."))
st.caption("The whole dev text: `python -m core.evaluate extrapolation checkpoints/lm-*.safetensors` "
           "(add `--max-tokens N` to shorten, `--device cuda` on a GPU).")
