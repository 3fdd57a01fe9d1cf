"""What every session shares on one server: one attention trace per (model content, step, text, options) and
one browser-ready figure per (trace, view, the view's choices). Not a page (app.py lists pages explicitly).

st.cache_resource, not st.cache_data: a hit hands every session the same object, where st.cache_data
unpickles a copy on every hit of every run (bench/server_work.py measures the difference). Shared objects are
read-only: a trace's arrays are made unwritable before it is shared (a view writing into one fails loudly
instead of changing another student's picture), and figures are never changed after they are built
(core.figures.browser). Both caches are bounded by max_entries, and figures with many cells are not kept.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Hashable
from pathlib import Path

import numpy as np
import streamlit as st

from core.lens import attention as av

FIGURE_CELLS = 16_384  # a figure drawing more values than this is rebuilt per run, not kept (memory)


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
@st.cache_resource(show_spinner=False, max_entries=32, ttl=3600)
def _trace(digest: str, step: int | None, text: str, run_past_block: bool, queries_keys: bool, _loaded
           ) -> av.AttentionRun:
    return read_only(av.run_attention(_loaded.model, _loaded.tokenizer, _loaded.task, text, _loaded.labels,
                                      run_past_block, queries_keys))


def trace_key(loaded, text: str, past: bool, queries_keys: bool = False) -> tuple:
    """What a run is a function of: the model's content (and training step), the text, the options."""
    digest = model_digest(str(loaded.path), Path(loaded.path).stat().st_mtime)
    return digest, loaded.step, text, bool(past), bool(queries_keys)


def attention_run(loaded, text: str, past: bool, queries_keys: bool = False) -> tuple[tuple, av.AttentionRun]:
    """(the run's key, the run): one forward pass per key per server process, whichever session asks
    (a second session asking while the first computes waits for its result). Raises AttentionInputError."""
    key = trace_key(loaded, text, past, queries_keys)
    return key, _trace(*key, loaded)


# 64 figures: a browser figure is ~50 bytes a value (0.05 MB for one head over 12 tokens, 0.8 MB at the
# FIGURE_CELLS limit), so at most ~50 MB
@st.cache_resource(show_spinner=False, max_entries=64, ttl=3600)
def _figure(key: Hashable, _build: Callable):
    from core.figures.browser import for_browser

    return for_browser(_build())


def figure(key: Hashable, build: Callable, cells: int):
    """`build()` made ready for the browser once per key (the trace's key, the view, its choices) and
    shared; `cells`: how many values it draws (a figure over FIGURE_CELLS is built afresh each time)."""
    if cells > FIGURE_CELLS:
        return build()
    return _figure(key, build)
