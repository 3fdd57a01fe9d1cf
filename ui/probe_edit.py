"""The Birthplace probe's Edit tab: change one birthplace the model holds and score what else changed.

Storyboard: a person (or a typed name) and a new place -> methods, layer and position class (the default: where
the causal trace of this question restores the most) -> Run: each method's edit scored (core.lens.edit), the
question before and after, the methods side by side with a computed sentence -> keep an edit in this session,
undo it, download the edited model -> a sweep of every site beside the causal trace.

Edits live in this browser session only: the session edits its own copy of the model (EditedModel); the cached
model every session shares is only read, and no file beside a checkpoint is written (the key statistics are kept
in the user's cache folder, core.lens.edit.key_statistics.cache_dir, never over a file that is not their own).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pandas as pd
import streamlit as st

from core.figures import edit as edit_viz
from core.lens.edit import scorecard as cards
from core.lens.edit import sites
from core.lens.edit.key_statistics import KeyStatistics, key_statistics
from core.lens.edit.methods import METHODS, POSITIONS, EditError, EditRequest, Site, check_editable, edit
from core.lens.edit.weights import EditedModel, save_edited
from core.lens.probe import corpus
from core.lens.probe.corpus import WORLD_CITIES
from core.lens.probe.questions import name_from_question, question_for, read_probe_input
from core.text import markdown_escape as plain
from ui.display import EXPANDER_WIDTH, fitted_columns, show_figure
from ui.kept_edits import current_model, kept_for, session_for
from ui.probe_views import Probe, pick_focus, warn_unknown
from ui.shared_caches import by_name, model_version

RESULT = "edit_result"  # st.session_state: the last Run (its inputs and each method's delta and card)
NO_ANSWER = "(no answer)"
KEPT = "edit_kept_values"  # st.session_state: the Edit tab's widget values, kept over a visit to another tab
SWEEP_EDITS = 10
SHORT_POSITIONS = {"last": "last position", "subject": "name's last piece"}


@by_name
@st.cache_resource(show_spinner="Computing the MLP keys' statistics over the corpus (once per checkpoint)…",
                   max_entries=8)
def cached_statistics(path: str, modified: float, folder: str, stamp: tuple, _loaded) -> KeyStatistics:
    text = (Path(folder) / corpus.CORPUS_FILE).read_text(encoding="utf-8")
    return key_statistics(path, _loaded.model, _loaded.tokenizer, text)


@by_name
@st.cache_resource(show_spinner="Asking the unedited model every question…", max_entries=8)
def cached_reference(path: str, modified: float, stamp: tuple, _loaded, _data) -> cards.Reference:
    return cards.Reference.of(_loaded.model, _loaded.tokenizer, _data)


@by_name
@st.cache_data(show_spinner="Tracing the question…", max_entries=128)
def cached_traced_site(path: str, modified: float, question: str, truth: str | None, _loaded) -> sites.TracedSite:
    return sites.traced_site(_loaded.model, _loaded.tokenizer, question, truth)


@by_name
@st.cache_data(show_spinner=False, max_entries=16)
def cached_sweep(path: str, modified: float, stamp: tuple, n: int, seed: int, method: str, _loaded, _data,
                 _stats, _reference) -> sites.Sweep:
    requests = sites.sweep_requests(_data, _reference.answers, n, seed)
    bar = st.progress(0.0, text="Editing at every site…")
    found = sites.sweep(_loaded.model, _loaded.tokenizer, _data, _stats, requests, method,
                        progress=lambda done, total: bar.progress(done / total, text=f"{done}/{total} edits"))
    bar.empty()
    return found


def restored(key: str, choices: list | None = None) -> str:
    """`key`, with its widget's value put back when a tab switch lost it: Streamlit forgets the state of a widget a
    run did not draw (the Edit tab is lazy), so each value is copied aside when drawn (`remember`) and restored
    here before the widget is drawn again (MEMIT dropped out of the methods after a visit to Ask)."""
    aside = st.session_state.get(KEPT, {}).get(key)
    if key not in st.session_state and aside is not None:
        value = aside
        fits = choices is None or (all(v in choices for v in value) if isinstance(value, list) else value in choices)
        if fits:
            st.session_state[key] = value
    return key


def remember(*keys: str) -> None:
    aside = st.session_state.setdefault(KEPT, {})
    for key in keys:
        if key in st.session_state:
            aside[key] = st.session_state[key]


def edit_tab(p: Probe) -> None:
    pick_focus(p)
    loaded = p.files[p.focus]  # the file's model: the session's kept edits are applied to its own copy
    try:
        check_editable(loaded.model)
    except EditError as exc:
        st.warning(plain(exc))
        return
    data = p.data
    st.write("Change one birthplace the model holds, then measure what else moved (ROME's question): the edited "
             "question, the corpus's own sentences, other people, and the rest of this person.")
    dev_names = [name_from_question(q) for q, _ in data.dev_pairs]
    if not dev_names:
        st.info(plain(f"{corpus.DEV_FILE} has no questions, so there is nobody to edit and score against."))
        return
    who, typed_box, where = st.columns([3, 3, 2])
    person = who.selectbox("Person (dev set)", dev_names, key=restored("edit_person", dev_names))
    typed = typed_box.text_input("…or type a name", key=restored("edit_typed"), placeholder="e.g. Ada Lovelace")
    asked = read_probe_input(typed) if typed.strip() else None
    if asked is not None and asked.problem:
        st.warning(plain(asked.problem))
        return
    name = asked.name if asked is not None else person
    question = question_for(name)
    warn_unknown(p, [question])
    truth = (data.truth(name) or (None, None))[0]
    places = sorted(set(data.labels) | set(WORLD_CITIES))
    other = next((pl for pl in data.labels if pl != truth), places[0])
    place_key = restored("edit_place", places)  # a value kept over a tab switch: no default beside it
    new_place = where.selectbox("New birthplace", places, key=place_key,
                                index=0 if place_key in st.session_state else places.index(other))
    try:
        traced = cached_traced_site(*model_version(loaded), question, truth, loaded)
    except EditError as exc:
        traced = None
        st.info(plain(f"No traced default: {exc}"))
    n_layer = len(loaded.model.blocks)
    picks, layer_box, position_box = st.columns([4, 1, 2])
    methods_key = restored("edit_methods", list(METHODS))
    methods = picks.multiselect("Methods (side by side)", list(METHODS), key=methods_key,
                                default=None if methods_key in st.session_state else ["rank-one", "finetune"],
                                format_func=lambda m: METHODS[m].label)
    remember("edit_person", "edit_typed", "edit_place", "edit_methods")
    default = traced.site if traced else Site(n_layer - 1, "last")
    site_key = f"{p.focus}_{question}"  # the traced default is this question's: a new question starts from its own
    layer = layer_box.selectbox("Layer", list(range(n_layer)), index=default.layer, key=f"edit_layer_{site_key}")
    position = position_box.selectbox("Position class", list(POSITIONS), index=list(POSITIONS).index(default.position),
                                      format_func=SHORT_POSITIONS.get, key=f"edit_position_{site_key}")
    if traced:
        st.caption(plain(traced.sentence()))
    site = Site(int(layer), position)
    kept = kept_for(loaded)
    before_model = current_model(loaded)
    inputs = (model_version(loaded), name, new_place, tuple(methods), site, len(kept.edits) if kept else 0)
    if st.button("Run", type="primary", key="edit_run", disabled=not methods):
        run_edits(p, loaded, before_model, EditRequest(name, new_place), methods, site, inputs)
    result = st.session_state.get(RESULT)
    if result and result["inputs"] == inputs:
        show_result(loaded, result)
    elif not methods:
        st.info("Choose at least one method.")
    session_part(p, loaded)
    with st.expander("Sweep: every layer x position class, beside the causal trace", key="edit_sweep_open"):
        sweep_part(p, loaded)


def run_edits(p: Probe, loaded, before_model, request: EditRequest, methods, site: Site, inputs) -> None:
    data = p.data
    stats = cached_statistics(*model_version(loaded), str(data.folder), p.stamp, loaded)
    if before_model is loaded.model:
        reference = cached_reference(*model_version(loaded), p.stamp, loaded, data)
    else:  # this session's edited model: its own answers are the "before"
        reference = cards.Reference.of(before_model, loaded.tokenizer, data)
    known = sorted(set(data.labels) | set(WORLD_CITIES))
    scratch = st.session_state.setdefault("edit_scratch", {})
    key = model_version(loaded)
    if key not in scratch:
        scratch[key] = EditedModel.copy_of(loaded.model)
    trial = scratch[key]
    outcomes = {}
    with st.status("Editing and scoring…") as status:
        for method in methods:
            trial.model.load_state_dict(before_model.state_dict())
            try:
                delta = edit(trial.model, loaded.tokenizer, method, request, site, stats, known_places=known)
            except EditError as exc:
                status.update(state="error")
                st.warning(plain(exc))
                return
            delta.apply(trial.model)
            card = cards.score(before_model, trial.model, loaded.tokenizer, data, request, reference)
            outcomes[method] = (delta, card)
            status.write(plain(f"{METHODS[method].label}: {delta.record['seconds']:.2f} s"))
        status.update(label="Edited and scored", state="complete")
    st.session_state[RESULT] = {"inputs": inputs, "outcomes": outcomes}


def show_result(loaded, result) -> None:
    outcomes = result["outcomes"]
    first = next(iter(outcomes.values()))[1]
    st.markdown(plain(f"Before: '{first.request.question}' answers {first.answer_before or '(nothing)'} "
                      f"(probability {first.probabilities['answer before']:.1%}; "
                      f"{first.request.new_place} {first.probabilities['new place before']:.1%})."))
    for method, (_delta, card) in outcomes.items():
        st.markdown(plain(f"After {METHODS[method].label}: it answers {card.answer_after or '(nothing)'} "
                          f"(probability {card.probabilities['answer after']:.1%}; "
                          f"{card.original_place} {card.probabilities['original place after']:.1%})."))
    labelled = {METHODS[m].label: card for m, (_d, card) in outcomes.items()}
    frame = pd.DataFrame(cards.comparison_rows(labelled))
    st.markdown("**" + plain(cards.comparison_sentence(labelled)) + "**")
    st.dataframe(frame, hide_index=True, column_config=fitted_columns(frame))
    st.caption(plain(cards.generalisation_sentence(labelled)))  # under the methods' table: one count per method
    for method, (delta, card) in outcomes.items():
        with st.expander(plain(f"{METHODS[method].label}: the scorecard, the answers that changed"),
                         key=f"edit_card_open_{method}"):
            details(card)
        if st.button(plain(f"Keep the {METHODS[method].label} edit in this session"), key=f"edit_keep_{method}"):
            session_for(loaded).apply(delta)
            st.session_state.pop(RESULT, None)
            st.rerun()


def details(card: cards.Scorecard) -> None:
    frame = pd.DataFrame(card.rows())  # a rate with nothing to score is said so, not shown as "None"
    frame["rate"] = [f"{rate:.1%}" if rate == rate else "nothing to score" for rate in frame["rate"]]
    st.dataframe(frame, hide_index=True, column_config=fitted_columns(frame, EXPANDER_WIDTH))
    changed = [{"group": g.label, "name": n, "before": b or NO_ANSWER, "after": a or NO_ANSWER}
               for g in card.groups.values() for n, b, a in g.changed()]
    if changed:  # every table fitted to the expander: its place columns stay on screen at 1024 px
        changed = pd.DataFrame(changed)
        st.dataframe(changed, hide_index=True, column_config=fitted_columns(changed, EXPANDER_WIDTH))
    else:
        st.text("No answer in any group changed.")
    facts = [{"kind": "birthplace sentence", "document up to the place": f.prompt[-60:], "place": f.place,
              "completed before": f.before_ok, "after": "the new place" if f.after_ok else "not the new place"}
             for f in card.forms]
    facts += [{"kind": "another fact", "document up to the place": f.prompt[-60:], "place": f.place,
               "completed before": f.before_ok, "after": "still completed" if f.after_ok else "lost"}
              for f in card.rest]
    if facts:
        facts = pd.DataFrame(facts)
        st.dataframe(facts, hide_index=True, column_config=fitted_columns(facts, EXPANDER_WIDTH))


def session_part(p: Probe, loaded) -> None:
    kept = kept_for(loaded)
    if kept is None:
        st.caption("No edit is kept in this session: the model is as its file has it.")
        return
    st.markdown(f"**This session's {plain(p.focus)}** " + plain(
        f"carries {len(kept.edits)} kept edit{'s' if len(kept.edits) != 1 else ''}; the file and every other "
        "session's model are unchanged."))
    frame = pd.DataFrame([{k: r[k] for k in ("method", "name", "new_place", "layer", "position", "steps")}
                          for r in kept.records])
    st.dataframe(frame, hide_index=True)
    undo_box, download_box = st.columns(2)
    if undo_box.button("Undo the last edit", key="edit_undo"):
        kept.undo()
        st.session_state.pop(RESULT, None)
        st.rerun()
    download_box.download_button("Download the edited model", data=lambda: edited_bytes(loaded, kept),
                                 file_name=f"{p.focus}-edited.safetensors", mime="application/octet-stream",
                                 key="edit_download", on_click="ignore")


def edited_bytes(loaded, kept: EditedModel) -> bytes:
    """The edited checkpoint, written to a temporary file outside every checkpoint folder and read back."""
    fd, tmp = tempfile.mkstemp(suffix=".safetensors")
    os.close(fd)
    try:
        save_edited(tmp, kept, loaded.tokenizer, loaded.metadata, Path(loaded.path).name)
        return Path(tmp).read_bytes()
    finally:
        os.unlink(tmp)


def sweep_part(p: Probe, loaded) -> None:
    st.write(plain(f"Edits {SWEEP_EDITS} dev people the model answers correctly (each to another dev birthplace) "
                   "with the rank-one edit at every site, one at a time, on the model as its file has it (not this "
                   "session's kept edits), and traces the same questions (noise on the name, "
                   f"{sites.SWEEP_SAMPLES} draws each)."))
    seed = st.number_input("Seed", 0, 9999, 0, key="edit_sweep_seed")
    if not st.button("Run the sweep", key="edit_sweep_run") and not st.session_state.get("edit_sweep_shown"):
        return
    st.session_state["edit_sweep_shown"] = True
    stats = cached_statistics(*model_version(loaded), str(p.data.folder), p.stamp, loaded)
    reference = cached_reference(*model_version(loaded), p.stamp, loaded, p.data)
    try:
        found = cached_sweep(*model_version(loaded), p.stamp, SWEEP_EDITS, int(seed), "rank-one", loaded, p.data,
                             stats, reference)
    except EditError as exc:
        st.warning(plain(exc))
        return
    st.markdown("**" + plain(found.sentence()) + "**")
    fig = edit_viz.site_sweep_panels({"efficacy": found.efficacy, "other dev answers unchanged": found.specificity,
                                      "causal trace: MLP restores": found.traced},
                                     [SHORT_POSITIONS[k] for k in found.positions], found.impossible,
                                     title="Where the edit works, where the trace points")
    show_figure(fig, f"{p.focus}-edit-sweep", key="edit_sweep_chart")
