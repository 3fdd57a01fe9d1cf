"""The attention page's compare view: the same text through a second model, side by side on one colour
scale, and their difference when both read the same tokens. Not a page (app.py lists pages explicitly)."""

from __future__ import annotations

import streamlit as st

from core.figures import attention as figs
from core.lens import attention as av
from core.lens import token_window as tw
from pages.attention_window import window_controls
from pages.charts import show_figure
from pages.model_loading import all_checkpoints, load_checkpoint
from pages.shared_caches import attention_run, figure


def show_compare(run: av.AttentionRun, key: tuple, layer: int, head: int, name: str) -> None:
    infos = [i for i in all_checkpoints() if not i.error]
    names = [i.name for i in infos]
    if st.session_state.get("attn_compare") not in names:
        st.session_state["attn_compare"] = next((n for n in names if n != name), name)
    other_name = st.selectbox("Compare with", names, key="attn_compare")
    other_loaded = load_checkpoint(infos[names.index(other_name)])
    if other_loaded is None:
        return
    try:
        other_key, other = attention_run(other_loaded, st.session_state["attn_text"], st.session_state["attn_past"])
    except av.AttentionInputError as exc:
        st.info(str(exc))
        return
    p = window_controls(run.tokens)  # long inputs: both maps over the same positions
    pair = [(name, run, p), (other_name, other, tw.same_window(p, other.n_tokens))]
    top = max(float(r.attention[av.clip_index(layer, r.n_layer), av.clip_index(head, r.n_head)].max())
              for _, r, _ in pair)
    same = av.same_tokenisation(run, other)  # then one set of query labels serves both maps
    st.caption("Both maps on one colour scale: the bar beside the right one.")
    for side, column, (label, r, q) in zip(("left", "right"), st.columns(2), pair):
        l, h = av.clip_index(layer, r.n_layer), av.clip_index(head, r.n_head)

        def build(r=r, l=l, h=h, q=q, side=side):  # one colour bar (right) and one set of query labels (left)
            weights, allowed = tw.cut_to_window(r.attention[l, h], r.allowed, q)
            return figs.attention_heatmap(weights, r.tokens, allowed, q, zmax=top, colorbar=side == "right",
                                          query_labels=side == "left" or not same)
        with column:
            st.text(f"{label}: layer {l}, head {h}" + (" (clipped)" if (l, h) != (layer, head) else ""))
            fig = figure((key, other_key, side, layer, head, q and tuple(q), same), build, len(q or r.tokens) ** 2)
            show_figure(fig, f"{label}-L{l}-H{h}", key=f"attn_compare_chart_{side}")
    if not same:
        st.info("The two models read this text as different tokens, so there is no cell-by-cell difference.")
        return
    lo, ho = av.clip_index(layer, other.n_layer), av.clip_index(head, other.n_head)

    def difference():
        diff, allowed = av.attention_difference(run.attention[layer, head], run.allowed,
                                                other.attention[lo, ho], other.allowed)
        diff, allowed = tw.cut_to_window(diff, allowed, p)
        return figs.attention_heatmap(diff, run.tokens, allowed, p, diverging=True,
                                      title="Difference (left minus right)")
    show_figure(figure((key, other_key, "difference", layer, head, p and tuple(p)), difference,
                       len(p or run.tokens) ** 2),
                f"{name}-minus-{other_name}", key="attn_diff_chart")
