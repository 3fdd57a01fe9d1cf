"""The Attention page's head roles: a layers x heads map per role (core.lens.heads on the repeated-token probe),
one computed sentence naming the strongest heads, and each head's role for the model view's hover. Not a page.

Computed once per model (and training step) and probe seed per server process; off until its toggle is on, so a
page that does not ask pays nothing.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from core.figures import heads as head_figs
from core.figures.common import figure_title
from core.lens import heads
from core.text import markdown_escape as plain
from ui.display import show_figure

ROLES_KEY = "attn_head_roles"  # the model view reads each head's role here (pages/attention_views.show_model)


@st.cache_resource(show_spinner="Scoring every head on repeated random tokens…", max_entries=32)
def cached_roles(path: str, modified: float, step: int | None, seed: int, _loaded) -> heads.HeadRoles:
    return heads.head_roles(_loaded.model, _loaded.tokenizer, seed=seed, stderr=heads.DEFAULT_STDERR)


def _stamp(loaded) -> tuple[str, float]:
    path = Path(loaded.path)
    return str(path), path.stat().st_mtime if path.exists() else 0.0


def _leave_for_hover(notes: dict | None, view: str) -> None:
    """Keep each head's role for the model view; when that changes under the model view, draw it again."""
    before = st.session_state.get(ROLES_KEY)
    st.session_state[ROLES_KEY] = notes
    if view == "model" and before != notes:
        st.rerun(scope="app")


def show_head_roles(loaded, view: str, name: str | None = None) -> None:
    """The toggle, then (on) the maps and the sentence; the roles are left for the model view's hover."""
    if not st.toggle("Head roles", key="attn_roles_on",
                     help=f"Score every head on up to {heads.DEFAULT_SAMPLES} random token segments repeated twice "
                          "(fewer once every score's standard error is below "
                          f"{heads.DEFAULT_STDERR:g}): how much of its attention goes to the previous token, to the "
                          "token after an earlier copy of this one (induction), to earlier copies, to the first "
                          "token, to itself."):
        _leave_for_hover(None, view)
        return
    try:
        roles = cached_roles(*_stamp(loaded), getattr(loaded, "step", None), 0, loaded)
    except heads.HeadRolesError as exc:
        st.info(str(exc))
        _leave_for_hover(None, view)
        return
    for note in roles.notes:
        st.info(note)
    at_step = f" at step {loaded.step:,}" if getattr(loaded, "step", None) is not None else ""
    title = figure_title(f"head roles{at_step} on repeated random tokens", name)  # named in an exported PNG too
    show_figure(head_figs.head_roles_figure(roles.scores, title=title), f"{name or 'model'}-head-roles",
                key="attn_roles_chart")
    st.write(plain(roles.sentence()))
    st.caption(plain(" ".join(f"{role}: {meaning}." for role, meaning in heads.ROLES.items())))
    L, H = roles.shape
    notes = {}
    for layer in range(L):
        for head in range(H):
            found = roles.role_of(layer, head)
            notes[(layer, head)] = f"{found[0]} head ({found[1]:.2f})" if found else "no clear role"
    _leave_for_hover(notes, view)


def show_recorded_roles(attention) -> None:
    """Records mode (attention maps without a model): the roles that need no designed input, and one sentence for
    the rest."""
    if not st.toggle("Head roles", key="rec_roles_on",
                     help="Previous-token, first-token and current-token scores of every head on this sentence."):
        return
    try:
        roles = heads.roles_from_attention(attention)
    except heads.HeadRolesError as exc:
        st.info(str(exc))
        return
    for note in roles.notes:
        st.info(note)
    show_figure(head_figs.head_roles_figure(roles.scores), "head-roles", key="rec_roles_chart")
    st.write(plain(roles.sentence()))
