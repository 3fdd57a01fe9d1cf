"""The attention page's query-key view: why one weight is what it is (core.lens.query_key), for the page's
layer, head and query token and a key token; on long inputs over the window of tokens (pages.attention_window).
Not a page (app.py lists pages explicitly)."""

from __future__ import annotations

import streamlit as st

from core.figures import query_key as figs
from core.lens import attention as av
from core.lens import query_key as qk
from core.model.positional import scheme_label
from pages.attention_window import move_to, window_controls
from pages.charts import show_figure
from pages.model_loading import load_checkpoint
from pages.model_picker import selected_info
from pages.shared_caches import figure

POSITION_NOTES = {  # how the model's positional scheme enters q and k (or the scores), by scheme name
    "rope": "q and k are shown after RoPE rotated each pair of dimensions by the token's position, as the "
            "product uses them.",
    "alibi": "ALiBi adds its bias after the product (minus the head's slope times the distance), the '+' line.",
    "none": "This model has no positional encoding; only the causal mask, if any, knows about order.",
}
ADDED_TO_EMBEDDINGS = "This model's positions were added to the token embeddings, so q and k already carry them."


def _select(label: str, key: str, count: int, default: int, tokens: list[str], **kwargs) -> int:
    st.session_state[key] = av.clip_index(st.session_state.get(key), count, default)
    return st.selectbox(label, range(count), key=key, format_func=lambda i: f"{i}: {tokens[i]}", **kwargs)


def _steps_text(run: av.AttentionRun, row: qk.QueryKeyRow, key: int, bias_name: str) -> str:
    steps = qk.weight_steps(row, key, bias_name)
    lines = [f"{step.what:<52} {step.value:>12.6f}" for step in steps]
    shown = run.attention[row.layer, row.head, row.query, key]
    lines.append(f"{'weight in the head view (the trace)':<52} {shown:>12.6f}")
    return "\n".join(lines)


def show_query_key(run: av.AttentionRun, run_key: tuple, layer: int, head: int, name: str) -> None:
    try:
        record = qk.queries_keys_of(run.queries_keys, layer)
    except qk.QueryKeyError as exc:
        st.info(str(exc))
        return
    loaded = load_checkpoint(selected_info())
    positional = str(getattr(loaded.config, "positional", "")) if loaded is not None else ""
    tokens, n = run.tokens, run.n_tokens
    pick = st.columns(2)
    with pick[0]:
        query = _select("Query token", "attn_token", n, n - 1, tokens,  # a new query: its best key, in view
                        on_change=lambda: st.session_state.update(attn_key=None, attn_window=None))
    row = qk.decompose(record, run.allowed[query], layer, head, query)
    with pick[1]:
        key = _select("Key token", "attn_key", n, row.best_key(), tokens,
                      on_change=lambda: move_to(st.session_state["attn_key"], n))
    st.code(f"layer {layer}, head {head}: query {query} '{tokens[query]}' → key {key} '{tokens[key]}'\n"
            + _steps_text(run, row, key, f"{scheme_label(positional)} bias"), language=None)
    positions = window_controls(tokens, around=key) or list(range(n))
    labels = [tokens[p] for p in positions]
    chosen = positions.index(key) if key in positions else None
    shared = (run_key, layer, head, query)  # figures shared by every session on the same run and choices
    cells = len(positions) * (row.head_size + 1)
    show_figure(figure((*shared, "products", key, tuple(positions)), lambda: figs.products_figure(
        row.products[positions], row.weights[positions], row.q, row.keys[positions], labels, chosen,
        row.allowed[positions], title=f"Each key's weight, and q_{query}·k_j per dimension"), cells),
        f"{name}-qk-L{layer}-H{head}-q{query}", key="attn_qk_products")
    st.caption(POSITION_NOTES.get(positional, ADDED_TO_EMBEDDINGS) + " " + qk.contribution_caption(row, key))
    dims, values = qk.top_dimensions(row, key)
    show_figure(figure((*shared, "top", key), lambda: figs.top_dimensions_figure(
        dims, values, title=f"Key {key}: the {len(dims)} largest parts of q·k"), len(dims)),
        f"{name}-qk-top-L{layer}-H{head}-q{query}-k{key}", key="attn_qk_top")
    show_figure(figure((*shared, "vectors", tuple(positions)), lambda: figs.vectors_figure(
        row.q, row.keys[positions], tokens[query], labels,
        title=f"q_{query} and every key k_j (layer {layer}, head {head})"), cells),
        f"{name}-qk-vectors-L{layer}-H{head}-q{query}", key="attn_qk_vectors")
