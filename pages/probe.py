"""Birthplace probe: what does a birthplace model retrieve from its pretraining, and what does it make up?

Storyboard: birthplace checkpoints to compare (default: all) -> three lazy tabs, each opening with the picker of
the model for the details (beside the name on Ask: the answers start above the fold at 1024x768), then one
`core.lens.probe` call and `core.figures` figures: Ask (one name: greedy answer, candidates, corpus evidence,
attention at the answer; drawn by ui/probe_views.py), Fabricate (names nobody wrote about: the fallback
strategy), Dev set (assignment-exact accuracy, evidence categories, reliability, one example at a time;
ui/probe_views.py), Edit (change one birthplace and score what else moved; ui/probe_edit.py).
Results are cached per (checkpoint file, modification time, input). The tab, the name and the focus model
are in the URL (ui.page_state.ProbeState). User text is shown only with st.text / st.code / dataframes /
escaped plotly.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from core.data.datasets import DataError
from core.data.world_tables import LOCALES
from core.figures import probe as viz
from core.io.tables import table_csv
from core.lens.probe import corpus, fabricated
from core.lens.probe.evaluation import context_length
from core.lens.probe.questions import ProbeInput, fit_name, name_from_question, question_for, read_probe_input
from core.text import markdown_escape as plain
from ui import page_state, where_from_view
from ui.display import EXPANDER_WIDTH, fitted_columns, show_figure
from ui.kept_edits import edited_mark, with_kept_edits
from ui.model_picker import PageModels, checkpoint_picker
from ui.page_caches import cached_people, probe_data  # cached once per server
from ui.page_state import PROBE_TABS, ProbeState
from ui.probe_edit import edit_tab
from ui.probe_views import PERCENT, Probe, cached_answers, dev_tab, pick_focus, show_example, warn_unknown
from ui.shared_caches import all_checkpoints, derived, load_checkpoint, model_version
from ui.training_steps import show_answers_by_step

TABS = tuple(PROBE_TABS.values())
# The model whose details the page opens on: pretrained on the corpus, so it can retrieve what it read
PROBE_MODELS = ("birth-vanilla-pretrained", "birth-vanilla-scratch", "birth-synthesizer-pretrained")


def restore_state(data: corpus.ProbeData) -> ProbeState:
    """Widgets from the URL on a first visit or a link, else from this session's last visit (page switches)."""
    saved, _ = page_state.restore(ProbeState)
    if st.session_state.get("probe_ask") is None:  # no name in the link: the first dev question's
        st.session_state["probe_ask"] = (name_from_question(data.dev_pairs[0][0]) if data.dev_pairs
                                         else "Ada Lovelace")
    return saved


def save_state(focus: str) -> None:
    """The name is in links from the Ask tab only (the other tabs do not show it)."""
    state = page_state.current(ProbeState, page_state.last_state(ProbeState), focus=focus)
    page_state.write(state, shown=state if state.tab == "ask" else state.replace(name=None))


def world_folder(models: dict, focus: str | None) -> Path:
    """The world the probe reads for these models: the focus model's training corpus first (corpus.world_dir)."""
    trained_on = [d.get("path", "") for m in (focus, *models) if m in models
                  for d in models[m].metadata.get("data") or [] if isinstance(d, dict)]
    return corpus.world_dir(trained_on)


def ask_tab(p: Probe) -> None:
    """A fragment (issue 45): a new name, the model for the details and the tab's views rerun the tab alone, not
    the sidebar, the title and the tabs, which the browser drew again on every name; the URL follows."""
    _ask_fragment(p, page_state.PageRun())


@st.fragment
def _ask_fragment(p: Probe, page_run: page_state.PageRun) -> None:
    rerun = page_run.fragment_rerun()
    if rerun and world_folder(p.models, st.session_state.get("probe_focus")) != p.data.folder:
        st.rerun(scope="app")  # a model for the details trained on another world: the page reads that world
    ask_view(p)
    if rerun:
        save_state(p.focus)  # the page's run saves after its tabs; the fragment's own rerun saves here


def ask_view(p: Probe) -> None:
    name_box, focus_box = st.columns([3, 2])  # one row: the answers start above the fold at 1024x768
    pick_focus(p, focus_box)
    text = name_box.text_input("A name, or a question 'Where was NAME born?'", key="probe_ask")
    asked = read_probe_input(text)
    if not asked.problem:  # a name too long for a model's context is cut, with a note (else it reads a tail)
        fitted = fit_name(asked.name, {m: (loaded.tokenizer, context_length(loaded.model))
                                       for m, loaded in p.models.items()}, p.data.labels,
                          derived(p.data, "longest dev name",  # once per world, not per rerun (issue 52 item 5)
                                  lambda: max((len(name_from_question(q)) for q, _ in p.data.dev_pairs), default=0)))
        asked = ProbeInput(problem=fitted.problem) if fitted.problem else ProbeInput(question_for(fitted.name),
                                                                                       fitted.name)
        if fitted.note:
            st.info(plain(fitted.note))
    if asked.problem:
        st.warning(plain(asked.problem))
        return
    warn_unknown(p, [asked.question])
    truth, source = p.data.truth(asked.name) or (None, None)
    # ~1,100 questions read for their names once per world, not on every rerun (issue 52 item 5)
    swap_names = derived(p.data, "swap names", lambda: where_from_view.names_of(p.data.train_pairs + p.data.dev_pairs))
    # the view's reading and trace start on a worker while the answers are computed (the browser's core is idle)
    where_from_view.read_ahead(p.models[p.focus], asked.question, truth, swap_names)
    show_example(p, asked.question, asked.name, truth, source, "probe_ask")
    show_answers_by_step(p.models[p.focus], p.focus, asked.question, tuple(p.data.labels), truth)
    where_from_view.question_view(p.models[p.focus], p.focus, asked.question, truth, swap_names)


def fabricate_tab(p: Probe) -> None:
    pick_focus(p)
    models, focus, data, stamp = p.models, p.focus, p.data, p.stamp
    finding, chart = st.container(), st.container()  # the finding first; the names' settings below it
    names_box = st.expander("Which names: locales, how many, seed")
    with names_box:
        st.write("Names drawn like the world's people but absent from the corpus and the training questions: "
                 "the model cannot know them, so its answers show what it does when it does not know.")
        locales = st.multiselect("Locales of the names", list(LOCALES), default=list(LOCALES),
                                 format_func=lambda loc: f"{loc} ({LOCALES[loc].label})", key="probe_locales")
        columns = st.columns(2)
        n = columns[0].number_input("Names", 1, fabricated.MAX_FABRICATED, 48, key="probe_n")
        seed = columns[1].number_input("Seed", 0, 1_000_000, 0, key="probe_seed")
    try:
        people = cached_people(int(n), tuple(locales), int(seed), stamp, data)
    except ValueError as exc:
        finding.warning(plain(exc))
        return
    questions = tuple(question_for(name) for name, _ in people)
    with names_box:  # about the names, so with them: above the finding it pushed the figure down
        warn_unknown(p, questions)
    predictions = {m: cached_answers(*model_version(loaded), questions, loaded) for m, loaded in models.items()}
    found = fabricated.strategy(people, predictions, data.train_places)
    finding.markdown("**" + plain(fabricated.strategy_sentence(found, focus)) + "**")
    summary = found.summary
    with chart:
        show_figure(viz.home_share_bars(list(summary["model"]), list(summary["share in the name's country"]),
                                        found.chance, title="Answers in the name's country, against chance"),
                    "fabricated-home-country", key="probe_fab_home")
    with st.expander("Per model: distinct answers, the most common one, shares"):
        st.dataframe(summary, hide_index=True, column_config=fitted_columns(summary, EXPANDER_WIDTH, {
            c: PERCENT for c in ("its share", "share in the name's country", "share = the country's prior",
                                 "share that are training labels")}))
    with st.expander("Every name and each model's answer"):
        st.dataframe(found.frame, hide_index=True, column_config=fitted_columns(found.frame, EXPANDER_WIDTH))
        st.download_button("Download these predictions (CSV)", table_csv(found.frame),
                           "fabricated-predictions.csv", "text/csv", key="probe_fab_csv")
    with st.expander("Which places they answer"):
        show_figure(viz.place_share_bars(found.shares,
                                         title="Predicted places for fabricated names vs. the training labels"),
                    "fabricated-place-shares", key="probe_fab_shares")
        show_figure(viz.locale_place_heatmap(found.locale_counts[focus],
                                             title=f"{focus}: predicted place by the name's locale"),
                    f"{focus}-locale-places", key="probe_fab_heatmap")


info = checkpoint_picker(PageModels(
    "probe", PROBE_MODELS, "birthplace", "the birthplace models: pretrained vs scratch, vanilla vs synthesizer"))
st.title("Birthplace probe")
st.write("What does a birthplace model retrieve from its pretraining corpus, and what does it make up?")
birth = [i for i in all_checkpoints() if not i.error and i.task == "birthplace"]
if not birth:
    st.info("There is no birthplace checkpoint yet: `make checkpoints` trains the bundled ones.")
    st.stop()
names = [i.name for i in birth]
# in the sidebar: in the page its three names took two rows and pushed the answers' figure below the fold
chosen_names = st.sidebar.multiselect("Birthplace models to compare", names, default=names, key="probe_models")
files = {i.name: loaded for i in birth
         if i.name in chosen_names and (loaded := load_checkpoint(i)) is not None}
models = {name: with_kept_edits(loaded) for name, loaded in files.items()}  # a kept edit answers on every tab
if not models:
    st.info("Choose at least one birthplace model above.")
    st.stop()
try:
    folder = world_folder(models, st.session_state.get("probe_focus"))
    stamp = corpus.world_stamp(folder)
    data = probe_data(str(folder), stamp)
except DataError as exc:
    st.warning(plain(exc))
    st.stop()
saved = restore_state(data)
current = st.session_state.get("probe_focus")  # written back every run: the tabs' pickers are new widgets
st.session_state["probe_focus"] = current if current in models else next(
    (n for n in (saved.focus, info.name if info else None, *PROBE_MODELS) if n in models), next(iter(models)))
for name, loaded in files.items():  # above the tabs: every tab answers with the session's edited model
    edited_mark(loaded, name, f"probe_edited_{name}")
tabs = st.tabs(TABS, key="probe_tab", on_change="rerun")
chosen = Probe(models, st.session_state["probe_focus"], data, stamp, files)
for tab, show in zip(tabs, (ask_tab, fabricate_tab, dev_tab, edit_tab)):
    if tab.open:
        with tab:
            show(chosen)  # each tab draws the focus picker (pick_focus) where it fits its first row
save_state(chosen.focus)
st.caption(plain(f"Corpus: {folder / corpus.CORPUS_FILE} ({len(data.index.documents)} documents); "
                 f"candidates: the {len(data.labels)} places of {corpus.TRAIN_FILE}."))
