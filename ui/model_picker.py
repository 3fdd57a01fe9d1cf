"""The sidebar model picker every page draws (`checkpoint_picker`) and the selected model (`require_model`).

Not a page itself (app.py lists pages explicitly). The selected checkpoint lives in
`st.session_state["checkpoint"]`, in `st.session_state["model_choice"]` (so a page switch keeps a model someone
picked) and in the URL as `?model=<name>` (ui.page_state), so a reload or a copied link reopens it. Until someone
picks one, each page opens on its own default (`PageModels`: the model that shows the page's point).
"""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from core.io.checkpoint import CheckpointInfo, LoadedCheckpoint, checkpoint_dir
from core.text import markdown_escape as plain
from ui import leave_legacy_multipage_mode
from ui.lesson_session import lesson_controls
from ui.page_state import model_from_url, model_to_url, set_params
from ui.shared_caches import (
    NO_CHECKPOINTS,
    all_checkpoints,
    cached_model_card,
    checkpoints_folder_note,
    load_checkpoint,
)

MODEL_CHOICE = "model_choice"  # the picker's choice, kept across page switches (widget state is not)


PICKER_PAGE = "picker_page"  # the page the picker last ran on


CARD_KEY = "model_card_open"  # the sidebar's model card expander (its content is drawn only while open)


MODEL_PICKED = "model_picked"  # someone chose it (the picker, a link, an upload): pages then keep it


@dataclass(frozen=True)
class PageModels:
    """Which models show a page's point: `prefer` by name (the bundled ones, first found wins), else the first
    checkpoint of `task`; `why` says in a few words what such a model shows here."""

    page: str  # which page asks (a link's model is read on a page's first run)
    prefer: tuple[str, ...] = ()
    task: str | None = None
    why: str = ""

    def suits(self, info: CheckpointInfo) -> bool:
        return info.name in self.prefer or (self.task is not None and info.task == self.task)

    def default(self, infos: list[CheckpointInfo]) -> str:
        names = [i.name for i in infos]
        return next((n for n in self.prefer if n in names), None) or next(
            (i.name for i in infos if self.suits(i)), names[0])


def initial_model(names: list[str], default: str, page: str) -> tuple[str, bool]:
    """The picker's value on this run and whether someone chose it: a link asking for a model the page did
    not write itself (a shared link, a link from another page), else this session's own choice, else the
    page's default (a page switch without a choice opens each page on the model that shows its point)."""
    wanted = model_from_url(st.query_params.to_dict())
    # A page switch clears the URL, so a model in it on a page's first run came with the link
    arrived = st.session_state.get(PICKER_PAGE) != page
    st.session_state[PICKER_PAGE] = page
    if wanted is not None and (arrived or wanted != st.session_state.get(MODEL_CHOICE)):
        if wanted in names:
            return wanted, bool(st.session_state.get(MODEL_PICKED)) or wanted != default
        st.info(plain(f"The link asks for the model {wanted!r}, which is not here (models added on Open your "
                      f"model last only for the browser session that added them)."))
    current = st.session_state.get("picker_model", st.session_state.get(MODEL_CHOICE))
    if st.session_state.get(MODEL_PICKED) and current in names:
        return current, True
    return default, False


def _picked() -> None:
    st.session_state[MODEL_PICKED] = True


def checkpoint_picker(models: PageModels) -> CheckpointInfo | None:
    leave_legacy_multipage_mode()
    lesson_controls(models.page)  # the presenting bar on top, the sidebar's "Add this view to the lesson"
    listed = all_checkpoints()
    infos = [i for i in listed if not i.error]
    with st.sidebar:
        st.header("Model")
        note = checkpoints_folder_note(str(checkpoint_dir()))  # a hub cache named as the checkpoints folder
        if note and infos:
            st.info(plain(note))
        if not infos:
            st.info(plain(note) if note else NO_CHECKPOINTS.format(folder=checkpoint_dir()))
            st.session_state["checkpoint"] = None
            return None
        names = [i.name for i in infos]
        # Written back on every run: after a page switch the selectbox is a new widget that would
        # otherwise start on the first option, whatever the session state says (seen in a browser).
        st.session_state["picker_model"], st.session_state[MODEL_PICKED] = initial_model(
            names, models.default(infos), models.page)
        name = st.selectbox("Checkpoint", names, key="picker_model", on_change=_picked)
        suited = [i.name for i in infos if models.suits(i)]
        if suited and models.why:
            st.caption(plain(f"Suits this page: {', '.join(suited)} ({models.why})."))
        st.session_state[MODEL_CHOICE] = name
        set_params(model_to_url(name))  # nothing sent when the URL names it already
        info = infos[names.index(name)]
        st.session_state["checkpoint"] = info
        # drawn only while open: closed (as every page opens) it costs every rerun of every page nothing
        card = st.expander("Model card", expanded=False, key=CARD_KEY, on_change="rerun")
        if card.open:
            with card:
                for label, value in cached_model_card(str(info.path), info.modified, info).items():
                    st.markdown(f"**{label}**")
                    st.text(value)
        st.radio("Chart download format", ["png", "svg"], key="image_format", horizontal=True,
                 help="What the camera button in each chart's toolbar saves.")
        broken = [i for i in listed if i.error]
        if broken:
            st.caption(plain(f"{len(broken)} file(s) in the folder could not be read: "
                             + "; ".join(i.error for i in broken[:3])))
    return info


def select_checkpoint(name: str) -> None:
    """Make `name` the picker's choice on the next run (e.g. after an upload)."""
    st.session_state[MODEL_CHOICE] = name
    st.session_state[MODEL_PICKED] = True
    st.query_params.update(model_to_url(name))
    st.session_state.pop("picker_model", None)  # the widget may be drawn already: its state cannot be set


def selected_info() -> CheckpointInfo | None:
    return st.session_state.get("checkpoint")


def require_model() -> LoadedCheckpoint | None:
    """The selected model, or a note saying how to get one (pages then stop drawing)."""
    info = selected_info()
    if info is None:
        note = checkpoints_folder_note(str(checkpoint_dir()))
        st.info(plain(note) if note else NO_CHECKPOINTS.format(folder=checkpoint_dir()))
        return None
    return load_checkpoint(info)
