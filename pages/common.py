"""What every page shares: the sidebar model picker and the cached model loader.

Not a page itself (app.py lists pages explicitly). The selected checkpoint lives in
`st.session_state["checkpoint"]`, in `st.session_state["model_choice"]` (so a page switch keeps a model someone
picked) and in the URL as `?model=<name>` (core.urlstate), so a reload or a copied link reopens it. Until someone
picks one, each page opens on its own default (`PageModels`: the model that shows the page's point). Tables get
widths that fit a 1024 px projector from `fitted_columns`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import streamlit as st
from streamlit import config as st_config

from core import urlstate
from core.io.checkpoint import (
    CheckpointError,
    CheckpointInfo,
    LoadedCheckpoint,
    checkpoint_dir,
    list_checkpoints,
    load,
)
from core.lens.describe import model_card
from core.text import markdown_escape
from pages import APP_RAN, streamlit_pages

NO_CHECKPOINTS = (
    "No checkpoints found in `{folder}`. Run `make checkpoints` to train the bundled models "
    "(about 30 minutes on a laptop CPU), or point `ATTENTION_LAB_CHECKPOINTS` at a folder of "
    "`.safetensors` checkpoints."
)


@st.cache_resource(show_spinner="Loading model…", max_entries=16)
def load_cached(path: str, modified: float) -> LoadedCheckpoint:
    """One model per (file, modification time) per server process, shared by every session."""
    return load(path)


@st.cache_resource(show_spinner=False, ttl=30)
def available_checkpoints(folder: str) -> tuple[CheckpointInfo, ...]:
    """Read every 30 s and shared by every session and run as it is (st.cache_data would unpickle a copy on
    every run of every page): read-only, as every CheckpointInfo is once listed (nothing writes to one)."""
    return tuple(list_checkpoints(folder))


@st.cache_resource(show_spinner=False, max_entries=256)
def cached_model_card(path: str, modified: float, _info: CheckpointInfo) -> dict[str, str]:
    """The card builds a model on the meta device to count parameters: once per file version, shared
    (read-only: the sidebar only reads it)."""
    return model_card(_info)


def all_checkpoints() -> list[CheckpointInfo]:
    """Bundled (or ATTENTION_LAB_CHECKPOINTS) checkpoints, then this session's uploads."""
    infos = list(available_checkpoints(str(checkpoint_dir())))
    infos += st.session_state.get("uploaded_checkpoints", [])
    return infos


def leave_legacy_multipage_mode() -> None:
    """Streamlit treats a `pages/` folder beside the entry point as a legacy (v1) multipage app until some
    run calls st.navigation; its documentation: "As soon as any session of your app executes the
    st.navigation command, your app will ignore the pages/ directory (across all sessions)". A server whose
    first visitor opens a page URL directly (a shared link) runs that page alone, without app.py, and would
    list every file in pages/ for everyone. So a page run without app.py (app.py marks every session it runs
    in) calls st.navigation itself, with the app's pages, and reruns: from then on app.py is in charge, for
    every session (checked in a real browser: tests/browser, first_visit).

    The one thing here that is not Streamlit's public API: AppTest runs a page file alone on purpose (no
    pages/ beside it, so no legacy mode), and only its hidden config option `global.appTest` says so, seen
    through `streamlit.config.get_option` (AppTest patches that function; `st.get_option` is bound before).
    Read only on a run without app.py; tests/test_app_shell.py fails if Streamlit changes either."""
    if APP_RAN in st.session_state or st_config.get_option("global.appTest"):
        return
    st.navigation(streamlit_pages(), position="hidden")
    st.rerun()


MODEL_CHOICE = "model_choice"  # the picker's choice, kept across page switches (widget state is not)
PICKER_PAGE = "picker_page"  # the page the picker last ran on
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
    wanted = urlstate.decode_model(st.query_params.to_dict())
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
    infos = [i for i in all_checkpoints() if not i.error]
    with st.sidebar:
        st.header("Model")
        if not infos:
            st.info(NO_CHECKPOINTS.format(folder=checkpoint_dir()))
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
        st.query_params.update(urlstate.encode_model(name))
        info = infos[names.index(name)]
        st.session_state["checkpoint"] = info
        with st.expander("Model card", expanded=False):
            for label, value in cached_model_card(str(info.path), info.modified, info).items():
                st.markdown(f"**{label}**")
                st.text(value)
        st.radio("Chart download format", ["png", "svg"], key="image_format", horizontal=True,
                 help="What the camera button in each chart's toolbar saves.")
        broken = [i for i in all_checkpoints() if i.error]
        if broken:
            st.caption(plain(f"{len(broken)} file(s) in the folder could not be read: "
                             + "; ".join(i.error for i in broken[:3])))
    return info


def select_checkpoint(name: str) -> None:
    """Make `name` the picker's choice on the next run (e.g. after an upload)."""
    st.session_state[MODEL_CHOICE] = name
    st.session_state[MODEL_PICKED] = True
    st.query_params.update(urlstate.encode_model(name))
    st.session_state.pop("picker_model", None)  # the widget may be drawn already: its state cannot be set


def plain(text: object) -> str:
    """A file name or error text shown literally in st.error / st.warning / st.info (Markdown)."""
    return markdown_escape(text)


def selected_info() -> CheckpointInfo | None:
    return st.session_state.get("checkpoint")


def load_checkpoint(info: CheckpointInfo | None) -> LoadedCheckpoint | None:
    """Load through the cache, turning a refusal into one sentence on screen."""
    if info is None:
        return None
    try:
        return load_cached(str(info.path), Path(info.path).stat().st_mtime)
    except (CheckpointError, OSError) as exc:
        st.error(plain(f"Could not open {info.name}: {exc}"))
        return None


def require_model() -> LoadedCheckpoint | None:
    """The selected model, or a note saying how to get one (pages then stop drawing)."""
    info = selected_info()
    if info is None:
        st.info(NO_CHECKPOINTS.format(folder=checkpoint_dir()))
        return None
    return load_checkpoint(info)


def _cell(value) -> str:
    """A number as a table shows it: whole or large numbers with thousands separators (step 12,000, not
    1.2e+04), the rest to 4 significant digits."""
    if not isinstance(value, float):
        return str(value)
    if value.is_integer() or abs(value) >= 1000:
        return f"{value:,.0f}" if value.is_integer() else f"{value:,.1f}"
    return f"{value:.4g}"


def shown_table(frame):
    """A frame for st.dataframe, which writes "None" in empty cells: columns empty in every row are left
    out, and the empty cells of the others are blank (their numbers then written by `_cell`)."""
    import pandas as pd

    frame = frame.dropna(axis=1, how="all")
    holes = [c for c in frame.columns if frame[c].isna().any()]
    if holes:
        frame = frame.copy()
        for column in holes:
            frame[column] = ["" if pd.isna(v) else _cell(v) for v in frame[column]]
    return frame


MAIN_WIDTH, EXPANDER_WIDTH = 560, 520  # px a table has at 1024x768 with the sidebar open: the page, an expander
MIN_COLUMN, MAX_COLUMN = 48, 200  # px: a column narrower cuts its header to nothing; wider is one long text


def fitted_columns(frame, room: int = MAIN_WIDTH, config: dict | None = None, index: bool = False) -> dict:
    """A column_config whose widths add up to `room` px, each column's share by its longest text (header or
    cell, between MIN_COLUMN and MAX_COLUMN), so a table never scrolls sideways at 1024 px: a long cell is cut
    with "…" inside the table instead. `config` entries keep their other settings (format, label, help);
    `index`: the table shows its index (the first column)."""
    import pandas as pd

    config = dict(config or {})
    hidden = {c: None for c in frame.columns if c in config and config[c] is None}
    columns = ([None] if index else []) + [c for c in frame.columns if c not in hidden]
    label = {c: str((config.get(c) or {}).get("label") or c) for c in frame.columns}

    def longest(column) -> int:
        values = frame.index if column is None else frame[column]
        cells = [len(f"{v:,.4g}" if isinstance(v, float) else str(v)) for v in list(values)[:200]
                 if not (isinstance(v, float) and pd.isna(v))]  # a float as a table formats it, not its repr
        return max([len(label.get(column, "")), *cells, 3])

    wanted = {c: min(max(7 * longest(c) + 18, MIN_COLUMN), MAX_COLUMN) for c in columns}  # ~7 px a character
    width = dict(wanted)
    for _ in range(len(columns)):  # shrink the columns above the floor until the sum fits
        floor = [c for c in columns if width[c] <= MIN_COLUMN]
        free = room - MIN_COLUMN * len(floor)
        above = sum(wanted[c] for c in columns if c not in floor)
        width = {c: MIN_COLUMN if c in floor else max(MIN_COLUMN, int(wanted[c] * min(1.0, free / max(above, 1))))
                 for c in columns}
        if sum(width.values()) <= room or len(floor) == len(columns):
            break
    out = dict(hidden)
    for column in columns:
        key = "_index" if column is None else column
        out[key] = {**(config.get(key) or {}), "width": width[column]}
    return out


def image_format() -> str:
    return st.session_state.get("image_format", "png")


def show_figure(fig, filename: str, key: str | None = None, on_select: bool = False):
    """Draw a plotly figure whose toolbar camera exports PNG or SVG (chosen in the sidebar); `on_select`:
    a click on a point reruns the page and the selection event is returned."""
    from core.figures.browser import for_browser
    from core.figures.common import chart_config

    # theme=None: the look is in the figure (core.figures.common.APP_LOOK); Streamlit's theme step would
    # make plotly.js draw every chart twice (core/figures/browser.py).
    return st.plotly_chart(for_browser(fig), config=chart_config(filename, image_format()), key=key, theme=None,
                           on_select="rerun" if on_select else "ignore", selection_mode="points")
