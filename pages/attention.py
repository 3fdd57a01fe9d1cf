"""Attention: type a sentence, see what every head of the selected model attends to.

Storyboard: widgets -> `core.lens.attention.run_attention` (one forward pass per model content, text and
options, shared by every session: ui.shared_caches) -> the chosen view (ui.attention_views: `core.figures`
figures, shared per run and view) -> the model's output and the sanity checks under it. The view and "Where the
next piece comes from" are fragments: their own widgets rerun them alone, not the sidebar or the run (issue 45).
The URL (`ui.page_state.AttentionState`) holds the sentence, layer, head, view, options and training step, so a
copied link reopens exactly this view. User text is only ever shown through st.text / st.code / dataframes /
escaped plotly labels.
"""

from __future__ import annotations

import streamlit as st

from core.lens import attention as av
from core.lens.training_pieces import corpus_cuts
from core.text import markdown_escape
from ui import attention_records, head_roles_view, page_state, where_from_view
from ui.attention_views import VIEW_TITLES, VIEWS, index_select, show_output, show_sanity, words_toggle
from ui.model_picker import PageModels, checkpoint_picker, require_model
from ui.page_state import AttentionState
from ui.shared_caches import attention_run, derived, training_words
from ui.training_steps import step_slider


def restore_widgets(loaded) -> None:
    """Widget defaults from the page's state (ui/page_state.py: the URL on a first visit or a link, else
    this session's last state), the sentence following a newly picked model while nobody has edited it."""
    page_state.restore(AttentionState)
    # once per loaded model, not per rerun (it tokenizes the candidate sentences)
    default = derived(loaded, "default sentence", lambda: av.default_sentence(loaded.task, loaded.tokenizer))
    previous_default = st.session_state.get("attn_default")
    if previous_default is not None and st.session_state.get("attn_text") == previous_default:
        st.session_state["attn_text"] = default  # untouched default: follow the newly picked model
    st.session_state["attn_default"] = default
    if st.session_state.get("attn_text") is None:  # no sentence in the link: the checkpoint's default
        st.session_state["attn_text"] = default


@st.fragment
def view_fragment(view: str, run: av.AttentionRun, run_key: tuple, layer: int, head: int, name: str,
                  page_run: page_state.PageRun) -> None:
    """The chosen view, rerun alone when one of its own widgets changes (the query and key tokens, the window of
    a long input, the combine options, the second model): the sidebar, the run and what is drawn under the figure
    are not asked again. On such a rerun the page's `bind` did not run, so the URL is brought up to date here."""
    if page_run.fragment_rerun():
        page_state.bind(AttentionState, page_state.last_state(AttentionState))
    VIEWS[view](run, run_key, layer, head, name)


@st.fragment
def next_piece_fragment(loaded, name: str, text: str) -> None:
    """"Where the next piece comes from": opened and closed alone, without the page's run and view."""
    where_from_view.next_piece_view(loaded, name, text)


info = checkpoint_picker(PageModels(
    "attention", ("lm-learned",), "lm", "language models: their heads look at different things"))
if (records := attention_records.chosen()) is not None:  # a file of attention maps from Open your model
    attention_records.show(*records)
    st.stop()
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
# under the View radio: nothing else goes into that column, so no placeholder is held for it (one element less a
# rerun, issue 45)
words_toggle(run, view, controls[0])
view_fragment(view, run, run_key, layer, head, info.name, page_state.PageRun())  # the figure first (above the fold)
if run.untrained:  # in the vocabulary, so read as themselves: a note under the map, not a warning over it
    words = training_words(loaded)  # how the training text was cut where these pieces' letters occur
    st.caption(av.untrained_message(run.untrained, cuts=corpus_cuts(loaded.tokenizer, run.untrained, words)
                                    if words else None))
st.caption(f"How the model reads it: {run.n_tokens} tokens")
st.code(av.token_chips(run.tokens, run.characters), language=None, wrap_lines=True)  # a character's byte pieces once
reading = av.reading_sentence(loaded.metadata, loaded.tokenizer, run)
if reading:
    st.write(markdown_escape(reading))  # file names from the checkpoint: text, never Markdown
show_output(run.output)
head_roles_view.show_head_roles(loaded, view, info.name)  # what each head does, on repeated random tokens (issue 54)
next_piece_fragment(loaded, info.name, text)
show_sanity(run)
st.download_button("Download attention (CSV)", data=lambda: av.attention_csv(run.attention, run.tokens),
                   file_name=f"{info.name}-attention.csv", mime="text/csv", on_click="ignore",
                   help="Long format: layer, head, query_pos, query_token, key_pos, key_token, weight.")
