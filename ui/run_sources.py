"""Runs other tools wrote, on the Training curves page: TensorBoard folders, Hugging Face Trainer folders,
Lightning / Keras / W&B / plain CSVs, nanoGPT printouts, MLflow mlruns (core.lens.history.sources). Not a page.

Where they come from: the checkpoints folder (ATTENTION_LAB_CHECKPOINTS), the folder typed on the page (inside
ATTENTION_LAB_ALLOWED_DIRS), uploads (files, or a .zip of a run folder). A folder is read once per version of
its files (shared by every session) and again when a file changes, so a job still writing refreshes live. Also
here: the seed-band switch, the line naming what was not mapped, and the saved steps of a Trainer folder (a
click opens the Attention page on that checkpoint).
"""

from __future__ import annotations

import dataclasses
import os
import re
import tempfile
import threading
import time
from pathlib import Path

import streamlit as st

from core.lens.history.bands import BAND_KINDS, seed_groups
from core.lens.history.curves import METRIC_ORDER
from core.lens.history.data_server import release as release_data_server
from core.lens.history.logs import LIVE_WINDOW_S, RunSource
from core.lens.history.records import LoadedHistory, empty_frame
from core.lens.history.sources import (
    MAX_FILES_WALKED,
    RunsRead,
    ZipRefused,
    read_paths,
    saved_step_marks,
    unpack_zip,
)
from core.text import markdown_escape as plain
from ui.shared_caches import by_name

KIND = "runs"  # RunSource.kind of a run another tool wrote
OWN_SUFFIXES = (".safetensors", ".jsonl")  # this lab's own files: records.read_uploaded_history reads them
TAG_FILTER_KEY = "curves_tag_filter"
BANDS_KEY, BAND_KIND_KEY, GROUP_KEY = "curves_seed_bands", "curves_band_kind", "curves_group"


def folder_signature(root: Path) -> tuple[int, int, int]:
    """(files, total size, newest modification in ns) of every file under `root`: changes when a job writes."""
    count = size = newest = 0
    for folder, _dirs, files in os.walk(root):
        for name in files:
            try:
                stat = os.stat(os.path.join(folder, name), follow_symlinks=False)
            except OSError:
                continue
            count, size, newest = count + 1, size + stat.st_size, max(newest, stat.st_mtime_ns)
        if count > MAX_FILES_WALKED:
            break
    return count, size, newest


@by_name
@st.cache_resource(max_entries=16)
def _followers(root: str) -> tuple[dict, threading.Lock]:
    """Per folder, its event files' readers (event_files.EventFileFollower), kept between versions of the folder so a
    growing file is read on from where it stopped, and a lock: one reading at a time."""
    return {}, threading.Lock()


@by_name
@st.cache_resource(show_spinner="Reading the runs in the folder…", max_entries=16)
def _read_folder(root: str, signature: tuple[int, int, int], tag_filter: str) -> RunsRead:
    """Shared read-only by every session, once per version of the folder's files."""
    followers, lock = _followers(root)
    with lock:
        # the lab's own checkpoints and logs: the page's catalogue lists them already
        return read_paths([root], tag_filter=tag_filter or None, labels=[Path(root).name or root],
                          followers=followers, own=False)


@by_name
@st.cache_resource(max_entries=64)
def _run_table(root: str, signature: tuple[int, int, int], tag_filter: str, run: str) -> LoadedHistory:
    """One run's rows and notes, cut from the folder's table once per version (every rerun asks for it)."""
    found = _read_folder(root, signature, tag_filter)
    frame = found.frame[found.frame["run"] == run].reset_index(drop=True)
    runs = found.runs
    notes = [n for n in found.notes if n.startswith(run) or not any(n.startswith(r) for r in runs)]
    return LoadedHistory(frame if not frame.empty else empty_frame(), notes)


def read_folder(root: Path) -> RunsRead:
    return _read_folder(str(root), folder_signature(root), st.session_state.get(TAG_FILTER_KEY, ""))


def catalog_runs(roots: list[Path], taken: dict[str, RunSource]) -> dict[str, RunSource]:
    """Every other tool's run in the folders, by a name unique among `taken` (the page's own runs)."""
    out: dict[str, RunSource] = {}
    for root in dict.fromkeys(roots):
        if not root.is_dir():
            continue
        for run in read_folder(root).runs:
            if run not in taken and run not in out:
                out[run] = RunSource(run, KIND, root)
    return out


def load(source: RunSource) -> LoadedHistory:
    """The run's table: shared read-only (combine() copies what it joins)."""
    return _run_table(str(source.path), folder_signature(source.path), st.session_state.get(TAG_FILTER_KEY, ""),
                      source.name)


def is_live(source: RunSource) -> bool:
    """A folder with a file written in the last LIVE_WINDOW_S seconds: a job is (probably) still writing it."""
    return time.time() - folder_signature(source.path)[2] / 1e9 <= LIVE_WINDOW_S


def tag_filter_box() -> None:
    st.text_input("Tag filter (regular expression)", key=TAG_FILTER_KEY,
                  help="Only names matching it, as TensorBoard's tag filter: `loss`, `^train/`, `acc|loss`.")


# --- uploads -----------------------------------------------------------------------------------------------

def is_own(filename: str) -> bool:
    return filename.lower().endswith(OWN_SUFFIXES)


def _safe_name(name: str) -> str:
    """The uploaded name without folders or odd characters; an event file keeps its prefix (it is how one is
    recognised), a trainer state its name."""
    return re.sub(r"[^\w.+-]", "_", Path(name).name)[:200] or "upload"


def read_upload(upload, max_bytes: int) -> list[tuple[str, LoadedHistory]]:
    """Another tool's file or a .zip of run folders -> (run name, its table) per run, named '<run> (uploaded)';
    a refusal is a single ('', sentence) entry. Read from a temporary folder that is removed after."""
    name, size = str(upload.name), int(upload.size)
    if size > max_bytes:
        return [("", LoadedHistory(empty_frame(), [f"{name} is {size / 1e6:,.0f} MB, over the "
                                                   f"{max_bytes / 1e6:,.0f} MB limit for uploads."]))]
    data = upload.getvalue()
    with tempfile.TemporaryDirectory(prefix="attention-lab-runs-") as tmp:
        folder = Path(tmp)
        stem = Path(name).stem[:80] or "upload"
        if name.lower().endswith(".zip"):
            path = folder / "unpacked"
            path.mkdir()
            try:
                unpack_zip(data, path, _safe_name(name))
            except ZipRefused as exc:
                return [("", LoadedHistory(empty_frame(), [str(exc)]))]
            found = read_paths([path], labels=[stem])
            release_data_server(path)  # the folder goes with the upload: its TensorBoard data server too
            if found.saved:
                found.notes.append(f"{name}: saved steps in an upload are not opened (their weights are not kept); "
                                   "open the folder on the server to click them.")
        else:
            path = folder / _safe_name(name)
            path.write_bytes(data)
            found = read_paths([path], labels=[_safe_name(name)])
    if found.frame.empty:
        return [("", LoadedHistory(empty_frame(), found.notes or [f"{name} holds no runs this page reads."]))]
    out = []
    for i, run in enumerate(found.runs):
        frame = found.frame[found.frame["run"] == run].copy()
        frame["run"] = f"{run} (uploaded)"
        out.append((f"{run} (uploaded)", LoadedHistory(frame, found.notes if i == 0 else [])))
    return out


# --- seed bands, names not mapped ----------------------------------------------------------------------------

def manual_group(picked: list[str]) -> str:
    """A picked group's name: what the runs' names start with, else the first run's, and how many."""
    prefix = os.path.commonprefix(picked).rstrip(" -_/.:")
    return f"{prefix or picked[0]} (group of {len(picked)})"


def band_controls(selected: list[str], where=st) -> tuple[dict[str, list[str]], str]:
    """Groups of runs drawn as one curve with a band: runs among `selected` that differ only by seed, and runs the
    user picks as a group in the sidebar (they leave their seed group); ({}, kind) when there are none or the
    switch is off. The switch is drawn only where there is a group."""
    groups = seed_groups(selected)
    picked: list[str] = []
    if len(selected) >= 2:
        st.session_state[GROUP_KEY] = [r for r in st.session_state.get(GROUP_KEY, []) if r in selected]
        picked = st.sidebar.multiselect(
            "Group runs as seeds", selected, key=GROUP_KEY,
            help="Runs drawn as one curve, their mean with a band, as W&B groups runs. Runs named like lm-seed0, "
                 "lm-seed1 are grouped without this.")
    if len(picked) >= 2:
        groups = {g: [r for r in m if r not in picked] for g, m in groups.items()}
        groups = {g: m for g, m in groups.items() if len(m) >= 2}
        groups[manual_group(picked)] = list(picked)
    if not groups:
        return {}, "minmax"
    left, right = where.columns([3, 2])
    on = left.toggle(f"Seeds as bands ({', '.join(groups)})", value=True, key=BANDS_KEY,
                     help="Runs whose names differ only by seed, drawn as their mean with a band, as W&B groups runs.")
    kind = right.selectbox("Band", list(BAND_KINDS), format_func=BAND_KINDS.get, key=BAND_KIND_KEY,
                           disabled=not on, label_visibility="collapsed")
    return (groups if on else {}), kind


def drawn_runs(selected: tuple[str, ...] | list[str], groups: dict[str, list[str]]) -> list[str]:
    """The runs the chart draws: each group's name in place of its first member, its other members left out."""
    members = {r: g for g, rs in groups.items() for r in rs}
    return list(dict.fromkeys(members.get(r, r) for r in selected))


def unmapped_line(frame, runs) -> str | None:
    """The names kept as they were logged (not loss, accuracy, perplexity or learning rate), one sentence."""
    from core.lens.history.metric_names import map_metric

    shown = frame[frame["run"].isin(list(runs))]
    names = sorted(m for m in shown["metric"].unique() if m not in METRIC_ORDER and not map_metric(m).mapped)
    if not names:
        return None
    more = f" and {len(names) - 20} more" if len(names) > 20 else ""
    return (f"Not mapped to loss, accuracy, perplexity or learning rate, choosable under their own names in "
            f"Metric: {', '.join(names[:20])}{more}.")


# --- saved steps -------------------------------------------------------------------------------------------

def saved_marks(runs, metric: str, x: str, sources: dict[str, RunSource], frame) -> list:
    """The saved steps (a Trainer's checkpoint-N/) of the selected runs, on the loss chart."""
    if metric != "loss":
        return []
    saved = []
    for run in runs:
        source = sources.get(run)
        if source is not None and source.kind == KIND:
            saved += [s for s in read_folder(source.path).saved if s.run == run]
    return saved_step_marks(frame, saved, x) if saved else []


def _saved_traces(fig) -> list:
    return [t for t in fig.data if (getattr(t, "meta", None) or {}).get("kind") == "saved"]


def has_saved(fig) -> bool:
    return bool(_saved_traces(fig))


def open_clicked_saved(event, fig, sources: dict[str, RunSource]) -> None:
    """Say what the squares are; a click on one adds that checkpoint folder to the model picker and opens the
    Attention page on it (through the Hugging Face reader, core.io.hf)."""
    traces = _saved_traces(fig)
    if not traces:
        return
    st.caption(plain(f"□ marks the {sum(len(t.x) for t in traces)} saved checkpoints of "
                     f"{', '.join(t.meta['run'] for t in traces)}; click one to open the Attention page on it."))
    selection = event.get("selection") if isinstance(event, dict) else None
    for point in (selection or {}).get("points") or []:
        number = point.get("curve_number", -1)
        meta = (getattr(fig.data[number], "meta", None) or {}) if 0 <= number < len(fig.data) else {}
        if meta.get("kind") == "saved" and isinstance(point.get("customdata"), list):
            open_saved(meta["run"], int(point["customdata"][1]), sources)


class _FileUpload:
    """A file on the server handed to core.io.uploads as an upload is (name, size, getvalue)."""

    def __init__(self, path: Path) -> None:
        self.path, self.name, self.size = path, path.name, path.stat().st_size

    def getvalue(self) -> bytes:
        return self.path.read_bytes()


def _session_folder() -> Path:
    """This browser session's private folder for converted models (the one Open your model uses)."""
    from core.io import uploads

    folder = st.session_state.get("upload_dir")
    if not isinstance(folder, uploads.SessionFolder) or not folder.exists:
        uploads.sweep_stale()
        folder = st.session_state["upload_dir"] = uploads.SessionFolder()
    return folder.path


def _nanogpt_vocabulary(ckpt: Path, log_folder: Path) -> list[Path]:
    """A character model's meta.pkl: beside the checkpoint, beside the printout, or in data/<dataset>/ there."""
    for folder in dict.fromkeys([ckpt.parent, log_folder]):
        if (folder / "meta.pkl").is_file() and not (folder / "meta.pkl").is_symlink():
            return [folder / "meta.pkl"]
    metas = sorted(p for p in (log_folder / "data").glob("*/meta.pkl") if not p.is_symlink())
    return metas[:1]


def _picker_info(saved, run: str, step: int):
    """The model picker's entry for a saved step: a Trainer checkpoint folder as it is (core.io.hf), a nanoGPT
    checkpoint converted into this session's folder (core.io.uploads, as Open your model does); or a sentence."""
    from core.io import uploads
    from core.io.checkpoint import CheckpointError
    from core.io.foreign_files import ConversionError
    from core.io.hf import folder_info

    name = f"{run} @ step {step}"
    try:
        if saved.kind == "huggingface":
            return dataclasses.replace(folder_info(saved.path), name=name)
        vocabulary = _nanogpt_vocabulary(saved.path, saved.log.parent if saved.log else saved.path.parent)
        if not vocabulary:
            return (f"{saved.path.name} needs its characters' meta.pkl beside it to be opened here; Open your model "
                    "also takes the training text or GPT-2 tokenizer files.")
        folder = Path(tempfile.mkdtemp(dir=_session_folder()))  # each step's conversion a file of its own
        added = uploads.add_nanogpt(_FileUpload(saved.path), [_FileUpload(p) for p in vocabulary], folder)
        return dataclasses.replace(added.info, name=name)
    except (CheckpointError, ConversionError, uploads.UploadError, OSError) as exc:
        return f"Could not open {run} at step {step:,}: {exc}"


def open_saved(run: str, step: int, sources: dict[str, RunSource]) -> None:
    from ui.model_picker import select_checkpoint
    from ui.page_state import AttentionState, page_url

    source = sources.get(run)
    saved = [s for s in read_folder(source.path).saved if s.run == run and s.step == step] if source else []
    if not saved:
        st.warning(plain(f"{run} has no saved checkpoint at step {step:,} any more."))
        return
    added = st.session_state.setdefault("uploaded_checkpoints", [])
    info = next((i for i in added if i.name == f"{run} @ step {step}"), None)
    if info is None:
        with st.spinner(f"Opening {run} at step {step:,}…"):
            info = _picker_info(saved[0], run, step)
        if isinstance(info, str):
            st.warning(plain(info))
            return
        added.append(info)
    select_checkpoint(info.name)
    from ui import page_state

    state = (page_state.last_state(AttentionState) or AttentionState()).replace(step=None)
    st.switch_page("pages/attention.py", query_params=page_url(state, model=info.name))
