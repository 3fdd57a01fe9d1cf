"""The positional page's tabs (pages/positional.py runs only the open one) and their caches; the
extrapolation tab is pages/positional_extrapolation.py.

Not a page itself (app.py lists pages explicitly). Data are cached with st.cache_data on (checkpoint
path, modification time, inputs); figures with st.cache_resource on the same keys, because a cached
plotly Figure is read-only and pickling it back costs as much as building it.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from core.figures import positional as figs
from core.figures.attention import attention_heatmap
from core.lens import positional as pv
from core.model.positional import scheme_label
from core.text import markdown_escape
from pages.display import show_figure
from pages.model_loading import load_checkpoint


def mtime(info) -> float:
    return Path(info.path).stat().st_mtime


def stamp(infos) -> tuple[tuple[str, float], ...]:
    return tuple((str(i.path), mtime(i)) for i in infos)


@st.cache_data(show_spinner=False, max_entries=64)
def sentence_run(path: str, modified: float, text: str, limit: int, _loaded) -> pv.SentenceAttention:
    return pv.sentence_attention(_loaded.model, _loaded.tokenizer, text, limit)


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


@st.cache_resource(show_spinner=False, max_entries=32)
def sentence_figures(key: tuple, layer: int, head: int, _runs):
    maps, series = [], []
    for m, run in _runs:
        label = f"{scheme_label(m.config.get('positional', ''))} ({m.name})"
        maps.append((m.name, attention_heatmap(run.attention[layer, head], run.tokens, run.allowed,
                                               title=f"{label}: layer {layer}, head {head}",
                                               height=520)))  # half a 1024 px screen: not a tall strip
        distances, means = pv.attention_by_distance(run.attention, run.allowed)
        series.append((scheme_label(m.config.get("positional", "")), m.config.get("positional", ""), distances,
                       means[layer]))  # short panel titles: the maps above name the checkpoints
    return maps, figs.attention_distance_figure(series, f"Attention by distance, layer {layer}")


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
    text = st.text_input("Sentence", max_chars=1000, key="pos_text")
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
    columns = st.columns(min(len(maps), 2))
    for k, (name, fig) in enumerate(maps):
        with columns[k % len(columns)]:
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
