"""The Attention page's records mode: attention maps computed by the user's own code (core.lens.records),
opened on Open your model, drawn by the page's own views.

Every view that needs only the weights draws a record exactly as it draws a model's run (a record becomes an
`AttentionRun`, core.lens.records.as_run): single head, model view, one token, combine (mean, max, rollout),
compare two records, the CSV export and each chart's PNG. What needs the model itself (query·key, where the next
piece comes from, the model's output) says so in one sentence. Records live in this browser session only.
"""

from __future__ import annotations

import streamlit as st

from core.lens import attention as av
from core.lens import records as rec
from core.text import markdown_escape as plain
from ui.attention_views import VIEW_TITLES, VIEWS, index_select, show_output, show_pair, show_sanity
from ui.head_roles_view import show_recorded_roles

RECORDS_KEY = "attention_records"  # session_state: {file name: AttentionRecords}, added on Open your model
CHOICE_KEY = "rec_file"
MODEL_CHOICE = ""  # the picker's model, not a records file
NEEDS_MODEL = {
    "qk": "The query·key view needs the model's queries and keys, which a records file does not hold; open the "
          "model itself to see why a weight is what it is.",
    "where": "Where the next piece comes from needs the model's residual stream, which a records file does not "
             "hold; open the model itself for the logit lens and attribution.",
}


def opened() -> dict[str, rec.AttentionRecords]:
    return st.session_state.get(RECORDS_KEY) or {}


def add(records: rec.AttentionRecords) -> str:
    """Keep an opened file for this session (a name already taken gets a number) and choose it."""
    files = dict(opened())
    name, n = records.name, 1
    while name in files:
        n += 1
        name = f"{records.name} ({n})"
    files[name] = records
    st.session_state[RECORDS_KEY] = files
    st.session_state[CHOICE_KEY] = name
    return name


def chosen() -> tuple[str, rec.AttentionRecords] | None:
    """The sidebar's choice between the picked model and an opened records file (only when some are open)."""
    files = opened()
    if not files:
        return None
    if st.session_state.get(CHOICE_KEY) not in (MODEL_CHOICE, *files):
        st.session_state[CHOICE_KEY] = MODEL_CHOICE
    name = st.sidebar.selectbox("Attention records", [MODEL_CHOICE, *files], key=CHOICE_KEY,
                                format_func=lambda n: n or "(none: the model above)",
                                help="Files of attention maps opened on Open your model (this session only).")
    return (name, files[name]) if name else None


def _sentence_label(records: rec.AttentionRecords, i: int) -> str:
    tokens = records.records[i].tokens
    # pieces that carry their own spaces (GPT-2, SentencePiece, characters) read as text when joined as they are
    joiner = "" if any(t[:1].isspace() or t.isspace() for t in tokens) else " "
    text = joiner.join(tokens)
    return f"{i}: {text[:60]}" + (" …" if len(text) > 60 else "")


def show(name: str, records: rec.AttentionRecords) -> None:
    """The page in records mode: which sentence, which view, layer and head -> the view -> what the file says."""
    st.title("Attention")
    model = f" (model: {records.model_name})" if records.model_name else ""
    st.caption(plain(f"Attention records from {name}{model}: {len(records.records)} sentence(s), "
                     f"{records.n_layer} layer(s) x {records.n_head} head(s), computed by your own code. To see "
                     "the model picked above instead, choose (none) under Attention records in the sidebar."))
    index = 0
    if len(records.records) > 1:
        index = index_select("Sentence", "rec_sentence", len(records.records),
                             fmt=lambda i: _sentence_label(records, i))
    record = records.records[index]
    run = rec.as_run(record)
    controls = st.columns([3, 1, 1])
    view = controls[0].radio("View", list(VIEW_TITLES), key="rec_view", format_func=VIEW_TITLES.get,
                             horizontal=True)
    with controls[1]:
        layer = index_select("Layer", "rec_layer", run.n_layer)
    with controls[2]:
        head = index_select("Head", "rec_head", run.n_head)
    run_key = ("records", records.digest, index)
    if view == "qk":
        st.info(NEEDS_MODEL["qk"])
    elif view == "compare":
        show_compare(name, index, run, run_key, layer, head)
    else:
        VIEWS[view](run, run_key, layer, head, name)
    st.caption(f"Tokens as the file gives them: {run.n_tokens}")
    st.code(av.token_chips(run.tokens), language=None, wrap_lines=True)
    show_output(run.output)
    show_recorded_roles(run.attention)  # the roles a file of maps can say (issue 54)
    st.caption(NEEDS_MODEL["where"])
    show_sanity(run)
    st.download_button("Download attention (CSV)", data=lambda: av.attention_csv(run.attention, run.tokens),
                       file_name=f"{name}-{index}-attention.csv", mime="text/csv", on_click="ignore",
                       help="Long format: layer, head, query_pos, query_token, key_pos, key_token, weight.")


def show_compare(name: str, index: int, run: av.AttentionRun, run_key: tuple, layer: int, head: int) -> None:
    """Two records side by side on one colour scale, and their difference when they have the same tokens."""
    files = opened()
    pairs = [(f, i) for f, records in files.items() for i in range(len(records.records)) if (f, i) != (name, index)]
    if not pairs:
        st.info("Open a second records file (or one with several sentences) on Open your model to compare two.")
        return
    if st.session_state.get("rec_compare") not in pairs:
        st.session_state["rec_compare"] = pairs[0]
    other_file, other_index = st.selectbox("Compare with", pairs, key="rec_compare",
                                           format_func=lambda p: _sentence_label(files[p[0]], p[1]) + f" ({p[0]})")
    other_records = files[other_file]
    other = rec.as_run(other_records.records[other_index])
    other_key = ("records", other_records.digest, other_index)
    show_pair((name, run, run_key), (other_file, other, other_key), layer, head, "rec",
              "The two records have different tokens, so there is no cell-by-cell difference.")
