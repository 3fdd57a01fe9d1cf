"""The birthplace probe's parts (pages/probe.py is the storyboard): cached core calls and one example
(every model's answer, the focus model's candidates, corpus evidence and attention). pages/probe_dev.py
draws the Dev set tab.

Not a page (app.py lists pages explicitly). Everything a part needs arrives in one `Probe` value, never
through module globals. User text is shown only with st.text / st.code / dataframes / escaped plotly.
"""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st
from streamlit.errors import StreamlitAPIException

from core.figures import probe as viz
from core.io.checkpoint import LoadedCheckpoint
from core.lens.probe import answers, corpus
from core.lens.probe.evaluation import predict_birthplaces
from core.lens.probe.questions import unknown_summary
from core.text import MASK_LABEL
from core.text import markdown_escape as plain
from pages.display import MAIN_WIDTH, fitted_columns, show_figure
from pages.model_loading import model_version
from pages.page_state import AttentionState, link_text, page_url
from pages.shared_caches import figure

TOP_K = 10
PERCENT = st.column_config.NumberColumn(format="percent")
CONFIDENCE = st.column_config.NumberColumn(
    format="percent", help="Probability of the greedy answer (its characters and the closing ⁇).")
VERDICT = st.column_config.TextColumn(
    help="Where the answer can come from, by the corpus: retrieved (a document about this person names "
                   "it), borrowed (a document about someone sharing a name part does), made up (neither).")
VERDICT_COLOURS = {"retrieved": "green", "borrowed": "orange", "made up": "red"}
RANK = st.column_config.TextColumn("truth's rank", help="Where the true place ranks among the candidates.")
ATTENTION_VIEWS = {"layers": "every layer (mean over heads)", "heads": "every head of one layer"}


@dataclass
class Probe:
    """What the page chose: the models to compare, the one for the details, the corpus and its stamp."""

    models: dict[str, LoadedCheckpoint]
    focus: str
    data: corpus.ProbeData
    stamp: tuple[float, ...]


@st.cache_data(show_spinner=False, max_entries=256)
def cached_ask(path: str, modified: float, question: str, places: tuple[str, ...],
               _loaded) -> answers.ProbeAnswer:
    return answers.ask(_loaded.model, _loaded.tokenizer, question, places)


@st.cache_data(show_spinner=False, max_entries=64)
def cached_attention(path: str, modified: float, question: str, _loaded) -> answers.AnswerAttention:
    return answers.answer_attention(_loaded.model, _loaded.tokenizer, question)


@st.cache_data(show_spinner="Asking the models…", max_entries=32)
def cached_answers(path: str, modified: float, questions: tuple[str, ...], _loaded) -> list[str]:
    return predict_birthplaces(_loaded.model, _loaded.tokenizer, questions)


def pick_focus(p: Probe, where=st) -> None:
    """The model whose candidates, attention and tables the tab shows (one key for every tab)."""
    p.focus = where.selectbox("Model for the details", list(p.models), key="probe_focus",
                              help="The model whose candidates, attention and tables this tab shows.")


def warn_unknown(p: Probe, texts) -> None:
    message = unknown_summary(texts, {name: loaded.tokenizer for name, loaded in p.models.items()})
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
    by_model = {m: cached_ask(*model_version(loaded), question, labels, loaded) for m, loaded in models.items()}
    known = (f"**true birthplace** ({plain(source)}): {plain(truth)}" if truth else
             "true birthplace unknown (not a question of the train or dev file)")
    st.markdown(f"**Prompt:** {plain(question)} :violet-badge[{MASK_LABEL}] · {known}",
                help="The page appends the MASK character (⁇, U+2047) to the question: the model writes its "
                     "answer after it, as in the assignment. You type '?' (or nothing); never the MASK.")
    verdicts = {m: corpus.verdict(data.index, name, a.answer) for m, a in by_model.items()}
    found, answer = verdicts[focus], by_model[focus].answer
    st.markdown(f":{VERDICT_COLOURS[found.label]}-badge[{found.label}] " + plain(corpus.verdict_sentence(
        focus, name, answer, found, bool(data.index.documents_about(name)))), help="; ".join(
        f"{label}: {meaning}" for label, meaning in corpus.VERDICTS.items()))
    # "a place?" and "on the list" read like approval and are left out (the verdict says where the answer comes
    # from; the candidates chart shows the list)
    table = answers.answers_frame(by_model, truth, {m: v.label for m, v in verdicts.items()})
    st.dataframe(table, hide_index=True, column_config=fitted_columns(table, room, {
        "greedy answer": st.column_config.TextColumn("answer"), "confidence": CONFIDENCE,
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
            fig = figure(("candidates", *model_version(models[focus]), question, labels, k, truth, focus),
                         lambda: viz.candidate_bars(list(top["place"]), top["probability"], by_model[focus].answer,
                                                    truth, title=f"{focus}: top {len(top)} of {len(ranking.places)} "
                                                                 "candidates"), k)
            with chart:
                show_figure(fig, f"{focus}-candidates", key=f"{key}_candidates")
    with right:
        show_evidence(data.index.evidence(name, truth))
    show_attention(p, question, key)
