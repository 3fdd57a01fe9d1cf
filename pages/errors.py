"""Errors: which examples a model gets wrong, how sure it was, and what in the input drove it.

Storyboard: the sidebar's model (a classifier, a language model or a birthplace model of this lab; a Hugging Face
causal language model or ...ForSequenceClassification folder, its labels matched to id2label by name) -> an
evaluation file (a bundled test file, an upload, or a file in a folder the operator allowed) -> one
`core.lens.errors` call, cached per (checkpoint version, file hash) -> the caption computed from the result ->
one view: for classifiers and birthplace models the examples (confusion matrix, table, the selected example),
slices, calibration, two models; for language models the documents, the tokens (GLTR) and two models
(ui/errors_views.py). Every choice is in the URL (ui.page_state.ErrorsState); user text is shown only with
st.text / dataframes / escaped plotly.
"""

from __future__ import annotations

import streamlit as st

from core.data.datasets import DataError
from core.text import markdown_escape as plain
from ui import errors_views as views
from ui import page_state
from ui.kept_edits import edited_mark, with_kept_edits
from ui.model_picker import PageModels, checkpoint_picker, require_model
from ui.page_state import ERRORS_VIEWS, ErrorsState

TASK_VIEWS = {"classify": ("examples", "slices", "calibration", "compare"),
              "birthplace": ("examples", "slices", "calibration", "compare"),
              "lm": ("documents", "tokens", "compare")}

info = checkpoint_picker(PageModels(
    "errors", ("names-pretrained",), "classify",
    "classifiers show a confusion matrix; language models and birthplace models work too"))
st.title("Errors")
st.write("Which examples a model gets wrong, how sure it was, and what in the input drove it.")
loaded = require_model()
if loaded is None or info is None:
    st.stop()
if loaded.task not in TASK_VIEWS:
    st.info(plain(f"{info.name} is a {loaded.task} model; this page analyses classifiers (this lab's and Hugging "
                  "Face ...ForSequenceClassification folders), causal language models and birthplace models."))
    st.stop()
if loaded.task == "birthplace":  # an edit kept on the probe's Edit tab is this session's model here too
    edited_mark(loaded, info.name, "err_edited")
    loaded = with_kept_edits(loaded)
last = page_state.last_state(ErrorsState)
saved, notes = page_state.restore(ErrorsState)
views.seed_clicks(saved, last)
views.forget_other_task(loaded.task)
for note in notes:
    st.info(note)
source = views.choose_file(loaded)
if source is None:
    views.save_state(saved)
    st.stop()
try:
    result = views.evaluate(loaded, info.name, source)
except DataError as exc:
    st.error(plain(exc))
    views.save_state(saved)
    st.stop()
st.markdown("**" + plain(views.caption(loaded, info.name, source, result)) + "**")
if (held_out := views.held_out_line(loaded, info.name, source, result)) is not None:
    st.caption(plain(held_out))  # why Training curves gives another perplexity for the same part
choices = TASK_VIEWS[loaded.task]
if st.session_state.get("err_view") not in choices:
    st.session_state["err_view"] = choices[0]
view = st.radio("View", choices, horizontal=True, key="err_view", format_func=ERRORS_VIEWS.get,
                label_visibility="collapsed")
views.VIEWS[loaded.task, view](loaded, info.name, source, result)
views.save_state(saved)
