"""The birthplace probe's Dev set tab (pages/probe.py is the storyboard): assignment-exact accuracy per
model, evidence categories, reliability, and every question with filters, one example at a time.

Not a page (app.py lists pages explicitly). The evaluation is cached per (checkpoint file, modification
time, question-file hash, corpus files).
"""

from __future__ import annotations

import hashlib

import streamlit as st

from core.figures import probe as viz
from core.figures.probe import PLAIN_CATEGORIES
from core.io.tables import table_csv
from core.lens.probe import corpus, dev_set
from core.lens.probe.questions import predictions_text, read_question_file
from core.text import markdown_escape as plain
from pages import where_from_view
from pages.display import EXPANDER_WIDTH, fitted_columns, show_figure, shown_table
from pages.model_loading import model_version
from pages.probe_example import CONFIDENCE, PERCENT, Probe, pick_focus, show_example, warn_unknown
from pages.probe_knowledge import knowledge_section


@st.cache_data(show_spinner=False, max_entries=32)
def cached_analysis(path: str, modified: float, content_hash: str, stamp: tuple, label: str, _loaded, _pairs,
                    _data) -> dev_set.DevAnalysis:
    """Keyed on (checkpoint, modification time, question-file hash, corpus files); the bar replays empty."""
    bar = st.progress(0.0, text=f"Evaluating {plain(label)}…")

    def progress(done: int, total: int) -> None:
        bar.progress(done / total, text=f"Evaluating {plain(label)}: {done} of {total} questions")

    done = dev_set.analyse_dev(_loaded.model, _loaded.tokenizer, _pairs, _data.index, _data.labels,
                                _data.baseline_place, progress=progress)
    bar.empty()
    return done


def dev_questions(p: Probe) -> tuple[bytes, str] | None:
    data = p.data
    source = st.radio("Questions", ["bundled", "upload"], horizontal=True, key="probe_dev_source",
                      format_func={"bundled": plain(f"{corpus.DEV_FILE} ({data.folder.name})"),
                                   "upload": "upload a file"}.get)
    if source == "upload":
        upload = st.file_uploader("Questions file: 'Where was NAME born?<TAB>PLACE' per line",
                                  type=["tsv", "txt"], key="probe_upload", max_upload_size=10)
        if upload is None:
            st.info("Upload a file in the assignment's format to evaluate it.")
            return None
        return upload.getvalue(), upload.name
    path = data.folder / corpus.DEV_FILE
    if not path.is_file():
        st.info(f"There is no {corpus.DEV_FILE} next to the corpus; upload a questions file instead.")
        return None
    return path.read_bytes(), corpus.DEV_FILE


def pick_example(view) -> int:
    """A row clicked in the table (when it changed) or the selectbox's question number."""
    # the question (the name says it) and the four evidence flags (the category sums them up) are left out of
    # the view, not of the CSV: eleven columns cannot fit 1024 px
    hidden = {c: None for c in ("question", "in_corpus", "truth_in_document", "prediction_in_document",
                                "prediction_is_label")}
    widths = fitted_columns(view, EXPANDER_WIDTH - 40, {"confidence": CONFIDENCE, **hidden}, index=True)  # 40: ticks
    event = st.dataframe(view, on_select="rerun", selection_mode="single-row", key="probe_dev_table",
                         column_config=widths)
    rows = list(event.selection.rows) if event is not None else []
    if rows and rows != st.session_state.get("probe_dev_clicked"):
        st.session_state["probe_dev_example"] = int(view.index[rows[0]])
    st.session_state["probe_dev_clicked"] = rows
    options = [int(i) for i in view.index]
    if st.session_state.get("probe_dev_example") not in options:
        st.session_state["probe_dev_example"] = options[0]
    return st.selectbox("Open question", options, key="probe_dev_example",
                        format_func=lambda i: f"{i}: {view.at[i, 'question']}")


def dev_tab(p: Probe) -> None:
    pick_focus(p)
    models, focus, data, stamp = p.models, p.focus, p.data, p.stamp
    chosen = dev_questions(p)
    if chosen is None:
        return
    raw, label = chosen
    questions = read_question_file(raw, label)
    if questions.problem:
        st.error(plain(questions.problem))
        return
    warn_unknown(p, (q for q, _ in questions.pairs))
    digest = hashlib.sha256(raw).hexdigest()
    analyses = {m: cached_analysis(*model_version(loaded), digest, stamp, m, loaded, questions.pairs, data)
                for m, loaded in models.items()}
    comparison = dev_set.compare(analyses, {m: loaded.metadata for m, loaded in models.items()}, data.train_places)
    st.markdown("**" + plain(dev_set.dev_finding(comparison.table)) + "**")  # the finding, then its figure
    show_figure(viz.category_share_bars(comparison.categories, title="Where each model's answers come from"),
                "evidence-categories", key="probe_dev_categories")
    with st.expander("Accuracy per model, and what the colours mean"):
        numbers = shown_table(comparison.table[["model", "accuracy", "correct", "questions", "mean confidence"]])
        st.dataframe(numbers, hide_index=True, column_config=fitted_columns(
            numbers, EXPANDER_WIDTH, {"accuracy": PERCENT, "mean confidence": CONFIDENCE}))
        st.caption("The colours describe the corpus, not the model: a model that was not pretrained never read "
                   "the documents, so its green answers are what it got right without them.")
        st.markdown("\n".join(f"- **{PLAIN_CATEGORIES[c]}**: {m}" for c, m in corpus.CATEGORIES.items()))
    with st.expander("Did pretraining store the fact, and does finetuning reach it?"):
        knowledge_section(p, analyses, questions.pairs, digest)
    where_from_view.dev_view(p.models[focus], focus, data.folder / corpus.DEV_FILE)
    with st.expander("Can its confidence be trusted?"):
        st.text("Expected calibration error (how far confidence is from accuracy, on average): "
                + ", ".join(f"{m} {e:.3f}" for m, e in comparison.calibration.items()))
        show_figure(viz.reliability_figure(comparison.reliability, title="Reliability: accuracy by confidence"),
                    "reliability", key="probe_dev_reliability")
        focused = analyses[focus]
        fig = viz.confidence_by_category(focused.frame,
                                         title=f"{focus}: is it as sure when it guesses as when it retrieves?")
        show_figure(fig, f"{focus}-confidence", key="probe_dev_confidence")
    with st.expander(plain(f"Every question ({focus}), one at a time")):
        every_question(p, analyses[focus], label)


def every_question(p: Probe, focused: dev_set.DevAnalysis, label: str) -> None:
    focus = p.focus
    frame = focused.frame
    columns = st.columns([1, 2, 2, 1])
    outcome = columns[0].radio("Outcome", dev_set.OUTCOMES, key="probe_dev_outcome")
    categories = columns[1].multiselect("Where the answer comes from", list(corpus.CATEGORIES),
                                        default=list(corpus.CATEGORIES), key="probe_dev_categories_filter", wrap=True,
                                        format_func=lambda c: PLAIN_CATEGORIES.get(c, c))
    confidence = columns[2].slider("Confidence", 0.0, 1.0, (0.0, 1.0), 0.05,
                                   key="probe_dev_confidence_filter")
    places = ["(any)"] + sorted(set(frame["truth"]) | set(frame["prediction"]))
    place = columns[3].selectbox("Place (true or predicted)", places, key="probe_dev_place")
    view = dev_set.filter_analysis(frame, outcome, categories, confidence, None if place == "(any)" else place)
    st.caption(f"{len(view)} of {len(frame)} questions")
    left, right = st.columns(2)
    left.download_button("Predictions, assignment format (one per line)",
                         predictions_text(focused.result.predictions), f"{focus}-predictions.txt",
                         "text/plain", key="probe_dev_predictions")
    right.download_button("The table, all questions (CSV)",
                          table_csv(frame.reset_index(names="number")),
                          f"{focus}-analysis.csv", "text/csv", key="probe_dev_csv")
    if view.empty:
        st.info("No question matches these filters.")
        return
    number = pick_example(view)
    row = frame.loc[number]
    show_example(p, row["question"], row["name"], row["truth"], label, "probe_dev_example_view", EXPANDER_WIDTH)
