"""Training steps on three pages: the Attention page's step slider, the curves page's snapshot marks (a
click opens the Attention page at that step), the probe's answers per step. Not a page (app.py lists pages).

A checkpoint with snapshots (`<name>.snapshots.safetensors`, core/io/snapshots.py) is read once per file
version; the weights of one step are built once per server process (st.cache_resource, as models are).
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from core.io import snapshots as snap_files
from core.io.loaded import LoadedCheckpoint
from core.lens import training_steps as ts
from core.lens.history.logs import log_stem
from core.text import markdown_escape as plain
from ui import page_state
from ui.display import EXPANDER_WIDTH, fitted_columns, show_figure
from ui.model_picker import select_checkpoint
from ui.page_state import AttentionState, CurvesState
from ui.shared_caches import by_name, load_cached

STEP_KEY = page_state.widget_key(AttentionState, "step")  # the attention page's step slider


def _stamp(loaded: LoadedCheckpoint) -> tuple[str, float, float | None]:
    """(file, its modification time, its snapshot file's; None: it has none)."""
    try:
        side_modified = snap_files.snapshots_path(loaded.path).stat().st_mtime
    except FileNotFoundError:
        side_modified = None
    return str(loaded.path), Path(loaded.path).stat().st_mtime, side_modified


@by_name
@st.cache_resource(show_spinner=False, max_entries=64)
def cached_snapshots(path: str, modified: float, side_modified: float | None,
                     _loaded) -> snap_files.SnapshotFile | None:
    """Read and check (sha256 per step) once per version of the checkpoint and of its snapshot file, and shared
    read-only by every session (st.cache_data unpickled a copy on every rerun of the Attention page)."""
    return snap_files.snapshots_of(_loaded)


def snapshots_for(loaded: LoadedCheckpoint | None) -> snap_files.SnapshotFile | None:
    if loaded is None or Path(loaded.path).is_dir():
        return None
    return cached_snapshots(*_stamp(loaded), loaded)


@by_name
@st.cache_resource(show_spinner="Loading the weights of that step…", max_entries=32)
def cached_at_step(path: str, modified: float, side_modified: float | None, step: int, _loaded,
                   _snapshots) -> LoadedCheckpoint:
    return snap_files.at_step(_loaded, _snapshots, step)


def step_slider(loaded: LoadedCheckpoint, where=st) -> LoadedCheckpoint:
    """The training-step slider when the model kept snapshots: the checkpoint as it was at the chosen step
    (the last position is the checkpoint itself). Without snapshots: `loaded`, and no slider."""
    stamp = None if Path(loaded.path).is_dir() else _stamp(loaded)  # snapshots_for's, once per rerun
    # no snapshot file (most checkpoints): nothing to read, no cache to ask
    found = None if stamp is None or stamp[2] is None else cached_snapshots(*stamp, loaded)
    if found is not None and found.note:
        st.info(plain(found.note))
    if found is None or not found.snapshots:
        st.session_state[STEP_KEY] = None
        return loaded
    steps, last = snap_files.slider_steps(loaded, found), snap_files.final_step(loaded)
    wanted = st.session_state.get(STEP_KEY)
    st.session_state[STEP_KEY] = min(steps, key=lambda s: (abs(s - wanted), s)) if isinstance(wanted, int) \
        else steps[-1]
    kept = st.session_state[STEP_KEY] in found.steps
    now = f"{snap_files.step_line(found, st.session_state[STEP_KEY], last)}. " if kept else "The checkpoint itself. "
    counted = ts.kept_steps_line([ts.StepMark("this run", s, 0.0, 0.0, snapshot=s in found.steps) for s in steps])
    step = where.select_slider("Training step", steps, key=STEP_KEY, format_func=lambda s: f"{s:,}",
                               help=f"{now}The weights after each of {counted}, as the curves page marks them "
                                    f"({found.size_line()}); the same sentence, layer, head and view at every step.")
    where.caption((f"of {last:,} · " if last else "") + (f"loss {found.at(step).loss:.3f}" if kept  # one line
                                                         else "the checkpoint"))
    return cached_at_step(*stamp, step, loaded, found)


# --- the curves page -----------------------------------------------------------------------------------

def checkpoint_of(source) -> Path | None:
    """The checkpoint with snapshots behind a run of the curves page: the checkpoint itself, or for a training log
    (a run the Train button wrote: its checkpoint keeps the bundled name, so only its log is listed) the checkpoint
    beside it, saved after every epoch. None: no such file, or no snapshots beside it."""
    if source is None or source.kind not in ("checkpoint", "log"):
        return None
    path = Path(source.path)
    if source.kind == "log":
        path = path.with_name(log_stem(path) + ".safetensors")
    return path if path.is_file() and snap_files.snapshots_path(path).exists() else None


def step_marks(settings: CurvesState, sources) -> list[ts.StepMark]:
    """The kept steps of every selected run with snapshots (a checkpoint, or a training log beside one), for the
    train-loss curve: the steps the Attention page's slider offers, the checkpoint's own last."""
    marks: list[ts.StepMark] = []
    for run in settings.runs if settings.metric == "loss" else []:
        path = checkpoint_of(sources.get(run))
        if path is None:
            continue
        try:
            loaded = load_cached(str(path), path.stat().st_mtime)
            found = snapshots_for(loaded)
        except (OSError, ValueError):  # an unreadable checkpoint has no marks; its curve says the rest
            continue
        if found is None or not found.snapshots:
            continue
        marks += ts.step_marks(run, found.snapshots, settings.x, snap_files.final_progress(loaded),
                               loaded.history)
    return marks


def _mark_traces(fig) -> list:
    return [t for t in fig.data if (getattr(t, "meta", None) or {}).get("kind") == "snapshots"]


def has_marks(fig) -> bool:
    return bool(_mark_traces(fig))


def open_clicked_step(event, fig) -> None:
    """Say what the marks are; a click on one opens the Attention page at that step, for that run."""
    traces = _mark_traces(fig)
    if traces:
        marks = [ts.StepMark(t.meta["run"], int(c[1]), 0.0, 0.0, snapshot=bool(c[2]) if len(c) > 2 else True)
                 for t in traces for c in t.customdata]
        st.caption(plain(f"◇ marks {ts.kept_steps_line(marks)}; click one to open the Attention page at that step."))
    selection = event.get("selection") if isinstance(event, dict) else None  # no event: a chart without marks
    for point in (selection or {}).get("points") or []:
        number = point.get("curve_number", -1)
        meta = (getattr(fig.data[number], "meta", None) or {}) if 0 <= number < len(fig.data) else {}
        if meta.get("kind") == "snapshots" and isinstance(point.get("customdata"), list):
            open_attention_at(meta["run"], int(point["customdata"][1]))


def open_attention_at(name: str, step: int, layer: int | None = None, head: int | None = None) -> None:
    """Switch to the Attention page with checkpoint `name` at training step `step`, on `layer` and `head` where
    given (its sentence, view and the rest stay as this session left them)."""
    select_checkpoint(name)
    at_step = (page_state.last_state(AttentionState) or AttentionState()).replace(step=step)
    if layer is not None and head is not None:
        at_step = at_step.replace(layer=layer, head=head)
    st.switch_page("pages/attention.py", query_params=page_state.page_url(at_step, model=name))


# --- the probe page -----------------------------------------------------------------------------------

@by_name
@st.cache_data(show_spinner="Asking the model at every kept step…", max_entries=32)
def cached_answers_by_step(path: str, modified: float, side_modified: float | None, question: str,
                           places: tuple[str, ...], truth: str | None, _loaded, _snapshots) -> ts.StepAnswers:
    return ts.answers_by_step(_loaded, _snapshots, question, places, truth)


def show_answers_by_step(loaded: LoadedCheckpoint, name: str, question: str, places: tuple[str, ...],
                         truth: str | None) -> None:
    """For a birthplace model that kept snapshots: its answer and top candidates at every kept step, in an
    expander that computes only when opened (about one answer's time per step)."""
    from core.figures.training_steps import candidate_steps_figure

    found = snapshots_for(loaded)
    if found is None:
        return
    if not found.snapshots:
        st.info(plain(found.note))
        return
    box = st.expander(f"{name} across training: its answer at each of the {len(found.snapshots)} kept steps",
                      key="probe_steps", on_change="rerun")
    if not box.open:
        return
    with box:
        result = cached_answers_by_step(*_stamp(loaded), question, places, truth, loaded, found)
        st.text(ts.answer_story(result.table))
        st.dataframe(result.table, hide_index=True, column_config=fitted_columns(result.table, EXPANDER_WIDTH, {
            "confidence": st.column_config.NumberColumn(format="percent"),
            "training loss": st.column_config.NumberColumn("loss", format="%.3f", help="Training loss at that step"),
            "tokens": st.column_config.NumberColumn("tokens seen", format="localized")}))  # fits 1024 px
        show_figure(candidate_steps_figure(result.probabilities, truth, f"{name}: candidates at each kept step"),
                    f"{name}-candidates-by-step", key="probe_steps_chart")
