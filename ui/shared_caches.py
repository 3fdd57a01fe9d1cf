"""What every session shares on one server, and the cache keys that say when two sessions ask the same thing.

- models: the checkpoint folder listed every 30 s, one model per file version (`load_checkpoint`, a refusal
  as one sentence on screen), one model card per file version; `model_version` is the key of a loaded
  model in the pages' own caches (its file and training step, and the file's modification time);
- attention: one trace per (model content, step, text, options) and one browser-ready figure per (trace,
  view, the view's choices); the probe's "Where from" keeps its figures there too, per what they show
  (ui/where_from_view.py).

st.cache_resource, not st.cache_data: a hit hands every session the same object, where st.cache_data
unpickles a copy on every hit of every run (bench/server_work.py measures the difference). Shared objects are
read-only: a listed CheckpointInfo is never written to, a trace's arrays are made unwritable before it is
shared (a view writing into one fails loudly instead of changing another student's picture), and figures are
never changed after they are built (core.figures.browser). Every cache is bounded by max_entries, and
figures with many cells are not kept. Not a page (app.py lists pages explicitly).
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import weakref
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Any

import numpy as np
import streamlit as st

from core.io import hf_cache
from core.io.checkpoint import (
    CheckpointError,
    CheckpointInfo,
    LoadedCheckpoint,
    checkpoint_dir,
    list_checkpoints,
    load,
)
from core.lens import attention as av
from core.lens.describe import model_card
from core.lens.training_pieces import PROJECT_DATA, TrainingWords, training_lines
from core.text import markdown_escape as plain


def by_name(cached: Callable) -> Callable:
    """An st.cache_* function called with every argument by name. Streamlit finds a positional argument's name
    with inspect.signature on every call of every run (its caching module's `_get_positional_arg_name`: a hit with
    four positional arguments ~0.08-0.13 ms, by name ~0.04-0.06 ms), and a named one it is given; here the names are
    found once. The cache key is the same (Streamlit hashes (name, value) pairs in the call's order either way:
    tests/test_shared_results.py). For the caches every rerun asks (issue 52 item 5)."""
    names = list(inspect.signature(cached).parameters)

    @functools.wraps(cached)
    def call(*args, **kwargs):
        return cached(**dict(zip(names, args)), **kwargs)
    call.clear = cached.clear
    return call


# --- training text (what a model's pieces were cut from) ----------------------------------------------------


@by_name
@st.cache_resource(show_spinner=False, max_entries=8)
def _training_words(files: tuple[str, ...], stamps: tuple[float, ...]) -> TrainingWords | None:
    lines = training_lines({"path": f} for f in files)
    return TrainingWords.of(lines) if lines else None


def training_words(loaded) -> TrainingWords | None:
    """The words of a model's training files (its metadata's data paths inside data/), once per file version:
    for saying how training cut a piece the model never read on its own. None when none can be read."""
    files = tuple(str(d["path"]) for d in loaded.metadata.get("data") or []
                  if isinstance(d, dict) and isinstance(d.get("path"), str))
    stamps = tuple((PROJECT_DATA.parent / f).stat().st_mtime if (PROJECT_DATA.parent / f).is_file() else 0.0
                   for f in files)
    return _training_words(files, stamps) if files else None


# --- models -----------------------------------------------------------------------------------------------

NO_CHECKPOINTS = (
    "No checkpoints found in `{folder}`. Run `make checkpoints` to train the bundled models "
    "(about 30 minutes on a laptop CPU), or point `ATTENTION_LAB_CHECKPOINTS` at a folder of "
    "`.safetensors` checkpoints."
)


@by_name
@st.cache_resource(show_spinner="Loading model…", max_entries=16)
def load_cached(path: str, modified: float) -> LoadedCheckpoint:
    """One model per (file, modification time) per server process, shared by every session."""
    return load(path)


def model_version(loaded) -> tuple[str, float]:
    """The cache key of a loaded model: (its file, with the training step when it is at one; the file's
    modification time, 0.0 for a file gone since it was loaded). A kept step is another model than the
    checkpoint's final weights, so the two never share a cached result; so is a session's edited copy (its
    `edits` version, ui/kept_edits.py)."""
    path = Path(loaded.path)
    step, edits = getattr(loaded, "step", None), getattr(loaded, "edits", None)
    key = f"{path}@{step}" if step is not None else str(path)
    key = f"{key}+edits:{edits}" if edits else key
    return key, path.stat().st_mtime if path.exists() else 0.0


@by_name
@st.cache_resource(show_spinner=False, ttl=30)
def available_checkpoints(folder: str) -> tuple[CheckpointInfo, ...]:
    """Read every 30 s and shared by every session and run as it is (st.cache_data would unpickle a copy on
    every run of every page): read-only, as every CheckpointInfo is once listed (nothing writes to one)."""
    return tuple(list_checkpoints(folder))


@by_name
@st.cache_resource(show_spinner=False, max_entries=256)
def cached_model_card(path: str, modified: float, _info: CheckpointInfo) -> dict[str, str]:
    """The card builds a model on the meta device to count parameters: once per file version, shared
    (read-only: the sidebar only reads it)."""
    return model_card(_info)


@by_name
@st.cache_resource(show_spinner=False, ttl=30)
def cached_hub_models(cache: str) -> tuple[CheckpointInfo, ...]:
    """The Hugging Face cache's models the lab opens, by hub name (core.io.hf_cache), read every 30 s and
    shared read-only like `available_checkpoints`."""
    return tuple(hf_cache.picker_infos(Path(cache)))


@by_name
@st.cache_resource(show_spinner=False, ttl=30)
def checkpoints_folder_note(folder: str) -> str | None:
    """One sentence when ATTENTION_LAB_CHECKPOINTS names a Hugging Face hub cache (core.io.hf_cache); every 30 s."""
    return hf_cache.misplaced_cache(folder)


def all_checkpoints() -> list[CheckpointInfo]:
    """Bundled (or ATTENTION_LAB_CHECKPOINTS) checkpoints, the Hugging Face cache's models (a local run; off
    under `make serve` unless the operator turns it on: core.io.hf_cache), then this session's uploads."""
    infos = list(available_checkpoints(str(checkpoint_dir())))
    if hf_cache.listing_enabled():
        taken = {i.name for i in infos}
        infos += [i for i in cached_hub_models(str(hf_cache.cache_dir())) if i.name not in taken]
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



# --- attention: one trace per run, one figure per view ----------------------------------------------------

FIGURE_CELLS = 16_384  # a figure drawing more values than this is rebuilt per run, not kept (memory)


@by_name
@st.cache_resource(show_spinner=False, max_entries=64)
def model_digest(path: str, modified: float) -> str:
    """sha256 of a checkpoint file (weights, tokenizer, task: all the trace depends on), once per file
    version: the same file uploaded by two sessions (two paths) is one model. A folder (Hugging Face) is
    known by its path and time."""
    if not Path(path).is_file():
        return f"{path}@{modified}"
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def read_only(run: av.AttentionRun) -> av.AttentionRun:
    """The run with every array unwritable (its queries and keys too): safe to hand to every session."""
    for value in vars(run).values():
        if isinstance(value, np.ndarray):
            value.flags.writeable = False
    for record in run.queries_keys or ():
        for value in vars(record).values() if record is not None else ():
            if isinstance(value, np.ndarray):
                value.flags.writeable = False
    return run


# 32 runs: a sentence of 20 tokens on a 4-layer, 4-head model is ~30 kB; a 512-token input 16 MB (the old
# st.cache_data kept 24, pickled: the same bytes)
@by_name
@st.cache_resource(show_spinner=False, max_entries=32, ttl=3600)
def _trace(digest: str, step: int | None, text: str, run_past_block: bool, queries_keys: bool, _loaded
           ) -> av.AttentionRun:
    return read_only(av.run_attention(_loaded.model, _loaded.tokenizer, _loaded.task, text, _loaded.labels,
                                      run_past_block, queries_keys))


def trace_key(loaded, text: str, past: bool, queries_keys: bool = False) -> tuple:
    """What a run is a function of: the model's content (and training step), the text, the options."""
    # once per loaded model (a new file version loads a new one): no stat and no cache asked on every rerun
    digest = derived(loaded, "digest", lambda: model_digest(str(loaded.path), Path(loaded.path).stat().st_mtime))
    return digest, loaded.step, text, bool(past), bool(queries_keys)


def attention_run(loaded, text: str, past: bool, queries_keys: bool = False) -> tuple[tuple, av.AttentionRun]:
    """(the run's key, the run): one forward pass per key per server process, whichever session asks
    (a second session asking while the first computes waits for its result). Raises AttentionInputError."""
    key = trace_key(loaded, text, past, queries_keys)
    return key, _trace(*key, loaded)


_DERIVED: dict[int, tuple[weakref.ref, dict[str, Any]]] = {}


def derived(owner, what: str, build: Callable[[], Any]):
    """`build()` once per shared, read-only object (a run's output, its sanity checks) and `what`, kept while the
    object is: a page's tables of a cached run are made once, not on every rerun of every session. The result is
    read-only like its owner."""
    kept = _DERIVED.get(id(owner))
    if kept is None or kept[0]() is not owner:
        kept = (weakref.ref(owner), {})
        _DERIVED[id(owner)] = kept
        weakref.finalize(owner, _DERIVED.pop, id(owner), None)
    values = kept[1]
    if what not in values:
        values[what] = build()
    return values[what]


# 64 figures: a browser figure is ~50 bytes a value (0.05 MB for one head over 12 tokens, 0.8 MB at the
# FIGURE_CELLS limit), so at most ~50 MB
@by_name
@st.cache_resource(show_spinner=False, max_entries=64, ttl=3600)
def _figure(key: Hashable, _build: Callable):
    from core.figures.browser import for_browser

    return for_browser(_build())


def figure(key: Hashable, build: Callable, cells: int):
    """`build()` made ready for the browser once per key (the trace's key, the view, its choices) and
    shared; `cells`: how many values it draws (a figure over FIGURE_CELLS is built afresh each time)."""
    if cells > FIGURE_CELLS:
        return build()
    # one string for Streamlit to hash, not the nested tuple it hashed element by element on every rerun (the
    # window's positions, the trace key); repr is exact for the str, int, float, bool and None keys are made of
    return _figure(repr(key), build)
