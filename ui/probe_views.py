"""The Birthplace probe's views (pages/probe.py is the page: the models compared, the tabs, Ask and Fabricate).

- one example, drawn on Ask and on the Dev set tab (`show_example`): every model's answer with its verdict,
  the focus model's candidates, the corpus evidence and the attention at the answer, with a link that opens
  the question on the Attention page; the core calls behind it, cached per (checkpoint file and step,
  modification time, input);
- the Dev set tab (`dev_tab`): assignment-exact accuracy per model, evidence categories, reliability, every
  question with filters, one example at a time; the evaluation cached per (checkpoint file, modification time,
  question-file hash, corpus files);
- its "stored versus extractable" section (`knowledge_section`): per model, a 2x2 of dev people, memorised by
  its pretrained file x answered after finetuning, and the people in one cell.

Everything a view needs arrives in one `Probe` value, never through module globals. User text is shown only
with st.text / st.code / dataframes / escaped plotly.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

import streamlit as st
from streamlit.errors import StreamlitAPIException

from core.figures import probe as viz
from core.figures.probe import PLAIN_CATEGORIES
from core.io.checkpoint import CheckpointError, LoadedCheckpoint
from core.io.tables import table_csv
from core.lens.probe import answers, corpus, dev_set
from core.lens.probe.evaluation import memorized, predict_birthplaces
from core.lens.probe.questions import (
    MAX_UPLOAD_BYTES,
    MAX_UPLOAD_QUESTIONS,
    predictions_text,
    read_question_file,
    unknown_characters,
    unknown_summary,
)
from core.text import MASK_LABEL
from core.text import markdown_escape as plain
from ui import where_from_view
from ui.browser_tables import arrow_table
from ui.display import EXPANDER_WIDTH, MAIN_WIDTH, fitted_columns, show_figure, shown_table
from ui.page_caches import example_answers
from ui.page_state import AttentionState, link_text, page_url
from ui.shared_caches import by_name, figure, load_cached, model_version, training_words

# --- one example (Ask, Dev set) ---------------------------------------------------------------------------

TOP_K = 10
QUESTIONS_LIMIT_MB = MAX_UPLOAD_BYTES // (1024 * 1024)  # the uploader's limit is the one read_question_file keeps
PERCENT = st.column_config.NumberColumn(format="percent")
CONFIDENCE = st.column_config.NumberColumn(
    format="percent", help="Probability of the greedy answer (its characters and the closing ⁇).")
# The Ask table's confidence, named for what it is: the chart beside it shows the share among the candidates
WHOLE_ANSWER_COLUMN = st.column_config.NumberColumn(
    answers.WHOLE_ANSWER, format="percent",
    help="The probability of the whole greedy answer: its pieces' and the closing ⁇'s, multiplied; "
    f"the chart shows the {answers.AMONG_CANDIDATES} (the same numbers divided by their sum over the candidate list), "
    f"the logit lens the {answers.FIRST_PIECE} alone.")
VERDICT = st.column_config.TextColumn(
    help="Where the answer can come from, by the corpus: retrieved (a document about this person names "
                   "it), borrowed (a document about someone sharing a name part does), made up (neither).")
VERDICT_COLOURS = {"retrieved": "green", "borrowed": "orange", "made up": "red"}
RANK = st.column_config.TextColumn("truth's rank", help="Where the true place ranks among the candidates.")
ATTENTION_VIEWS = {"layers": "every layer (mean over heads)", "heads": "every head of one layer"}


@dataclass
class Probe:
    """What the page chose: the models to compare, the one for the details, the corpus and its stamp."""

    models: dict[str, LoadedCheckpoint]  # as this session reads them: with its kept edits (ui/kept_edits.py)
    focus: str
    data: corpus.ProbeData
    stamp: tuple[float, ...]
    files: dict[str, LoadedCheckpoint] = field(default_factory=dict)  # as their files have them (the Edit tab's)


@by_name
@st.cache_resource(show_spinner=False, max_entries=256, ttl=3600)
def cached_ask(path: str, modified: float, question: str, world: tuple, _places: tuple[str, ...],
               _loaded) -> answers.ProbeAnswer:
    """One answer per (checkpoint version, question, world): the world (its folder and files' stamp) decides the
    candidate places, so they are not hashed on every call. Shared by every session as it is, read-only
    (st.cache_data unpickled a copy of the 144 candidates' ranking on each of the page's reruns)."""
    answer = answers.ask(_loaded.model, _loaded.tokenizer, question, _places)
    answer.ranking.log_probs.flags.writeable = False
    return answer


@by_name
@st.cache_data(show_spinner=False, max_entries=64)
def cached_attention(path: str, modified: float, question: str, _loaded) -> answers.AnswerAttention:
    return answers.answer_attention(_loaded.model, _loaded.tokenizer, question)


@by_name
@st.cache_data(show_spinner="Asking the models…", max_entries=32)
def cached_answers(path: str, modified: float, questions: tuple[str, ...], _loaded) -> list[str]:
    return predict_birthplaces(_loaded.model, _loaded.tokenizer, questions)


def pick_focus(p: Probe, where=st) -> None:
    """The model whose candidates, attention and tables the tab shows (one key for every tab)."""
    p.focus = where.selectbox("Model for the details", list(p.models), key="probe_focus",
                              help="The model whose candidates, attention and tables this tab shows.")


def warn_unknown(p: Probe, texts) -> None:
    texts, tokenizers = list(texts), {name: loaded.tokenizer for name, loaded in p.models.items()}
    if not any(unknown_characters(texts, tokenizer) for tokenizer in tokenizers.values()):
        return  # every model reads every piece (most reruns): their training words are not looked up
    message = unknown_summary(texts, tokenizers,
                              words={name: training_words(loaded) for name, loaded in p.models.items()})
    if message:
        st.warning(plain(message))


def attention_link(model_name: str, question: str) -> None:
    # The question as typed: the Attention page appends the MASK to a birthplace question itself (its box
    # would show the ⁇ as two more question marks, "born???")
    params = page_url(AttentionState(text=question), model=model_name)
    try:
        st.page_link("pages/attention.py", label="Open this question on the Attention page",
                     icon=":material/visibility:", query_params=params)
    except StreamlitAPIException:  # the attention page is not in this app's navigation
        st.text("Attention page: " + link_text("attention", params))


def show_attention(p: Probe, question: str, key: str) -> None:
    focus = p.focus
    loaded = p.models[focus]
    attention = cached_attention(*model_version(loaded), question, loaded)
    n_layer = attention.weights.shape[0]
    unit = getattr(loaded.tokenizer, "unit", "piece")
    view = st.radio(f"Attention at the answer's first {unit}", list(ATTENTION_VIEWS), horizontal=True,
                    format_func=ATTENTION_VIEWS.get, key=f"{key}_view")
    layer = None
    if view == "layers":
        weights, rows = attention.layer_means, [f"layer {i}" for i in range(n_layer)]
    else:
        if st.session_state.get(f"{key}_layer", 0) >= n_layer:
            st.session_state[f"{key}_layer"] = 0
        layer = st.selectbox("Layer", range(n_layer), key=f"{key}_layer")
        weights, rows = attention.weights[layer], [f"head {h}" for h in range(attention.weights.shape[1])]
    if attention.cut:
        st.caption(plain(f"The first {attention.cut} {unit}s are past what {focus} reads at once; it "
                         f"answers from the rest, as generation does."))
    shown = ("answer attention", *model_version(loaded), question, layer, focus, unit)  # shared by every session
    fig = figure(shown, lambda: viz.answer_attention_heatmap(weights, attention.tokens, rows,
                                                             title=f"{focus}: where the MASK looks", unit=unit),
                 weights.size)
    show_figure(fig, f"{focus}-answer-attention", key=f"{key}_chart")
    attention_link(focus, question)


def show_evidence(evidence: corpus.Evidence) -> None:
    st.markdown("**Evidence in the pretraining corpus**")
    if not evidence.in_corpus:
        st.text(f"No document of {corpus.CORPUS_FILE} mentions this name: an answer cannot be retrieved.")
        return
    st.text(f"{len(evidence.documents)} document(s) mention this name:")
    for document in evidence.documents[:5]:
        st.code(document, language=None, wrap_lines=True)
    st.text("Known places they mention: " + (", ".join(evidence.places) or "none"))
    if evidence.truth is not None:
        st.text("The true place is " + ("among them." if evidence.truth_mentioned else "NOT among them."))


def show_example(p: Probe, question: str, name: str, truth: str | None, source: str | None, key: str,
                 room: int = MAIN_WIDTH) -> None:
    """Every selected model's answer to one question, the focus model's candidates and attention."""
    models, focus, data = p.models, p.focus, p.data
    labels = tuple(data.labels)
    world = (str(data.folder), p.stamp)
    by_model = {m: cached_ask(*model_version(loaded), question, world, labels, loaded) for m, loaded in models.items()}
    known = (f"**true birthplace** ({plain(source)}): {plain(truth)}" if truth else
             "true birthplace unknown (not a question of the train or dev file)")
    st.markdown(f"**Prompt:** {plain(question)} :violet-badge[{MASK_LABEL}] · {known}",
                help="The page appends the MASK character (⁇, U+2047) to the question: the model writes its "
                     "answer after it, as in the assignment. You type '?' (or nothing); never the MASK.")
    derived = example_answers(tuple((m, *model_version(loaded)) for m, loaded in models.items()), question, name,
                              truth, world, data.index, by_model)  # kept per answers: a view's rerun derives nothing
    found, answer = derived.verdicts[focus], by_model[focus].answer
    st.markdown(f":{VERDICT_COLOURS[found.label]}-badge[{found.label}] " + plain(corpus.verdict_sentence(
        focus, name, answer, found, derived.evidence.in_corpus)), help="; ".join(
        f"{label}: {meaning}" for label, meaning in corpus.VERDICTS.items()))
    # "a place?" and "on the list" read like approval and are left out (the verdict says where the answer comes
    # from; the candidates chart shows the list)
    table = derived.table  # shared: converted for the browser once (ui.browser_tables)
    st.dataframe(arrow_table(table), hide_index=True, column_config=fitted_columns(table, room, {
        "greedy answer": st.column_config.TextColumn("answer"), "confidence": WHOLE_ANSWER_COLUMN,
        "probability on the candidate list": None, "answer is a training label": None, "rank of the truth": RANK,
        "verdict": VERDICT}))
    left, right = st.columns(2)
    with left:
        ranking = by_model[focus].ranking
        if not ranking.places:
            st.info(plain(f"No candidate place fits in {focus}'s context with this question."))
        else:
            chart = st.container()  # the chart first, its slider under it: the figure starts above the fold
            k = st.slider("Top candidates", 3, min(40, len(ranking.places)), min(TOP_K, len(ranking.places)),
                          key=f"{key}_k") if len(ranking.places) > 3 else len(ranking.places)
            top = ranking.top(k)
            fig = figure(("candidates", *model_version(models[focus]), question, world, k, truth, focus),
                         lambda: viz.candidate_bars(list(top["place"]), top["probability"], by_model[focus].answer,
                                                    truth, title=f"{focus}: top {len(top)} of {len(ranking.places)} "
                                                                 "candidates"), k)
            with chart:
                show_figure(fig, f"{focus}-candidates", key=f"{key}_candidates")
    with right:
        show_evidence(derived.evidence)
    show_attention(p, question, key)



# --- the Dev set tab --------------------------------------------------------------------------------------

@by_name
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
                                  type=["tsv", "txt"], key="probe_upload", max_upload_size=QUESTIONS_LIMIT_MB,
                                  help=f"Up to {QUESTIONS_LIMIT_MB} MB and {MAX_UPLOAD_QUESTIONS} questions.")
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



# --- the Dev set tab's "stored versus extractable" section ------------------------------------------------

@by_name
@st.cache_data(show_spinner="Asking each pretrained model to complete the dev people's documents…",
               max_entries=32)
def cached_memorised(path: str, modified: float, content_hash: str, stamp: tuple, _pairs,
                     _corpus: str) -> list[bool | None]:
    loaded = load_cached(path, modified)
    return memorized(loaded.model, loaded.tokenizer, _corpus, _pairs)


def pretrained_file(loaded) -> Path | None:
    """The file a finetuned model was pretrained as (metadata `pretrained_from`), beside it; None if none."""
    name = loaded.metadata.get("pretrained_from") or ""
    path = Path(loaded.path).parent / Path(str(name)).name
    return path if name and path.is_file() else None


def knowledge_section(p: Probe, analyses: dict, pairs, digest: str) -> None:
    corpus_text = "\n".join(p.data.index.documents)
    tables, skipped = {}, []
    for model, loaded in p.models.items():
        source = pretrained_file(loaded)
        flags = None
        if source is not None:
            try:
                flags = cached_memorised(str(source), source.stat().st_mtime, digest, p.stamp, pairs, corpus_text)
            except (CheckpointError, OSError):
                flags = None
        if flags is None and loaded.metadata.get("pretrained_from"):
            skipped.append(model)  # pretrained, but its pretrained file is not beside it
            continue
        tables[model] = dev_set.knowledge_table([q for q, _ in pairs], analyses[model].result, flags)
    for model in skipped:
        st.info(plain(f"{model} names its pretrained file {p.models[model].metadata['pretrained_from']}, "
                      "which is not beside it: its row is left out."))
    if not tables:
        return
    show_figure(viz.knowledge_grids({m: t.counts for m, t in tables.items()},
                                    title="Dev people: fact stored by pretraining (rows) x answered after "
                                          "finetuning (columns)"),
                "stored-vs-extractable", key="probe_dev_knowledge")
    for model, table in tables.items():
        counts = table.counts
        if not table.pretrained:
            st.text(f"{model}: not pretrained, so it stored nothing; it answers {counts['answered'].sum()} of "
                    f"{len(table.people)} people from the name alone.")
            continue
        stored = int(counts.loc["memorised"].sum())
        st.text(f"{model}: its pretrained file completes {stored} of {len(table.people)} people's own documents "
                f"with the birthplace; finetuning answers {counts.at['memorised', 'answered']} of those "
                f"{stored}, and {counts.at['not memorised', 'answered']} people without the stored fact.")
    model_box, cell_box = st.columns([2, 3])
    model = model_box.selectbox("Model", list(tables), key="probe_dev_knowledge_model")
    cells = list(dev_set.CELLS)
    counts = tables[model].counts
    stored, answered = cell_box.selectbox(
        "People in", cells, key="probe_dev_knowledge_cell",
        format_func=lambda c: f"{c[0]} x {c[1]} ({counts.at[c]}): {dev_set.CELLS[c]}")
    people = tables[model].cell(stored, answered)
    st.dataframe(people, hide_index=True, column_config=fitted_columns(people, EXPANDER_WIDTH))
