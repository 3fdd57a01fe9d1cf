"""A session's kept edits (the probe's Edit tab): the session's own copy of a model, and that copy shown wherever
the session reads the model, with a mark that it is edited and an Undo beside the mark.

The copy is made on the first kept edit (EditedModel: the model every session shares is never written). A page
asks `with_kept_edits(loaded)` for the model this session reads: the same LoadedCheckpoint with the edited weights
and an `edits` version token in place of the file's, so every cache keyed on `model_version` tells the edited
model from the file (two sessions with the same edits share results: the same edits give the same weights).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace

import streamlit as st

from core.io.loaded import LoadedCheckpoint
from core.lens.edit.methods import METHODS
from core.lens.edit.weights import EditedModel
from core.text import markdown_escape as plain
from ui.shared_caches import model_version

SESSIONS = "edit_sessions"  # st.session_state: the file's model key -> this session's EditedModel


def session_for(loaded: LoadedCheckpoint) -> EditedModel:
    """This browser session's copy of the model (made on the first edit; the shared model is never written)."""
    key = model_version(loaded)
    kept = st.session_state.setdefault(SESSIONS, {})
    if key not in kept:
        kept[key] = EditedModel.copy_of(loaded.model)
    return kept[key]


def kept_for(loaded: LoadedCheckpoint) -> EditedModel | None:
    """The session's edited copy of this file's model when it keeps at least one edit, else None."""
    kept = st.session_state.get(SESSIONS, {}).get(model_version(loaded))
    return kept if kept is not None and kept.edits else None


def current_model(loaded: LoadedCheckpoint):
    """The model as this session has it: its edited copy when it kept an edit, else the shared (read-only) one."""
    kept = kept_for(loaded)
    return kept.model if kept is not None else loaded.model


def edits_token(kept: EditedModel) -> str:
    """A version of the edited weights: the edits kept, in order (the same edits give the same weights)."""
    described = json.dumps(kept.records, sort_keys=True, default=str)
    return f"{len(kept.edits)}-{hashlib.sha256(described.encode()).hexdigest()[:16]}"


def with_kept_edits(loaded: LoadedCheckpoint) -> LoadedCheckpoint:
    """The model this session reads: `loaded` itself, or its edited copy under its own cache version."""
    kept = kept_for(loaded)
    if kept is None:
        return loaded
    return replace(loaded, model=kept.model, edits=edits_token(kept))


def label(method) -> str:
    return METHODS[method].label if method in METHODS else str(method)


def edited_mark(loaded: LoadedCheckpoint, name: str, key: str) -> None:
    """One line saying the session's model is edited, what the edits are, and an Undo (nothing when unedited)."""
    kept = kept_for(loaded)
    if kept is None:
        return
    last = kept.records[-1]
    text_box, undo_box = st.columns([5, 1], vertical_alignment="center")
    text_box.warning(plain(
        f"Edited: this session's {name} carries {len(kept.edits)} kept edit{'s' if len(kept.edits) != 1 else ''} "
        f"(the last: {last.get('name')} -> {last.get('new_place')}, {label(last.get('method'))}), and every tab "
        "answers with it; the file and other sessions are unchanged."), icon="✏️")
    if undo_box.button("Undo the last edit", key=f"{key}_undo"):
        kept.undo()
        st.session_state.pop("edit_result", None)
        st.rerun()
