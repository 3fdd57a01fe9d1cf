"""Representations: what the model's hidden states hold, layer by layer (issue 62).

Storyboard: the label source, the label and where to read -> one core call (`core.lens.probes.run_probes`, cached per
checkpoint version and source: ui.page_caches.probe_run) -> the accuracy by layer beside its control, majority and
embedding-only baselines (core.figures.representations), the computed sentence, a table and its CSV; the embedding
map (a layer's states in 2-D, a click opens the example on the Attention page); the Features tab (no label file):
a sparse autoencoder's features of the model (ui.features_view). The URL
(`ui.page_state.RepresentationsState`) holds every choice but an uploaded file. User text is only ever shown
through st.text / dataframes / escaped plotly labels.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from core.figures import representations as figures
from core.lens import probes
from core.lens.errors.inputs import EvalFileError, decode_eval, file_digest
from core.text import markdown_escape as plain
from ui import page_state
from ui.display import fitted_columns, show_figure, shown_table
from ui.features_view import features_section
from ui.model_picker import PageModels, checkpoint_picker, require_model
from ui.page_caches import probe_run
from ui.page_state import REP_COLOURS, REP_SOURCES, REP_VIEWS, AttentionState, RepresentationsState
from ui.shared_caches import model_version

DATA = Path(__file__).resolve().parents[1] / "data"
UPLOAD_MB = 5


def world_folders() -> list[str]:
    return sorted(p.name for p in DATA.iterdir() if (p / "people.tsv").is_file()) if DATA.is_dir() else []


def bundled_label_files() -> list[str]:
    return sorted(f"{p.parent.name}/{p.name}" for p in DATA.glob("*/names_*.tsv")) if DATA.is_dir() else []


def keep_choice(key: str, options: list) -> None:
    """A link's (or the last source's) value that these options lack falls back to the first option."""
    if options and st.session_state.get(key) not in options:
        st.session_state[key] = options[0]


def uploaded(label: str, key: str, help_text: str):
    """(text, name, digest) of an uploaded file, or None (a sentence says what to do, or why it cannot be read)."""
    upload = st.file_uploader(label, type=["tsv", "txt", "csv"], key=key, max_upload_size=UPLOAD_MB, help=help_text)
    if upload is None:
        st.info("Upload a file to probe it.")
        return None
    try:
        text = decode_eval(upload.getvalue(), upload.name)
    except EvalFileError as exc:
        st.warning(plain(exc))
        return None
    return text.text, text.name, text.digest


def label_source():
    """The widgets of the label source -> (LabelSource, its cache key) or None (the page says why)."""
    top, second = st.columns([2, 3]), st.columns([3, 2])
    columns = [top[0], second[0], top[1]]  # the source and where to read on top; the world's or file's choice under
    source = columns[0].selectbox("Label source", list(REP_SOURCES), key="rep_source", format_func=REP_SOURCES.get)
    try:
        if source == "world":
            folders = world_folders()
            if not folders:
                st.warning("There is no birthplace world here (a data folder with people.tsv).")
                return None
            keep_choice("rep_world", folders)
            keep_choice("rep_label", list(probes.WORLD_LABELS))
            keep_choice("rep_at", list(probes.WORLD_POSITIONS))
            with columns[1]:
                inner = st.columns(2)
                folder = inner[0].selectbox("World", folders, key="rep_world")
                label = inner[1].selectbox("Label", list(probes.WORLD_LABELS), key="rep_label")
            at = columns[2].selectbox("Read at", list(probes.WORLD_POSITIONS), key="rep_at",
                                      format_func=probes.WORLD_POSITIONS.get)
            made = probes.world_source(DATA / folder, label, at)
            return made, ("world", folder, label, at, file_digest((DATA / folder / "people.tsv").read_bytes()))
        positions = probes.TAG_POSITIONS if source == "tags" else probes.FILE_POSITIONS
        keep_choice("rep_at", list(positions))
        at = columns[2].selectbox("Read at", list(positions), key="rep_at", format_func=positions.get)
        if source == "file":
            files = bundled_label_files()
            if not files:
                st.warning("There is no bundled LABEL<TAB>TEXT file here (data/*/names_*.tsv).")
                return None
            keep_choice("rep_file", files)
            chosen = columns[1].selectbox("File", files, key="rep_file")
            raw = (DATA / chosen).read_bytes()
            text, name, digest = decode_eval(raw, chosen).text, chosen, file_digest(raw)
        else:
            with columns[1]:
                if source == "tags":
                    got = uploaded("Tag file", "rep_tags_upload", f"A token tag file: {probes.TAG_FORMAT}.")
                else:
                    got = uploaded("LABEL<TAB>TEXT file", "rep_upload",
                                   "One 'LABEL<TAB>TEXT' per line (or a CSV with text and label columns); mark a "
                                   "span to read with [[...]].")
            if got is None:
                return None
            text, name, digest = got
        made = probes.tag_source(text, name, at) if source == "tags" else probes.file_source(text, name, at)
        return made, (source, name, digest, at)
    except (probes.ProbeError, EvalFileError) as exc:
        st.warning(plain(exc))
        return None


info = checkpoint_picker(PageModels(
    "representations", ("birth-vanilla-pretrained",), "birthplace",
    "a birthplace model: what its states hold about a person's country"))
loaded = require_model()
st.title("Representations")
if info is None or loaded is None:
    st.stop()
page_state.restore(RepresentationsState)
st.caption("A linear probe per layer reads a label from the residual stream; beside it the control (shuffled labels, "
           "or for token tags Hewitt & Liang's control task), the majority and what the embedding alone gives. "
           f"Token tag files: {probes.TAG_FORMAT}.")
if st.session_state.get("rep_view") == REP_VIEWS["features"]:  # the SAE's features read no label file
    tabs = st.tabs(list(REP_VIEWS.values()), key="rep_view", on_change="rerun")
    page_state.bind(RepresentationsState, page_state.last_state(RepresentationsState))
    with tabs[2]:
        features_section(loaded, info)
    st.stop()
chosen = label_source()
page_state.bind(RepresentationsState, page_state.last_state(RepresentationsState))
if chosen is None:
    st.stop()
source, source_key = chosen
try:
    result, states = probe_run(*model_version(loaded), source_key, info.name, loaded, source)
except probes.ProbeError as exc:
    st.warning(plain(exc))
    st.stop()
for note in result.notes:
    st.info(plain(note))
st.markdown("**" + plain(probes.probe_sentence(result)) + "**")

tabs = st.tabs(list(REP_VIEWS.values()), key="rep_view", on_change="rerun")
if tabs[0].open:
    with tabs[0]:
        rows = result.rows
        fig = figures.probe_accuracy(
            [r.layer for r in rows], [r.accuracy for r in rows], [r.low for r in rows], [r.high for r in rows],
            [r.control for r in rows], [r.control_low for r in rows], [r.control_high for r in rows],
            result.majority, lens=None if rows[0].lens is None else [r.lens for r in rows],
            control_name=result.control_kind,
            title=f"Accuracy by layer ({result.folds}-fold, 95% intervals)")
        show_figure(fig, f"{info.name}-probes")
        st.caption(plain(f"{result.n_examples} reads, {len(result.classes)} classes, {result.folds} folds"
                         f"{' (stratified)' if result.stratified else ''}, fixed seed {probes.SEED}; the 80/20 column "
                         f"is one stratified split; {result.seconds:.1f} s with the forward passes. "
                         f"{result.lens_note}"))
        frame = shown_table(pd.DataFrame(result.table()))
        shown = frame.round({c: 3 for c in frame.columns if c != "layer"})  # percent with one decimal
        percent = {c: st.column_config.NumberColumn(c, format="percent") for c in frame.columns if c != "layer"}
        st.dataframe(shown, hide_index=True, column_config=fitted_columns(shown, config=percent))
        st.download_button("Download the probes (CSV)", data=frame.to_csv(index=False).encode(),
                           file_name=f"{info.name}-probes.csv", mime="text/csv", on_click="ignore")
if tabs[1].open:
    with tabs[1]:
        n_layers = len(states.layers)
        if not isinstance(st.session_state.get("rep_layer"), int) or not 0 <= st.session_state["rep_layer"] < n_layers:
            st.session_state["rep_layer"] = n_layers - 1
        columns = st.columns([2, 3])
        layer = columns[0].selectbox("Layer", list(range(n_layers)), key="rep_layer",
                                     format_func=lambda i: states.layers[i])
        colour = columns[1].radio("Colour by", list(REP_COLOURS), key="rep_colour", horizontal=True,
                                  format_func=REP_COLOURS.get)
        page_state.bind(RepresentationsState, page_state.last_state(RepresentationsState))
        points = probes.project_2d(states.x[:, layer])
        correct = result.predictions[:, layer] == result.truth if colour == "prediction" else None
        axes = tuple(f"PC {i + 1} ({share:.0%} of the variance)" for i, share in enumerate(points.explained))
        fig = figures.embedding_map(points.xy, states.labels, states.texts, correct=correct, axis_titles=axes,
                                    title=f"{states.layers[layer]}: {result.n_examples} reads (click one)")
        event = show_figure(fig, f"{info.name}-map", key="rep_map", on_select=True)
        picked = list(event.selection.points) if event is not None and event.selection else []
        st.caption(plain(probes.UMAP_NOTE if not probes.umap_installed() else
                         "The map is a PCA; UMAP is installed.") + " A click on a point opens its text on the "
                   "Attention page.")
        if picked and "customdata" in picked[0]:
            text = states.texts[int(picked[0]["customdata"][0])]
            st.switch_page("pages/attention.py",
                           query_params=page_state.page_url(AttentionState(text=text), model=info.name))
