"""The Errors page's views (pages/errors.py is the storyboard): choosing the evaluation file, the cached core calls,
and one function per (task, view). Not a page (app.py lists pages explicitly).

Classifiers and birthplace models: the examples (a confusion matrix whose cells filter the table, the table with
its filters and sort, the selected example: probabilities, attention, integrated gradients of the predicted and
gold class, an edited text re-predicted, two pinned examples side by side), slices with 95% intervals,
calibration, two models on the same file. Language models: documents (loss and perplexity), tokens (GLTR's
buckets; a clicked piece opens the attention at its position and the logit lens of that piece), two models
piece by piece and by position in the block.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path, PurePath

import numpy as np
import pandas as pd
import streamlit as st
from streamlit.errors import StreamlitAPIException

from core.data.datasets import DataError
from core.figures import attention as attention_viz
from core.figures import errors as viz
from core.figures import where_from as where_viz
from core.figures.common import figure_title
from core.figures.probe import reliability_figure
from core.io import folders
from core.lens import where_from as wf
from core.lens.attention import AttentionInputError
from core.lens.errors import birthplace, classify, inputs, lm, slices
from core.lens.history.logs import file_signature
from core.lens.perplexities import errors_sentence, trainer_dev, trainer_split
from core.lens.trace import TraceError, trace
from core.text import markdown_escape as plain
from core.text import quoted_token
from ui import page_state
from ui.browser_tables import arrow_table
from ui.display import EXPANDER_WIDTH, MAIN_WIDTH, csv_download, fitted_columns, show_figure
from ui.page_state import ERRORS_OUTCOMES, ERRORS_SORTS, ERRORS_SOURCES, ERRORS_UNITS, AttentionState, ErrorsState
from ui.shared_caches import all_checkpoints, attention_run, by_name, figure, load_checkpoint, model_version

DATA = Path(__file__).resolve().parent.parent / "data"
FORMATS = {"classify": "LABEL<TAB>TEXT per line, or a CSV with text and label columns",
           "lm": "plain UTF-8 text (a document per line, or the whole file)",
           "birthplace": "'Where was NAME born?<TAB>PLACE' per line"}
# the pair each bundled model is compared with by default (pretraining's effect; the positional schemes)
DEFAULT_PAIRS = {"names-pretrained": "names-scratch", "names-scratch": "names-pretrained", "lm-learned": "lm-alibi",
                 "lm-alibi": "lm-learned", "birth-vanilla-pretrained": "birth-vanilla-scratch",
                 "birth-vanilla-scratch": "birth-vanilla-pretrained"}
PERCENT = st.column_config.NumberColumn(format="percent")
PROBABILITY = st.column_config.NumberColumn(format="%.3f")
MAX_CHIPS = 240  # pieces of one document drawn as GLTR chips (15 rows of 16)
LENS_POSITIONS = 12  # the logit lens of a clicked piece: its last positions
FOLDER_FILES = 500  # files listed from an allowed folder
# values of the page's state kept outside widgets (a click in a table or a chart sets them)
EXAMPLE, PINS, DOCUMENT, TOKEN = "errors_example", "errors_pins", "errors_document", "errors_token"


# --- state --------------------------------------------------------------------------------------------------

def seed_clicks(saved: ErrorsState, last: ErrorsState | None) -> None:
    """The clicked example, pins, document and piece as the page opens: a link's (a first visit, or a link that
    brings other values than this session's last state), else this session's own."""
    for key, value in ((EXAMPLE, saved.example), (PINS, saved.pins), (DOCUMENT, saved.document),
                       (TOKEN, saved.token)):
        if last is None or saved != last:
            st.session_state[key] = value
        else:
            st.session_state.setdefault(key, value)


TASK_KEY = "errors_task"  # the task of the model the clicks above were made on


def forget_other_task(task: str) -> None:
    """A model of another task (a classifier, then a language model) reads another file: the example, pins and
    edited text of a classifier, the document and piece of a language model, name lines and pieces it does not
    have. They are dropped from the session and from the page's last state, so the URL no longer carries them
    (issue 63: the classifier's example stayed in the URL of a language model)."""
    before, st.session_state[TASK_KEY] = st.session_state.get(TASK_KEY), task
    if before is None or before == task:
        return
    st.session_state.update({EXAMPLE: None, PINS: (), DOCUMENT: None, TOKEN: None})
    st.session_state.pop("err_edit", None)
    last = page_state.last_state(ErrorsState)
    if last is not None:
        page_state.write(last.replace(example=None, pins=(), edit=None, document=None, token=None))


def save_state(saved: ErrorsState) -> None:
    """The widgets' values and the clicked example, pins, document and piece, into the URL."""
    for key, value in ((EXAMPLE, saved.example), (PINS, saved.pins), (DOCUMENT, saved.document),
                       (TOKEN, saved.token)):
        st.session_state.setdefault(key, value)
    page_state.bind(ErrorsState, page_state.last_state(ErrorsState) or saved,
                    example=st.session_state[EXAMPLE], pins=tuple(st.session_state[PINS]),
                    document=st.session_state[DOCUMENT], token=st.session_state[TOKEN])


def _keep_options(key: str, options: list) -> None:
    """A multiselect's or selectbox's seeded value (from a link) reduced to what it can show."""
    value = st.session_state.get(key)
    if isinstance(value, (list, tuple)):
        st.session_state[key] = [v for v in value if v in options]


# --- the evaluation file --------------------------------------------------------------------------------------

@by_name
@st.cache_resource(show_spinner=False, max_entries=16)
def _bundled_text(path: str, signature: tuple[int, int], held_out: float) -> inputs.EvalText:
    return inputs.read_bundled(inputs.BundledFile(path, Path(path), held_out))


def bundled_text(choice: inputs.BundledFile) -> inputs.EvalText:
    """A bundled file's text (its held-out part where the choice says), read and hashed once per file version
    (an EvalText is frozen: shared)."""
    return _bundled_text(str(choice.path), file_signature(choice.path), choice.held_out)


def choose_file(loaded) -> inputs.EvalText | None:
    """The bundled file, the upload or the allowed folder's file, read as the trainer reads it; a refusal is one
    sentence on screen and None."""
    left, right = st.columns([2, 3])
    source = left.radio("Evaluation file", list(ERRORS_SOURCES), key="err_source", format_func=ERRORS_SOURCES.get)
    if loaded.task == "lm":
        left.radio("A document is", ERRORS_UNITS, key="err_unit", horizontal=True,
                   format_func={"line": "a line", "file": "the whole file"}.get)
    with right:
        try:
            if source == "bundled":
                files = inputs.bundled_files(DATA, loaded.task, loaded.metadata)
                if not files:
                    st.info(f"There is no bundled test file for a {loaded.task} model; upload one.")
                    return None
                labels = [f.label for f in files]
                if st.session_state.get("err_file") not in labels:
                    st.session_state["err_file"] = labels[0]
                label = st.selectbox("Bundled file", labels, key="err_file")
                return bundled_text(files[labels.index(label)])
            if source == "upload":
                upload = st.file_uploader(f"A file: {FORMATS[loaded.task]}", type=["tsv", "txt", "csv"],
                                          key="err_upload", max_upload_size=inputs.MAX_EVAL_MB)
                if upload is None:
                    st.info(f"Upload a file: {FORMATS[loaded.task]}.")
                    return None
                if upload.size > inputs.MAX_EVAL_MB * inputs.MB:
                    raise inputs.EvalFileError(f"{Path(upload.name).name} is over {inputs.MAX_EVAL_MB} MB.")
                return inputs.decode_eval(upload.getvalue(), upload.name)
            allowed = folders.allowed_dirs()
            if not allowed:
                st.info(folders.NOT_ALLOWED)
                return None
            typed = st.text_input("Folder on the server", key="err_folder", placeholder=str(allowed[0]))
            if not typed.strip():
                st.info("Type the path of a folder: " + ", ".join(str(a) for a in allowed) + " or one inside.")
                return None
            folder = folders.resolve_allowed(typed, allowed)
            files = sorted(p.name for p in folder.iterdir() if p.suffix in (".tsv", ".txt", ".csv") and p.is_file()
                           and folders.inside_allowed(p, allowed))[:FOLDER_FILES]
            if not files:
                st.info("That folder has no .tsv, .txt or .csv file.")
                return None
            if loaded.task == "lm":  # several files: one row each on Documents with 'the whole file' (PA2's speakers)
                _keep_options("err_paths", files)
                if not st.session_state.get("err_paths"):
                    st.session_state["err_paths"] = files[:1]
                chosen = st.multiselect("Files", files, key="err_paths")
                if not chosen:
                    st.info("Choose at least one file.")
                    return None
                return inputs.join_files([inputs.read_eval_path(folder / f) for f in chosen])
            if st.session_state.get("err_path") not in files:
                st.session_state["err_path"] = files[0]
            return inputs.read_eval_path(folder / st.selectbox("File", files, key="err_path"))
        except (DataError, folders.FolderError, OSError) as exc:
            st.warning(plain(exc))
            return None


# --- cached core calls: per (checkpoint version, file hash) -------------------------------------------------
# st.cache_resource: every session and run gets the same result object (st.cache_data unpickled a copy of a
# language model's 20,000-row table on every run of the page). Shared results are read-only: the views filter,
# sort and slice them into new frames (pandas copies on write) and never write into one; their arrays are made
# unwritable, so a view that tried would fail instead of changing another session's table.


def _read_only(result):
    for value in vars(result).values():
        if isinstance(value, np.ndarray):
            value.flags.writeable = False
    return result


@by_name
@st.cache_resource(show_spinner="Scoring every example…", max_entries=16)
def _classifier(version: tuple, digest: str, name: str, _loaded, _source) -> classify.ClassifierErrors:
    pairs = inputs.classifier_pairs(_source, _loaded.labels)
    return _read_only(classify.score_classifier(_loaded.model, _loaded.tokenizer, _loaded.labels, pairs, name,
                                                _source.name))


@by_name
@st.cache_resource(show_spinner="Scoring every piece…", max_entries=8)
def _language_model(version: tuple, digest: str, unit: str, name: str, _loaded, _source) -> lm.LanguageModelErrors:
    return _read_only(lm.score_lm(_loaded.model, _loaded.tokenizer, _source.files(), name, unit))


@by_name
@st.cache_resource(show_spinner="Answering every question (greedy decoding)…", max_entries=16)
def _birthplace(version: tuple, digest: str, name: str, _loaded, _source) -> birthplace.BirthplaceErrors:
    pairs = inputs.birthplace_pairs(_source)
    baseline = _loaded.metadata.get("baseline_place") or None
    return _read_only(birthplace.birthplace_errors(_loaded.model, _loaded.tokenizer, pairs, baseline, name,
                                                   _source.name))


def result_key(loaded, name: str, source: inputs.EvalText) -> tuple:
    """What a result is a function of: the model's version, the file's hash, what a document is (language models)
    and the name the result carries."""
    unit = st.session_state.get("err_unit", "line") if loaded.task == "lm" else ""
    return model_version(loaded), source.digest, unit, name


def evaluate(loaded, name: str, source: inputs.EvalText):
    """The task's result for this file, shared read-only by every session (raises DataError with one sentence)."""
    version, digest, unit, _ = result_key(loaded, name, source)
    if loaded.task == "classify":
        return _classifier(version, digest, name, loaded, source)
    if loaded.task == "lm":
        return _language_model(version, digest, unit, name, loaded, source)
    return _birthplace(version, digest, name, loaded, source)


@by_name
@st.cache_resource(show_spinner=False, max_entries=128)
def _derived(key: tuple, _compute: Callable):
    return _compute()


def derived(loaded, name: str, source: inputs.EvalText, what: tuple, compute: Callable):
    """`compute()`, a value read from the shared result (its caption, the default view's table and its column
    widths), once per (result, what) per server: a page switch reads it instead of computing it again. Shared
    read-only like the result: `what` names everything else it depends on."""
    return _derived((*result_key(loaded, name, source), *what), compute)


DEFAULT_FILTERS = ("filtered", (), (), "all", "", "line", False)  # the examples table as a page opens


def per_view(loaded, name: str, source: inputs.EvalText, filters: tuple, what: str, compute: Callable):
    """`derived` for the examples table as a switch lands on it (every example, by line); computed per run for the
    filters someone chose (a filtered copy of a large file per search typed would fill the server's memory)."""
    return derived(loaded, name, source, (*filters, what), compute) if filters == DEFAULT_FILTERS else compute()


def caption(loaded, name: str, source: inputs.EvalText, result) -> str:
    """The result's one-line summary (core's caption), once per result."""
    return derived(loaded, name, source, ("caption",), result.caption)


def held_out_line(loaded, name: str, source: inputs.EvalText, result) -> str | None:
    """On the held-out part of a language model's own corpus: what this perplexity scores and why the trainer's
    (Training curves) differs (core.lens.perplexities; issue 63: 2.637 here, 2.678 there). None elsewhere."""
    if loaded.task != "lm" or st.session_state.get("err_source") != "bundled" or loaded.step is not None:
        return None
    files = inputs.bundled_files(DATA, loaded.task, loaded.metadata)
    choice = next((f for f in files if f.label == st.session_state.get("err_file")), None)
    dev = trainer_dev(name, loaded.metadata, loaded.history)
    if choice is None or not choice.held_out or dev is None or PurePath(choice.path).name != dev.file:
        return None
    whole = bundled_text(inputs.BundledFile(choice.label, choice.path))
    split, skipped = trainer_split(whole.text, dev.fraction)
    n_ids = derived(loaded, name, source, ("trainer split pieces",), lambda: len(loaded.tokenizer.encode(split)))
    pieces = int(result.tokens["loss"].notna().sum())
    return errors_sentence(dev, result.perplexity, pieces, n_ids, skipped)


@by_name
@st.cache_resource(show_spinner="Integrated gradients…", max_entries=64)  # shared read-only, like the results
def _attribution(version: tuple, text: str, label: str, _loaded):
    return _read_only(classify.class_attribution(_loaded.model, _loaded.tokenizer, _loaded.labels, text, label))


def _with_widths(frame: pd.DataFrame, room: int, config: dict | None = None) -> tuple[pd.DataFrame, dict]:
    """A table and its column_config (ui.display.fitted_columns): kept together with `derived`."""
    return frame, fitted_columns(frame, room, config)


def _csv(frame: pd.DataFrame, label: str, filename: str, key: str, where=st, index: str | None = None) -> None:
    """A download of the frame as CSV (its index a first column named `index`, if given), written when the button
    is clicked (ui.display.csv_download): writing every piece of a language model's file took ~0.3 s of every
    run of the page."""
    csv_download(label, lambda: frame if index is None else frame.reset_index(names=index), filename, key, where)


def _safe_name(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in name)[:80]


# --- classifiers and birthplace models: the examples ----------------------------------------------------------

def _labels_of(result) -> list[str]:
    if isinstance(result, classify.ClassifierErrors):
        return result.labels
    return sorted(set(result.frame["gold"]) | set(result.frame["predicted"]))


def _confusion(loaded, digest: str, result) -> None:
    """The matrix; a click on a cell (when it changed) sets the table's gold and predicted filters to it."""
    labels = result.labels
    title = "Gold by predicted: click a cell"
    fig = figure((model_version(loaded), digest, "confusion"),  # built once per result, shared
                 lambda: viz.confusion_matrix(result.confusion().values, labels, title=title), len(labels) ** 2)
    event = show_figure(fig, f"{result.model}-confusion", key="err_confusion", on_select=True)
    points = list(event.selection.points) if event is not None and event.selection else []
    clicked = [int(p["point_index"]) for p in points if "point_index" in p]
    if clicked and clicked != st.session_state.get("err_confusion_clicked"):
        gold, predicted = divmod(clicked[0], len(labels))
        st.session_state["err_gold"], st.session_state["err_pred"] = [labels[gold]], [labels[predicted]]
        st.session_state["err_outcome"] = "all"
        st.session_state[EXAMPLE] = None
    st.session_state["err_confusion_clicked"] = clicked


def _filtered(loaded, name: str, source: inputs.EvalText, result) -> tuple[pd.DataFrame, tuple]:
    """The filter and sort widgets, and (the examples they leave, sorted; the choices, a key for `derived`)."""
    frame = result.frame
    labels = derived(loaded, name, source, ("labels",), lambda: _labels_of(result))
    for key in ("err_gold", "err_pred"):
        _keep_options(key, labels)
    columns = st.columns([3, 3, 2])
    gold = columns[0].multiselect("Gold", labels, key="err_gold", placeholder="any")
    predicted = columns[1].multiselect("Predicted", labels, key="err_pred", placeholder="any")
    outcome = columns[2].radio("Outcome", ERRORS_OUTCOMES, key="err_outcome", horizontal=True)
    columns = st.columns([3, 2, 2])
    search = columns[0].text_input("Search the text", key="err_search", max_chars=page_state.MAX_ERRORS_TEXT)
    sorts = [s for s in ERRORS_SORTS if s in frame.columns]
    if st.session_state.get("err_sort") not in sorts:
        st.session_state["err_sort"] = "line"
    sort = columns[1].selectbox("Sort by", sorts, key="err_sort")
    descending = columns[2].checkbox("Descending", key="err_desc")
    choices = ("filtered", tuple(gold), tuple(predicted), outcome, search, sort, descending)
    return per_view(loaded, name, source, choices, "view", lambda: classify.filter_examples(
        frame, gold, predicted, outcome, search).sort_values(sort, ascending=not descending, kind="stable")), choices


def _example_table(view: pd.DataFrame) -> tuple[pd.DataFrame, dict]:
    """The examples table's columns and their widths."""
    probability = "p(predicted)" if "p(predicted)" in view else "confidence"
    first = "name" if "name" in view else "text"  # a birthplace question is 'Where was NAME born?': the name says it
    shown = view[[c for c in (first, "gold", "predicted", "right", probability, "loss") if c in view]]
    config = {probability: {**PROBABILITY, "label": "p"}, "loss": PROBABILITY}
    return shown, fitted_columns(shown, MAIN_WIDTH - 40, config, index=True)  # 40: the ticks


def _pick_example(view: pd.DataFrame, frame: pd.DataFrame, table: tuple[pd.DataFrame, dict]) -> int | None:
    """A row clicked in the table (when the click changed), else the kept example while the filters keep it in the
    table, else the view's first wrong (a search that left the kept example out showed it still)."""
    shown, config = table
    event = st.dataframe(shown, on_select="rerun", selection_mode="single-row", key="err_table", height=280,
                         column_config=config)
    rows = list(event.selection.rows) if event is not None else []
    if rows and rows != st.session_state.get("err_table_clicked"):
        st.session_state[EXAMPLE] = int(view.index[rows[0]])
    st.session_state["err_table_clicked"] = rows
    chosen = st.session_state.get(EXAMPLE)
    if chosen is None or chosen not in view.index:
        wrong = view[~view["right"]]
        chosen = int((wrong if len(wrong) else view).index[0]) if len(view) else None
        st.session_state[EXAMPLE] = chosen
    return chosen


def examples_view(loaded, name: str, source: inputs.EvalText, result) -> None:
    frame = result.frame
    if isinstance(result, classify.ClassifierErrors):
        _confusion(loaded, source.digest, result)
    else:
        with st.expander("The most common mistakes (gold, predicted, times)"):
            top, config = derived(loaded, name, source, ("mistakes",), lambda: _with_widths(
                result.mistakes().head(20), EXPANDER_WIDTH))
            st.dataframe(arrow_table(top), hide_index=True, column_config=config)  # Arrow once per result
    view, filters = _filtered(loaded, name, source, result)
    wrong = per_view(loaded, name, source, filters, "wrong", lambda: int((~view["right"]).sum()))
    st.caption(f"{len(view)} of {len(frame)} examples match; {wrong} of them wrong. Click a row to open it.")
    left, right = st.columns(2)
    _csv(view, "These rows (CSV)", f"{_safe_name(name)}-errors-filtered.csv", "err_csv_view", left, index="example")
    _csv(frame, "Every example (CSV)", f"{_safe_name(name)}-errors.csv", "err_csv", right, index="example")
    if view.empty:
        st.info("No example matches these filters.")
        return
    number = _pick_example(view, frame, per_view(loaded, name, source, filters, "table",
                                                lambda: _example_table(view)))
    if number is None:
        return
    if isinstance(result, classify.ClassifierErrors):
        classifier_example(loaded, name, result, number)
    else:
        birthplace_example(name, result, number)
    pinned(loaded, result)


def _attention(loaded, name: str, text: str, key: str) -> None:
    """The example's attention (one layer and head, inline) and a link to the Attention page with it."""
    config = loaded.config
    for widget, count in (("err_layer", config.n_layer), ("err_head", config.n_head)):
        if not 0 <= int(st.session_state.get(widget, 0)) < count:
            st.session_state[widget] = 0
    columns = st.columns([1, 1, 3])
    layer = columns[0].selectbox("Layer", list(range(config.n_layer)), key="err_layer")
    head = columns[1].selectbox("Head", list(range(config.n_head)), key="err_head")
    params = page_state.page_url(AttentionState(text=text, layer=layer, head=head), model=name)
    with columns[2]:
        try:
            st.page_link("pages/attention.py", label="Open it on the Attention page", icon=":material/grid_on:",
                         query_params=params)
        except StreamlitAPIException:  # the attention page is not in this app's navigation
            st.text("Attention page: " + page_state.link_text("attention", params))
    try:
        _, run = attention_run(loaded, text, False)
    except (AttentionInputError, TraceError, ValueError) as exc:
        st.warning(plain(exc))
        return
    fig = attention_viz.attention_heatmap(run.attention[layer, head], run.tokens, allowed=run.allowed,
                                          title=figure_title(f"Attention, layer {layer} head {head}", name, text))
    show_figure(fig, f"{name}-example-attention", key=f"{key}_attention")


def classifier_example(loaded, name: str, result: classify.ClassifierErrors, number: int) -> None:
    row = result.frame.loc[number]
    verdict = "right" if row["right"] else "wrong"
    st.subheader(f"Example {number} (line {int(row['line'])}): {verdict}")
    st.text(row["text"])
    st.caption(plain(f"Gold {row['gold']} (p = {row['p(gold)']:.3f}); predicted {row['predicted']} "
                     f"(p = {row['p(predicted)']:.3f}); loss {row['loss']:.3f}; {int(row['pieces'])} pieces."))
    if st.button("Pin this example (two are shown side by side)", key="err_pin"):
        pins = [p for p in st.session_state.get(PINS, ()) if p != str(number)]
        st.session_state[PINS] = tuple((pins + [str(number)])[-2:])
    version = model_version(loaded)
    # one above the other: side by side at 1024 px the probability bars had ~60 px (issue 63), and a wider left
    # column folded the attribution chips' labels over their title
    probs, attribution = st.container(), st.container()
    with attribution:
        methods = {}
        for label, role in ((row["predicted"], "predicted"), (row["gold"], "gold")):
            if role == "gold" and label == row["predicted"]:
                continue
            try:
                salience = _attribution(version, row["text"], label, loaded)
            except (classify.ClassifierError, wf.WhereFromError) as exc:
                st.warning(plain(exc))
                break
            methods[role] = salience
        if methods:
            first = next(iter(methods.values()))
            chips = figure((version, row["text"], tuple(methods), row["predicted"], row["gold"], "chips"),
                           lambda: where_viz.salience_chips(
                               first.tokens, {m: s.integrated_gradients for m, s in methods.items()},
                               title="Integrated gradients of each class's log-probability",
                               pieces="the text's pieces, in order"), len(first.tokens))
            show_figure(chips, f"{name}-example-attribution", key="err_attribution")
            st.caption(plain("; ".join(
                f"{m} ({s.answer_piece}): the pieces add up to {s.integrated_gradients.sum():+.3f}, log p changes by "
                f"{s.log_prob - s.baseline_log_prob:+.3f} from the zero-embedding baseline"
                for m, s in methods.items()) + "."))
    with probs:
        # a new example, or a box with no text yet (seeded None from a state saved on a view without the box, then
        # kept over a page switch: seen under AppTest), starts from the example's text
        if st.session_state.get("err_edit_for") != number or st.session_state.get("err_edit") is None:
            st.session_state["err_edit"] = row["text"]
            st.session_state["err_edit_for"] = number
        edited = st.text_input("Edit the text and re-predict", key="err_edit",
                               max_chars=page_state.MAX_ERRORS_TEXT)
        series = {"as read": result.probabilities[number]}
        if edited.strip() and edited != row["text"]:
            again = classify.predict_text(loaded.model, loaded.tokenizer, result.labels, edited)
            series["edited"] = again.to_numpy()
            st.caption(plain(f"Edited: predicted {again.idxmax()} (p = {again.max():.3f}); p(gold {row['gold']}) "
                             f"{row['p(gold)']:.3f} -> {again[row['gold']]:.3f}."))
        elif not edited.strip():
            st.info("Type a text to re-predict.")
        bars = figure((version, row["text"], row["gold"], edited if "edited" in series else None, "probabilities"),
                      lambda: viz.class_probability_bars(result.labels, series, gold=row["gold"],
                                                         title="The probability of each label"), len(result.labels))
        show_figure(bars, f"{name}-example-probabilities", key="err_probabilities")
    # drawn when asked for: a heatmap redrawn on every row click made selecting an example slow in the browser
    if st.toggle("Its attention (inline, and a link to the Attention page)", key="err_attention"):
        _attention(loaded, name, row["text"], "err_example")


def birthplace_example(name: str, result: birthplace.BirthplaceErrors, number: int) -> None:
    row = result.frame.loc[number]
    st.subheader(f"Question {number} (line {int(row['line'])}): {'right' if row['right'] else 'wrong'}")
    st.text(row["text"])
    st.caption(plain(f"True birthplace {row['gold']}; answered {row['predicted'] or '(nothing)'} "
                     f"(probability {row['confidence']:.3f})."))
    params = page_state.page_url(page_state.ProbeState(tab="ask", name=row["name"]), model=name)
    try:
        st.page_link("pages/probe.py", label="Open it on the Birthplace probe", icon=":material/travel_explore:",
                     query_params=params, help="candidates, attention, where the answer comes from")
    except StreamlitAPIException:
        st.text("Birthplace probe: " + page_state.link_text("probe", params))
    if st.button("Pin this question (two are shown side by side)", key="err_pin"):
        pins = [p for p in st.session_state.get(PINS, ()) if p != str(number)]
        st.session_state[PINS] = tuple((pins + [str(number)])[-2:])


def pinned(loaded, result) -> None:
    pins = [int(p) for p in st.session_state.get(PINS, ()) if p.isdigit() and int(p) in result.frame.index]
    if not pins:
        return
    st.subheader("Pinned, side by side")
    columns = st.columns(2)
    for column, number in zip(columns, pins):
        row = result.frame.loc[number]
        with column:
            st.text(f"{number}: {row['text']}")
            if isinstance(result, classify.ClassifierErrors):
                series = {f"example {number}": result.probabilities[number]}
                show_figure(viz.class_probability_bars(result.labels, series, gold=row["gold"]),
                            f"pinned-{number}", key=f"err_pinned_{number}")
            else:
                st.caption(plain(f"True {row['gold']}; answered {row['predicted']} (p = {row['confidence']:.3f})."))
            if st.button("Unpin", key=f"err_unpin_{number}"):
                st.session_state[PINS] = tuple(p for p in st.session_state.get(PINS, ()) if p != str(number))
                st.rerun()


# --- slices, calibration, two models --------------------------------------------------------------------------

MAX_SLICE_BARS = 20


def slices_view(loaded, name: str, source: inputs.EvalText, result) -> None:
    frame = result.frame
    labels = _labels_of(result)
    by_gold = slices.by_column(frame, "gold", labels)
    shown = by_gold if len(by_gold) <= MAX_SLICE_BARS else by_gold.nlargest(MAX_SLICE_BARS, "count", keep="first")
    title = "Accuracy by gold label" if len(shown) == len(by_gold) else (
        f"Accuracy by gold label: the {len(shown)} most frequent of {len(by_gold)}")
    show_figure(viz.slice_bars(shown, title=title), f"{name}-slices-gold", key="err_slices_gold")
    show_figure(viz.slice_bars(slices.by_length(frame), title="Accuracy by length in pieces"),
                f"{name}-slices-length", key="err_slices_length")
    columns = st.columns([2, 1], vertical_alignment="bottom")  # [3, 1] cut the checkbox to "Regular expressi…"
    pattern = columns[0].text_input("A slice of your own: a word, or a regular expression", key="err_pattern",
                                    placeholder="a word (Silva), or with Regular expression: - (a hyphen)",
                                    max_chars=slices.MAX_PATTERN_CHARS)
    regex = columns[1].checkbox("Regular expression", key="err_regex")
    if pattern.strip():
        try:
            mine = slices.by_pattern(frame, pattern, regex)
        except slices.SliceError as exc:
            st.warning(plain(exc))
        else:
            show_figure(viz.slice_bars(mine, title="Your slice against the rest"), f"{name}-slices-pattern",
                        key="err_slices_pattern")
            _slice_table(mine, "err_csv_pattern", f"{_safe_name(name)}-slice.csv")
    with st.expander("The numbers: every slice with its count and 95% interval"):
        table = pd.concat([by_gold.assign(by="gold"), slices.by_length(frame).assign(by="length")],
                          ignore_index=True)
        _slice_table(table, "err_csv_slices", f"{_safe_name(name)}-slices.csv")


def _slice_table(table: pd.DataFrame, key: str, filename: str) -> None:
    st.dataframe(table, hide_index=True, column_config=fitted_columns(table, MAIN_WIDTH, {
        "accuracy": PERCENT, "low": PERCENT, "high": PERCENT, "mean loss": PROBABILITY}))
    _csv(table, "This table (CSV)", filename, key)


def calibration_view(loaded, name: str, source: inputs.EvalText, result) -> None:
    frame = result.frame
    confidence = frame["p(predicted)"] if "p(predicted)" in frame else frame["confidence"]
    table = slices.reliability_table(confidence, frame["right"])
    ece = slices.expected_calibration_error(table)
    st.write(plain(f"Expected calibration error: {ece:.3f} (the mean gap between confidence and accuracy, "
                   f"weighted by the examples in each bin); mean confidence {confidence.mean():.3f} against "
                   f"accuracy {frame['right'].mean():.3f}."))
    measure = ("confidence (probability of the predicted label)" if "p(predicted)" in frame
               else "confidence (probability of the greedy answer)")
    show_figure(reliability_figure({name: table}, title="Reliability: accuracy by confidence", confidence=measure),
                f"{name}-reliability", key="err_reliability")
    shown = table.copy()  # an empty bin says so in words (a number column wrote "None" in it)
    empty = shown["count"] == 0
    shown["accuracy"] = ["no example" if e else f"{v:.1%}" for e, v in zip(empty, shown["accuracy"], strict=True)]
    shown["mean_confidence"] = ["" if e else f"{v:.3f}" for e, v in zip(empty, shown["mean_confidence"], strict=True)]
    st.dataframe(shown, hide_index=True, column_config=fitted_columns(shown, MAIN_WIDTH, {
        "low": PROBABILITY, "high": PROBABILITY}))


def _other_model(loaded, name: str):
    """The second checkpoint of the same task (picked; by default the bundled pair), loaded, or None."""
    others = [i for i in all_checkpoints() if not i.error and i.task == loaded.task and i.name != name]
    if not others:
        st.info(f"There is no other {loaded.task} checkpoint to compare with.")
        return None, None
    names = [i.name for i in others]
    if st.session_state.get("err_vs") not in names:
        st.session_state["err_vs"] = DEFAULT_PAIRS.get(name) if DEFAULT_PAIRS.get(name) in names else names[0]
    other = st.selectbox("Compare with", names, key="err_vs")
    return other, load_checkpoint(others[names.index(other)])


def lettered_models(frame: pd.DataFrame, first: str, second: str) -> pd.DataFrame:
    """The disagreements table with the two models as A and B in its headers and in its 'who is right' column
    (named 'right')."""
    letters = {first: "A", second: "B"}
    columns = {c: letters[c] if c in letters else f"p ({letters[c[3:-1]]})" if c.startswith("p (") and c[3:-1] in
               letters else c for c in frame.columns}
    out = frame.rename(columns=columns)
    if "who is right" in out:  # "right" fits its column at 1024 px; the caption says what it holds
        out["who is right"] = out["who is right"].map(lambda v: letters.get(v, v))
        out = out.rename(columns={"who is right": "right"})
    return out


def compare_view(loaded, name: str, source: inputs.EvalText, result) -> None:
    other_name, other = _other_model(loaded, name)
    if other is None:
        return
    try:
        second = evaluate(other, other_name, source)
    except DataError as exc:
        st.warning(plain(f"{other_name}: {exc}"))
        return
    st.markdown("**" + plain(caption(other, other_name, source, second)) + "**")
    if loaded.task == "lm":
        lm_compare(name, result, second)
        return
    comparison = classify.compare_classifiers(result, second)
    st.write(plain(comparison.caption()))
    table = comparison.table()
    shown = table.rename(index=lambda v: f"{name} {v}", columns=lambda v: f"{other_name} {v}")
    st.dataframe(shown, column_config=fitted_columns(shown, MAIN_WIDTH, index=True))
    differ = comparison.disagreements()
    lettered = lettered_models(differ, name, other_name)  # the names cut in 8 columns at 1024 px (issue 63)
    st.caption(plain(f"The {len(differ)} examples they predict differently; A is {name}, B is {other_name}, the last "
                     "column says which is right (the CSV names them)."))
    st.dataframe(lettered, column_config=fitted_columns(lettered, MAIN_WIDTH, {  # every column on screen at 1024 px,
        c: PROBABILITY for c in lettered.columns if c.startswith("p (")}, index=True), height=300)  # the index too
    _csv(differ, "The disagreements (CSV)", f"{_safe_name(name)}-vs-{_safe_name(other_name)}.csv", "err_csv_compare",
         index="example")


# --- language models -----------------------------------------------------------------------------------------

def documents_view(loaded, name: str, source: inputs.EvalText, result: lm.LanguageModelErrors) -> None:
    docs = result.documents
    for merged in result.one_document_per_file:
        st.info(plain(f"{merged} is one document: this tokenizer splits its lines differently from the whole text."))
    if 1 < len(docs) <= 12:
        whole = st.session_state.get("err_unit") == "file"  # one document per file: name the files (PA2's speakers)
        labels = list(docs["file"]) if whole else [f"{f} #{d}" for f, d in zip(docs["file"], docs["document"])]
        show_figure(viz.document_bars(labels, {name: docs["perplexity"]},
                                      title="Perplexity per file" if whole else "Perplexity per document"),
                    f"{name}-documents", key="err_doc_bars")
    single = docs["file"].nunique() == 1  # one file: its name is in the caption above, not in every row
    ordered, config = derived(loaded, name, source, ("documents",), lambda: _with_widths(
        docs.sort_values("loss", ascending=False, kind="stable").drop(columns=["file"] if single else []),
        MAIN_WIDTH, {"loss": PROBABILITY, "perplexity": st.column_config.NumberColumn(format="%.4g")}))
    st.caption(f"{len(docs)} documents, hardest first (the highest mean loss per piece); click a row to open the "
               "document piece by piece.")

    def opened() -> None:  # a row clicked: that document on the Tokens view (a callback: before the view's radio)
        rows = st.session_state["err_docs_table"].selection.rows
        if rows:
            st.session_state[DOCUMENT] = docs.index.get_loc(ordered.index[rows[0]])
            st.session_state[TOKEN], st.session_state["err_view"] = None, "tokens"
    st.dataframe(arrow_table(ordered), hide_index=True, height=260, column_config=config,  # once per result
                 on_select=opened, selection_mode="single-row", key="err_docs_table")
    _csv(docs, "Every document (CSV)", f"{_safe_name(name)}-documents.csv", "err_csv_docs")
    st.subheader("The most surprising pieces")
    worst, config = derived(loaded, name, source, ("surprising",), lambda: _with_widths(
        result.surprising(20).drop(columns=["file"] if single else []), MAIN_WIDTH, {"loss": PROBABILITY}))
    st.dataframe(arrow_table(worst), hide_index=True, column_config=config)
    _csv(result.tokens, "Every piece (CSV)", f"{_safe_name(name)}-pieces.csv", "err_csv_tokens")


def tokens_view(loaded, name: str, source: inputs.EvalText, result: lm.LanguageModelErrors) -> None:
    docs = result.documents
    shares = derived(loaded, name, source, ("bucket shares",), result.bucket_shares)
    st.write(plain("The rank the model gave each true piece: " + ", ".join(
        f"{bucket} {share:.0%}" for bucket, share in shares.items()) + " of the pieces (GLTR's colours)."))
    hardest = int(docs["loss"].idxmax()) if docs["loss"].notna().any() else 0  # a row of the table (files in turn)
    chosen = st.session_state.get(DOCUMENT)
    if chosen is None or not 0 <= int(chosen) < len(docs):
        chosen = st.session_state[DOCUMENT] = hardest
    st.session_state["err_document_box"] = int(chosen)  # the box shows the document the page holds

    def moved() -> None:
        st.session_state[DOCUMENT], st.session_state[TOKEN] = int(st.session_state["err_document_box"]), None
    number = st.number_input(f"Document (0 to {len(docs) - 1}; the hardest is #{hardest})", 0, len(docs) - 1,
                             key="err_document_box", on_change=moved)
    doc = docs.iloc[int(number)]
    pieces = result.tokens[(result.tokens["file"] == doc["file"]) & (result.tokens["document"] == doc["document"])]
    drawn = pieces.head(MAX_CHIPS)
    where = f"{doc['file']} #{int(doc['document'])}" if docs["file"].nunique() > 1 else f"Document {int(number)}"
    st.caption(plain(f"{where}: {int(doc['tokens scored'])} pieces scored, perplexity "
                     f"{doc['perplexity']:.4g}" + (f"; its first {MAX_CHIPS} pieces drawn" if len(pieces) > MAX_CHIPS
                                                   else "") + ". Click a piece to open it."))
    token = st.session_state.get(TOKEN)
    positions = list(drawn["position"])
    fig = viz.gltr_pieces(list(drawn["piece"]), list(drawn["bucket"]), list(drawn["loss"].fillna(0.0)),
                          selected=positions.index(token) if token in positions else None)
    event = show_figure(fig, f"{name}-gltr", key="err_gltr", on_select=True)
    points = list(event.selection.points) if event is not None and event.selection else []
    clicked = [p["customdata"][0] for p in points if p.get("customdata")]
    if clicked and clicked != st.session_state.get("err_gltr_clicked"):
        st.session_state[TOKEN] = token = int(positions[int(clicked[0])])
    st.session_state["err_gltr_clicked"] = clicked
    if token is None or token not in positions:
        return
    piece_view(loaded, name, result, str(doc["file"]), int(token))


def piece_view(loaded, name: str, result: lm.LanguageModelErrors, file: str, position: int) -> None:
    """The clicked piece: where the model looked when it predicted it, and the logit lens of that piece."""
    row = result.tokens[(result.tokens["file"] == file) & (result.tokens["position"] == position)].iloc[0]
    ids, labels = result.context(file, position)
    st.subheader(plain(f"Piece {position}: {quoted_token(row['piece'])}"))
    st.caption(plain(f"Loss {row['loss']:.3f}, rank {int(row['rank'])} ({row['bucket']}); the model's top guess "
                     f"was {quoted_token(row['top guess'])}, after {len(ids)} pieces of context."))
    try:
        rec = trace(loaded.model, ids, labels, activations=True)
    except TraceError as exc:
        st.warning(plain(exc))
        return
    if not 0 <= int(st.session_state.get("err_piece_layer", 0)) < loaded.config.n_layer:
        st.session_state["err_piece_layer"] = 0  # a link's layer this model does not have
    layer = st.selectbox("Layer", list(range(loaded.config.n_layer)), key="err_piece_layer")
    weights = rec.attention[layer][:, -1, :]  # (n_head, T): the last context position, which predicts the piece
    show_figure(attention_viz.token_attention_figure(weights, rec.tokens, len(ids) - 1, rec.allowed[-1],
                                                     title=f"Where each head of layer {layer} looks"),
                f"{name}-piece-attention", key="err_piece_attention")
    try:
        lens = wf.logit_lens(loaded.model, loaded.tokenizer, rec, int(result.ids[file][position]))
    except wf.WhereFromError as exc:
        st.warning(plain(exc))
        return
    st.write(plain(lens.sentence()))
    keep = slice(max(0, len(ids) - LENS_POSITIONS), len(ids))
    fig = where_viz.logit_lens_heatmap(lens.answer_prob[:, keep], [r[keep] for r in lens.top_pieces],
                                       rec.tokens[keep], lens.layers, lens.answer_piece,
                                       title="Logit lens: the piece's probability after each layer")
    # the figure's own height suits a question of ~20 pieces; a piece early in its block has a few of context
    fig.update_layout(height=max(320, 170 + 30 * len(rec.tokens[keep])))
    show_figure(fig, f"{name}-piece-lens", key="err_piece_lens")


def lm_compare(name: str, first: lm.LanguageModelErrors, second: lm.LanguageModelErrors) -> None:
    try:
        comparison = lm.compare_lms(first, second)
    except lm.LanguageModelError as exc:
        st.warning(plain(exc))
        return
    st.write(plain(comparison.caption()))
    show_figure(viz.loss_by_position(comparison.by_position(), [first.model, second.model],
                                     title="Mean loss by position in the block"), f"{name}-by-position",
                key="err_by_position")
    tokens = comparison.tokens
    left, right = st.columns(2)
    for column, model, ascending in ((left, first.model, True), (right, second.model, False)):
        best = tokens.sort_values("difference", ascending=ascending, kind="stable").head(10)
        column.caption(plain(f"Where {model} is better by the most"))
        difference = f"loss {first.model} - {second.model}"
        shown = best[["piece", "position", "difference"]].rename(columns={"difference": difference})
        column.dataframe(shown, hide_index=True, column_config=fitted_columns(shown, EXPANDER_WIDTH // 2 + 20, {
            difference: PROBABILITY}))
    _csv(tokens, "Both models, piece by piece (CSV)", f"{_safe_name(first.model)}-vs-{_safe_name(second.model)}.csv",
         "err_csv_lm_compare")


VIEWS = {("classify", "examples"): examples_view, ("classify", "slices"): slices_view,
         ("classify", "calibration"): calibration_view, ("classify", "compare"): compare_view,
         ("birthplace", "examples"): examples_view, ("birthplace", "slices"): slices_view,
         ("birthplace", "calibration"): calibration_view, ("birthplace", "compare"): compare_view,
         ("lm", "documents"): documents_view, ("lm", "tokens"): tokens_view, ("lm", "compare"): compare_view}
