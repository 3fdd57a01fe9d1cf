"""Loading models for the pages: the checkpoint folder listed every 30 s, one model per file version per server
(st.cache_resource, shared by every session), a refusal as one sentence on screen. Not a page."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from core.io.checkpoint import (
    CheckpointError,
    CheckpointInfo,
    LoadedCheckpoint,
    checkpoint_dir,
    list_checkpoints,
    load,
)
from core.lens.describe import model_card
from core.text import markdown_escape as plain

NO_CHECKPOINTS = (
    "No checkpoints found in `{folder}`. Run `make checkpoints` to train the bundled models "
    "(about 30 minutes on a laptop CPU), or point `ATTENTION_LAB_CHECKPOINTS` at a folder of "
    "`.safetensors` checkpoints."
)


@st.cache_resource(show_spinner="Loading model…", max_entries=16)
def load_cached(path: str, modified: float) -> LoadedCheckpoint:
    """One model per (file, modification time) per server process, shared by every session."""
    return load(path)


def model_version(loaded) -> tuple[str, float]:
    """The cache key of a loaded model: (its file, with the training step when it is at one; the file's
    modification time, 0.0 for a file gone since it was loaded). A kept step is another model than the
    checkpoint's final weights, so the two never share a cached result."""
    path = Path(loaded.path)
    step = getattr(loaded, "step", None)
    return f"{path}@{step}" if step is not None else str(path), path.stat().st_mtime if path.exists() else 0.0


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


def load_checkpoint(info: CheckpointInfo | None) -> LoadedCheckpoint | None:
    """Load through the cache, turning a refusal into one sentence on screen."""
    if info is None:
        return None
    try:
        return load_cached(str(info.path), Path(info.path).stat().st_mtime)
    except (CheckpointError, OSError) as exc:
        st.error(plain(f"Could not open {info.name}: {exc}"))
        return None
