"""Attention: type a sentence, see what every head of the selected model attends to.

Storyboard: widgets -> `core.lens.attention.run_attention` (one forward pass per model content, text and
options, shared by every session: pages.shared_caches) -> `core.figures` figures (shared per run and view).
The URL (`pages.states.AttentionState`) holds the sentence, layer, head, view, options and training step, so a
copied link reopens exactly this view. User text is only ever shown through st.text / st.code / dataframes /
escaped plotly labels.
"""

from __future__ import annotations

import streamlit as st

from core.figures import attention as figs
from core.lens import attention as av
from core.lens import token_window as tw
from pages import page_state, where_from_view
from pages.attention_compare import show_compare
from pages.attention_output import show_output, show_sanity
from pages.attention_query_key import show_query_key
from pages.attention_window import window_controls
from pages.charts import show_figure
from pages.model_picker import PageModels, checkpoint_picker, require_model
from pages.shared_caches import attention_run, figure
from pages.states import COMBINE_METHODS, AttentionState
from pages.training_steps import step_slider

VIEW_TITLES = {"single": "Single head", "model": "Model view", "token": "One token", "qk": "Query·key",
               "combine": "Combine", "compare": "Compare"}
def restore_widgets(loaded) -> None:
    """Widget defaults from the page's state (pages/page_state.py: the URL on a first visit or a link, else
    this session's last state), the sentence following a newly picked model while nobody has edited it."""
    page_state.restore(AttentionState)
    default = av.default_sentence(loaded.task, loaded.tokenizer)
    previous_default = st.session_state.get("attn_default")
    if previous_default is not None and st.session_state.get("attn_text") == previous_default:
        st.session_state["attn_text"] = default  # untouched default: follow the newly picked model
    st.session_state["attn_default"] = default
    if st.session_state.get("attn_text") is None:  # no sentence in the link: the checkpoint's default
        st.session_state["attn_text"] = default


def index_select(label: str, key: str, count: int, default: int = 0, fmt=str) -> int:
    st.session_state[key] = av.clip_index(st.session_state.get(key), count, default)
    return st.selectbox(label, range(count), key=key, format_func=fmt)


def drawn(positions: list[int] | None) -> tuple[int, ...] | None:
    return None if positions is None else tuple(positions)


def show_single(run: av.AttentionRun, key: tuple, layer: int, head: int, name: str) -> None:
    p = window_controls(run.tokens)  # long inputs: only the window's rows and columns

    def build():
        weights, allowed = tw.cut_to_window(run.attention[layer, head], run.allowed, p)
        return figs.attention_heatmap(weights, run.tokens, allowed, p, title=f"Layer {layer}, head {head}")
    fig = figure((key, "single", layer, head, drawn(p)), build, len(p or run.tokens) ** 2)
    show_figure(fig, f"{name}-attention-L{layer}-H{head}", key="attn_single_chart")


def focus_single() -> None:
    st.session_state["attn_view"] = "single"


def show_model(run: av.AttentionRun, key: tuple, layer: int, head: int, name: str) -> None:
    st.caption("Every layer (rows) x head (columns) on one colour scale (the bar). Pick Layer and Head "
               "above to move the frame; the button opens the framed head on its own.")
    st.button(f"Open layer {layer}, head {head} as a single head", on_click=focus_single)
    p = window_controls(run.tokens)

    def build():
        attention, allowed = tw.cut_to_window(run.attention, run.allowed, p)
        return figs.attention_model_view(attention, allowed, (layer, head), tokens=tw.tokens_at(run.tokens, p))
    cells = run.n_layer * run.n_head * len(p or run.tokens) ** 2
    show_figure(figure((key, "model", layer, head, drawn(p)), build, cells), f"{name}-model-view",
                key="attn_model_chart")


def show_token(run: av.AttentionRun, key: tuple, layer: int, head: int, name: str) -> None:
    query = index_select("Query token", "attn_token", run.n_tokens, -1, lambda i: f"{i}: {run.tokens[i]}")
    fig = figure((key, "token", layer, query), lambda: figs.token_attention_figure(
        run.attention[layer, :, query], run.tokens, query, run.allowed[query],
        title=f"Layer {layer}: where query token {query} looks, per head"), run.n_head * run.n_tokens)
    show_figure(fig, f"{name}-token{query}-L{layer}", key="attn_token_chart")


def show_combine(run: av.AttentionRun, key: tuple, layer: int, head: int, name: str) -> None:
    method = st.radio("Combine", COMBINE_METHODS, key="attn_combine", horizontal=True,
                      format_func=av.COMBINE_TITLES.get)
    hide_first = st.checkbox("Hide the first token", key="attn_hide_first")
    hide_special = st.checkbox("Hide special tokens (PAD/MASK, [CLS]/[SEP])", key="attn_hide_special")
    keep = av.keep_mask(run, hide_first, hide_special)
    if not keep.any():
        st.info("Every token is hidden; untick an option to see the map.")
        return
    p = window_controls(run.tokens)  # long inputs: combined over every token, drawn for the window's

    def build():
        weights, allowed = av.combined_attention(run, method, layer)
        weights, allowed, positions = tw.cut_kept_to_window(*av.hide_positions(weights, allowed, keep), p)
        scope = "all layers" if method == "rollout" else f"layer {layer}"
        return figs.attention_heatmap(weights, run.tokens, allowed, positions,
                                      title=f"{av.COMBINE_TITLES[method]} ({scope}); rows renormalised")
    fig = figure((key, "combine", method, layer, hide_first, hide_special, drawn(p)), build,
                 len(p or run.tokens) ** 2)
    show_figure(fig, f"{name}-{method}", key="attn_combine_chart")


VIEWS = {"single": show_single, "model": show_model, "token": show_token, "qk": show_query_key,
         "combine": show_combine, "compare": show_compare}


info = checkpoint_picker(PageModels(
    "attention", ("lm-learned",), "lm", "language models: their heads look at different things"))
loaded = require_model()
st.title("Attention")
if info is None or loaded is None:
    st.stop()
restore_widgets(loaded)
text = st.text_area("Sentence", key="attn_text", height=68,
                    help="Type or paste any text; it is cut to what the model can read.")
controls = st.columns([3, 1, 1, 2])
view = controls[0].radio("View", list(VIEW_TITLES), key="attn_view", format_func=VIEW_TITLES.get,
                         horizontal=True)
with controls[1]:
    layer = index_select("Layer", "attn_layer", loaded.config.n_layer)
with controls[2]:
    head = index_select("Head", "attn_head", loaded.config.n_head)
if loaded.model.max_length is None:
    controls[3].checkbox("Run past the block size", key="attn_past",
                         help=f"This model's positions have no hard limit; it was trained on "
                              f"{loaded.config.block_size} tokens.")
else:
    st.session_state["attn_past"] = False
loaded = step_slider(loaded, controls[3])  # the same checkpoint at a kept training step (when it has some)
state = page_state.bind(AttentionState, page_state.last_state(AttentionState))

try:
    run_key, run = attention_run(loaded, text, state.past, view == "qk")
except av.AttentionInputError as exc:
    st.info(str(exc))
    st.stop()
for note in run.notes:
    st.info(note)
if run.unknown:
    st.warning(av.unknown_message(run.unknown, run.fallback_token))
VIEWS[view](run, run_key, layer, head, info.name)  # the figure first: above the fold on a 1024x768 projector
if run.untrained:  # in the vocabulary, so read as themselves: a note under the map, not a warning over it
    st.caption(av.untrained_message(run.untrained))
st.caption(f"How the model reads it: {run.n_tokens} tokens")
st.code(av.token_chips(run.tokens), language=None, wrap_lines=True)
show_output(run.output)
where_from_view.next_piece_view(loaded, info.name, text)
show_sanity(run)
st.download_button("Download attention (CSV)", data=lambda: av.attention_csv(run.attention, run.tokens),
                   file_name=f"{info.name}-attention.csv", mime="text/csv",
                   help="Long format: layer, head, query_pos, query_token, key_pos, key_token, weight.")
