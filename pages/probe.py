"""Birthplace probe: what does a birthplace model retrieve from its pretraining, and what does it make up?

Storyboard: birthplace checkpoints to compare (default: all) -> three lazy tabs, each a few `core.probe`
calls and `core.viz` figures: Ask (one name: greedy answer, candidates, corpus evidence, attention at the
answer), Fabricate (names nobody wrote about: the fallback strategy), Dev set (assignment-exact accuracy,
evidence categories, reliability, one example at a time). Results are cached per (checkpoint file,
modification time, input). User text is shown only with st.text / st.code / dataframes / escaped plotly.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from urllib.parse import quote, urlencode

import streamlit as st
from streamlit.errors import StreamlitAPIException

from core import probe, urlstate, viz
from core.data.datasets import DataError
from core.evaluate import predict_birthplaces
from core.tokenizer import MASK_CHAR
from pages.common import all_checkpoints, checkpoint_picker, load_checkpoint, plain, show_figure

TABS = tuple(urlstate.PROBE_TABS.values())
TOP_K = 10
PERCENT = st.column_config.NumberColumn(format="percent")
CONFIDENCE = st.column_config.NumberColumn(
    format="percent", help="Probability of the greedy answer (its characters and the closing ⁇).")
MASS = st.column_config.NumberColumn(
    format="percent", help="Total probability of the training places as answers (the rest: other strings).")
ATTENTION_VIEWS = {"layers": "every layer (mean over heads)", "heads": "every head of one layer"}


@st.cache_resource(show_spinner="Reading the corpus…", max_entries=4)
def probe_data(folder: str, stamp: tuple[float, ...]) -> probe.ProbeData:
    return probe.load_probe_data(folder)


@st.cache_data(show_spinner=False, max_entries=256)
def cached_ask(path: str, modified: float, question: str, places: tuple[str, ...],
               _loaded) -> probe.ProbeAnswer:
    return probe.ask(_loaded.model, _loaded.tokenizer, question, places)


@st.cache_data(show_spinner=False, max_entries=64)
def cached_attention(path: str, modified: float, question: str, _loaded) -> probe.AnswerAttention:
    return probe.answer_attention(_loaded.model, _loaded.tokenizer, question)


@st.cache_data(show_spinner=False, max_entries=32)
def cached_people(n: int, locales: tuple[str, ...], seed: int, stamp: tuple, _data) -> list[tuple[str, str]]:
    return probe.fabricated_people(n, locales, seed, _data.index, _data.train_names)


@st.cache_data(show_spinner="Asking the models…", max_entries=32)
def cached_answers(path: str, modified: float, questions: tuple[str, ...], _loaded) -> list[str]:
    return predict_birthplaces(_loaded.model, _loaded.tokenizer, questions)


@st.cache_data(show_spinner=False, max_entries=32)
def cached_analysis(path: str, modified: float, content_hash: str, stamp: tuple, label: str, _loaded, _pairs,
                    _data) -> probe.DevAnalysis:
    """Keyed on (checkpoint, modification time, question-file hash, corpus files); the bar replays empty."""
    bar = st.progress(0.0, text=f"Evaluating {plain(label)}…")

    def progress(done: int, total: int) -> None:
        bar.progress(done / total, text=f"Evaluating {plain(label)}: {done} of {total} questions")

    analysis = probe.analyse_dev(_loaded.model, _loaded.tokenizer, _pairs, _data.index, _data.labels,
                                 _data.baseline_place, progress=progress)
    bar.empty()
    return analysis


def version(loaded) -> tuple[str, float]:
    return str(loaded.path), Path(loaded.path).stat().st_mtime


def warn_unknown(texts) -> None:
    message = probe.unknown_summary(texts, {name: loaded.tokenizer for name, loaded in models.items()})
    if message:
        st.warning(plain(message))


def restore_state() -> urlstate.ProbePageState:
    """Widgets from the URL on first render, else from this session's last visit (page switches)."""
    saved = st.session_state.get("probe_saved") or urlstate.decode_probe(st.query_params.to_dict())
    default = probe.name_from_question(data.dev_pairs[0][0]) if data.dev_pairs else "Ada Lovelace"
    # Written back every run, as the sidebar picker does: after a page switch these are new widgets.
    st.session_state["probe_tab"] = st.session_state.get("probe_tab", saved.tab_label)
    st.session_state["probe_ask"] = st.session_state.get("probe_ask", saved.name or default)
    return saved


def save_state(focus: str) -> None:
    previous = st.session_state.get("probe_saved") or urlstate.ProbePageState()
    state = urlstate.ProbePageState(tab=urlstate.probe_tab(st.session_state.get("probe_tab")),
                                    name=st.session_state.get("probe_ask", previous.name), focus=focus)
    params = urlstate.encode_probe(state)
    for stale in set(urlstate.PROBE_KEYS.values()) - set(params):
        st.query_params.pop(stale, None)
    st.query_params.update(params)
    st.session_state["probe_saved"] = state


def attention_link(model_name: str, question: str) -> None:
    params = {"model": model_name, "text": question + MASK_CHAR}
    try:
        st.page_link("pages/attention.py", label="Open this question on the Attention page",
                     icon=":material/visibility:", query_params=params)
    except StreamlitAPIException:  # the attention page is not in this app's navigation
        st.text("Attention page: attention?" + urlencode(params, quote_via=quote))


def show_attention(question: str, key: str) -> None:
    loaded = models[focus]
    attention = cached_attention(*version(loaded), question, loaded)
    n_layer = attention.weights.shape[0]
    view = st.radio("Attention at the answer's first character", list(ATTENTION_VIEWS), horizontal=True,
                    format_func=ATTENTION_VIEWS.get, key=f"{key}_view")
    if view == "layers":
        weights, rows = attention.layer_means, [f"layer {i}" for i in range(n_layer)]
    else:
        if st.session_state.get(f"{key}_layer", 0) >= n_layer:
            st.session_state[f"{key}_layer"] = 0
        layer = st.selectbox("Layer", range(n_layer), key=f"{key}_layer")
        weights, rows = attention.weights[layer], [f"head {h}" for h in range(attention.weights.shape[1])]
    if attention.cut:
        st.caption(plain(f"The first {attention.cut} characters are past what {focus} reads at once; it "
                         f"answers from the rest, as generation does."))
    fig = viz.answer_attention_heatmap(weights, probe.display_tokens(attention.tokens), rows,
                                       title=f"{focus}: where the MASK looks")
    show_figure(fig, f"{focus}-answer-attention", key=f"{key}_chart")
    attention_link(focus, question)


def show_evidence(evidence: probe.Evidence) -> None:
    st.markdown("**Evidence in the pretraining corpus**")
    if not evidence.in_corpus:
        st.text(f"No document of {probe.CORPUS_FILE} mentions this name: an answer cannot be retrieved.")
        return
    st.text(f"{len(evidence.documents)} document(s) mention this name:")
    for document in evidence.documents[:5]:
        st.code(document, language=None, wrap_lines=True)
    st.text("Known places they mention: " + (", ".join(evidence.places) or "none"))
    if evidence.truth is not None:
        st.text("The true place is " + ("among them." if evidence.truth_mentioned else "NOT among them."))


def show_example(question: str, name: str, truth: str | None, source: str | None, key: str) -> None:
    """Every selected model's answer to one question, the focus model's candidates and attention."""
    labels = tuple(data.labels)
    answers = {m: cached_ask(*version(loaded), question, labels, loaded) for m, loaded in models.items()}
    st.markdown(f"**Prompt:** {plain(question)} :violet-badge[{probe.MASK_LABEL}]",
                help="The page appends the MASK character (⁇, U+2047) to the question: the model writes its "
                     "answer after it, as in the assignment. You type '?' (or nothing); never the MASK.")
    st.text(f"True birthplace ({source}): {truth}" if truth else
            "True birthplace: unknown (not a question of the train or dev file).")
    st.dataframe(probe.answers_frame(answers, truth), hide_index=True,
                 column_config={"confidence": CONFIDENCE, "probability on the candidate list": MASS})
    left, right = st.columns(2)
    with left:
        ranking = answers[focus].ranking
        if not ranking.places:
            st.info(plain(f"No candidate place fits in {focus}'s context with this question."))
        else:
            k = st.slider("Top candidates", 3, min(40, len(ranking.places)), min(TOP_K, len(ranking.places)),
                          key=f"{key}_k") if len(ranking.places) > 3 else len(ranking.places)
            top = ranking.top(k)
            fig = viz.candidate_bars(list(top["place"]), top["probability"], answers[focus].answer, truth,
                                     title=f"{focus}: top {len(top)} of {len(ranking.places)} candidates")
            show_figure(fig, f"{focus}-candidates", key=f"{key}_candidates")
    with right:
        show_evidence(data.index.evidence(name, truth))
    show_attention(question, key)


def ask_tab() -> None:
    text = st.text_input("A name, or a question 'Where was NAME born?'", key="probe_ask")
    asked = probe.read_probe_input(text)
    if asked.problem:
        st.warning(plain(asked.problem))
        return
    warn_unknown([asked.question])
    truth, source = data.truth(asked.name) or (None, None)
    show_example(asked.question, asked.name, truth, source, "probe_ask")


def fabricate_tab() -> None:
    st.write("Names drawn like the world's people but absent from the corpus and the training questions: "
             "the model cannot know them, so its answers show its fallback strategy.")
    columns = st.columns([4, 1, 1])
    locales = columns[0].multiselect("Locales of the names", list(probe.LOCALES), default=list(probe.LOCALES),
                                     format_func=lambda loc: f"{loc} ({probe.LOCALES[loc].label})",
                                     key="probe_locales")
    n = columns[1].number_input("Names", 1, probe.MAX_FABRICATED, 48, key="probe_n")
    seed = columns[2].number_input("Seed", 0, 1_000_000, 0, key="probe_seed")
    try:
        people = cached_people(int(n), tuple(locales), int(seed), stamp, data)
    except ValueError as exc:
        st.warning(plain(exc))
        return
    questions = tuple(probe.question_for(name) for name, _ in people)
    warn_unknown(questions)
    predictions = {m: cached_answers(*version(loaded), questions, loaded) for m, loaded in models.items()}
    name_locales = [loc for _, loc in people]
    st.dataframe(probe.strategy_summary(name_locales, predictions, data.train_places), hide_index=True,
                 column_config={c: PERCENT for c in ("its share", "share in the name's country",
                                                     "share that are training labels")})
    chance = probe.expected_home_share(name_locales, data.train_places)
    st.text(f"Ignoring the name and drawing from the training labels would give a city of the name's "
            f"country {chance:.0%} of the time.")
    frame = probe.fabricated_frame(people, predictions)
    st.dataframe(frame, hide_index=True)
    st.download_button("Download these predictions (CSV)", probe.table_csv(frame),
                       "fabricated-predictions.csv", "text/csv", key="probe_fab_csv")
    show_figure(viz.place_share_bars(probe.place_shares(predictions, data.train_places),
                                     title="Predicted places for fabricated names vs. the training labels"),
                "fabricated-place-shares", key="probe_fab_shares")
    show_figure(viz.locale_place_heatmap(probe.locale_place_counts(name_locales, predictions[focus]),
                                         title=f"{focus}: predicted place by the name's locale"),
                f"{focus}-locale-places", key="probe_fab_heatmap")


def dev_questions() -> tuple[bytes, str] | None:
    source = st.radio("Questions", ["bundled", "upload"], horizontal=True, key="probe_dev_source",
                      format_func={"bundled": plain(f"{probe.DEV_FILE} ({data.folder.name})"),
                                   "upload": "upload a file"}.get)
    if source == "upload":
        upload = st.file_uploader("Questions file: 'Where was NAME born?<TAB>PLACE' per line",
                                  type=["tsv", "txt"], key="probe_upload", max_upload_size=10)
        if upload is None:
            st.info("Upload a file in the assignment's format to evaluate it.")
            return None
        return upload.getvalue(), upload.name
    path = data.folder / probe.DEV_FILE
    if not path.is_file():
        st.info(f"There is no {probe.DEV_FILE} next to the corpus; upload a questions file instead.")
        return None
    return path.read_bytes(), probe.DEV_FILE


def pick_example(view) -> int:
    """A row clicked in the table (when it changed) or the selectbox's question number."""
    event = st.dataframe(view, on_select="rerun", selection_mode="single-row", key="probe_dev_table",
                         column_config={"confidence": CONFIDENCE})
    rows = list(event.selection.rows) if event is not None else []
    if rows and rows != st.session_state.get("probe_dev_clicked"):
        st.session_state["probe_dev_example"] = int(view.index[rows[0]])
    st.session_state["probe_dev_clicked"] = rows
    options = [int(i) for i in view.index]
    if st.session_state.get("probe_dev_example") not in options:
        st.session_state["probe_dev_example"] = options[0]
    return st.selectbox("Open question", options, key="probe_dev_example",
                        format_func=lambda i: f"{i}: {view.at[i, 'question']}")


def dev_tab() -> None:
    chosen = dev_questions()
    if chosen is None:
        return
    raw, label = chosen
    questions = probe.read_question_file(raw, label)
    if questions.problem:
        st.error(plain(questions.problem))
        return
    warn_unknown(q for q, _ in questions.pairs)
    digest = hashlib.sha256(raw).hexdigest()
    analyses = {m: cached_analysis(*version(loaded), digest, stamp, m, loaded, questions.pairs, data)
                for m, loaded in models.items()}
    pretraining = {m: probe.pretraining_label(m, loaded.metadata) for m, loaded in models.items()}
    st.dataframe(probe.comparison_table(analyses, pretraining), hide_index=True,
                 column_config={"accuracy": PERCENT, "mean confidence": CONFIDENCE})
    st.caption("Categories describe the corpus, not the model: a model that was not pretrained never read "
               "the documents, so its 'retrieved' answers are what it got right without them.")
    show_figure(viz.category_share_bars({m: probe.category_summary(a.frame) for m, a in analyses.items()},
                                        title="Where each model's answers come from"), "evidence-categories",
                key="probe_dev_categories")
    with st.expander("What the categories mean"):
        st.dataframe([{"category": c, "meaning": m} for c, m in probe.CATEGORIES.items()], hide_index=True)
    tables = {m: probe.reliability_table(a.frame["confidence"], a.frame["correct"])
              for m, a in analyses.items()}
    st.text("Expected calibration error: " + ", ".join(
        f"{m} {probe.expected_calibration_error(t):.3f}" for m, t in tables.items()))
    show_figure(viz.reliability_figure(tables, title="Reliability: accuracy by confidence"), "reliability",
                key="probe_dev_reliability")
    analysis = analyses[focus]
    fig = viz.confidence_by_category(analysis.frame,
                                     title=f"{focus}: can confidence tell retrieval from invention?")
    show_figure(fig, f"{focus}-confidence", key="probe_dev_confidence")
    st.subheader(plain(f"Every question ({focus})"))
    frame = analysis.frame
    columns = st.columns([1, 2, 2, 1])
    outcome = columns[0].radio("Outcome", probe.OUTCOMES, key="probe_dev_outcome")
    categories = columns[1].multiselect("Evidence category", list(probe.CATEGORIES),
                                        default=list(probe.CATEGORIES), key="probe_dev_categories_filter")
    confidence = columns[2].slider("Confidence", 0.0, 1.0, (0.0, 1.0), 0.05,
                                   key="probe_dev_confidence_filter")
    places = ["(any)"] + sorted(set(frame["truth"]) | set(frame["prediction"]))
    place = columns[3].selectbox("Place (true or predicted)", places, key="probe_dev_place")
    view = probe.filter_analysis(frame, outcome, categories, confidence, None if place == "(any)" else place)
    st.caption(f"{len(view)} of {len(frame)} questions")
    left, right = st.columns(2)
    left.download_button("Predictions, assignment format (one per line)",
                         probe.predictions_text(analysis.predictions), f"{focus}-predictions.txt",
                         "text/plain", key="probe_dev_predictions")
    right.download_button("The table, all questions (CSV)",
                          probe.table_csv(frame.reset_index(names="number")),
                          f"{focus}-analysis.csv", "text/csv", key="probe_dev_csv")
    if view.empty:
        st.info("No question matches these filters.")
        return
    number = pick_example(view)
    row = frame.loc[number]
    show_example(row["question"], row["name"], row["truth"], label, "probe_dev_example_view")


info = checkpoint_picker()
st.title("Birthplace probe")
st.write("What does a birthplace model retrieve from its pretraining corpus, and what does it make up? Ask "
         "about one name, fabricate names nobody wrote about, or sort every dev-set answer by its evidence.")
birth = [i for i in all_checkpoints() if not i.error and i.task == "birthplace"]
if not birth:
    st.info("There is no birthplace checkpoint yet: `make checkpoints` trains the bundled ones.")
    st.stop()
names = [i.name for i in birth]
chosen_names = st.multiselect("Birthplace models to compare", names, default=names, key="probe_models")
models = {i.name: loaded for i in birth
          if i.name in chosen_names and (loaded := load_checkpoint(i)) is not None}
if not models:
    st.info("Choose at least one birthplace model above.")
    st.stop()
try:
    folder = probe.world_dir()
    stamp = tuple(f.stat().st_mtime if f.is_file() else 0.0
                  for f in (folder / probe.CORPUS_FILE, folder / probe.TRAIN_FILE, folder / probe.DEV_FILE))
    data = probe_data(str(folder), stamp)
except DataError as exc:
    st.warning(plain(exc))
    st.stop()
saved = restore_state()
if st.session_state.get("probe_focus") not in models:
    picked = next((n for n in (saved.focus, info.name if info else None) if n in models), next(iter(models)))
    st.session_state["probe_focus"] = picked
focus = st.selectbox("Model for the details (candidates, attention, table)", list(models), key="probe_focus")
st.caption(plain(f"Corpus: {folder / probe.CORPUS_FILE} ({len(data.index.documents)} documents); "
                 f"candidates: the {len(data.labels)} places of {probe.TRAIN_FILE}."))
tabs = st.tabs(TABS, key="probe_tab", on_change="rerun")
save_state(focus)
for tab, show in zip(tabs, (ask_tab, fabricate_tab, dev_tab)):
    if tab.open:
        with tab:
            show()
