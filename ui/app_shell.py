"""What app.py does once per server process, kept out of app.py's own body: app.py runs on every rerun of every
page, and a function decorated there was wrapped anew by st.cache_resource on each run (Streamlit reads the
function's source to key its cache: ~0.5 ms of every rerun, bench/README.md, issue 45 (fixed)). Defined here,
the decorators and the thread setting run once, when app.py first imports this module.
"""

from __future__ import annotations

import copy
import functools
import gc
import threading
import time

import streamlit as st
import torch

from core.io import uploads
from ui import streamlit_pages
from ui.shared_caches import by_name

# One intra-op thread per forward pass: the server runs many small passes for concurrent
# sessions, and two threads per pass on a 2-core machine made a tiny model ~100x slower
# under load (measured by bench/attention_page.py while other jobs ran).
torch.set_num_threads(1)

# The collector's thresholds for a server of many sessions. Each rerun allocates ~10^4-10^5 container objects that
# mostly die young (reference counting frees them), but the survivors (session state, cached results) pile into the
# oldest generation, and after gc.freeze (settled, below) that generation holds little, so Python's rule "a full
# collection once the survivors grow by 25%" fired every few seconds: under 500 sessions, 46-49 full collections per
# replica in two minutes, ~0.12 s each, ~10% of all server CPU (timed by gc.callbacks in each replica). Collecting
# the youngest generation every 10,000 allocations instead of 700, and the oldest after 50 middle ones instead of
# 10, costs the same for the two young generations (their work follows what is allocated), and full collections
# fell to 13-17 per replica, 0.25-0.28 s in all: 8.5 -> 2.9 s of collecting per replica, for ~0.4 MB more per
# session (bench/README.md, issue 45, session 15).
GC_THRESHOLDS = (10_000, 20, 50)
gc.set_threshold(*GC_THRESHOLDS)


@by_name
@st.cache_resource(show_spinner=False)
def page_list(folder: str) -> tuple[st.Page, ...]:
    """Built once per server process (each st.Page resolves its file on disk: ~8% of a run's time under load)."""
    return tuple(streamlit_pages())


def run_pages(folder: str) -> list[st.Page]:
    """A copy per run: st.navigation marks the page it returns as callable and Page.run unmarks it, on the object,
    so sessions running at once must not share one (a shallow copy: no file is resolved again)."""
    return [copy.copy(page) for page in page_list(folder)]


@by_name
@st.cache_resource(show_spinner=False)
def settled(modules: int) -> int:
    """Once per server process and number of imported modules (a page's first visit imports its own): everything
    alive after that run (modules, plotly's validators, torch, loaded models) moved out of the garbage collector's
    sight (gc.freeze, after a collection so no garbage is kept). A full collection walked all of it, ~0.26 s of CPU
    each time (420,000 objects), charged to whichever interaction triggered it (bench/README.md, issue 45).
    Done on a thread of its own, after the first run also warming up what the other pages' first visits need
    (`warm_up`): in the run's own thread the collection (0.3-0.6 s) was part of every page's first visit, before
    the browser heard that the run had finished (issue 52, item 5)."""
    threading.Thread(target=_settle, name="settle-after-first-visit", daemon=True).start()
    return modules


def _settle() -> None:
    with _SETTLING:
        warm_up()
        gc.collect()
        gc.freeze()


_SETTLING = threading.Lock()  # one collection at a time (two first visits may finish together)
# What the pages' first visits import beyond Home's (the core modules and the libraries they load: no Streamlit code
# runs off the script's thread), measured by visiting every page once in AppTest (issue 52, item 5).
WARM_MODULES = (
    "core.figures.attention", "core.figures.heads", "core.figures.query_key", "core.figures.where_from",
    "core.figures.positional", "core.figures.curves", "core.figures.probe", "core.figures.edit",
    "core.figures.training_steps", "core.figures.errors", "core.figures.teaching",
    "core.lens.where_from", "core.lens.errors.classify", "core.lens.errors.lm", "core.lens.errors.inputs",
    "core.lens.probe.answers", "core.lens.probe.corpus", "core.lens.probe.fabricated", "core.lens.positional",
    "core.lens.query_key", "core.lens.edit", "core.lens.anatomy", "core.lens.playground",
    "core.lens.history.sources", "core.data.world",
    # and what they imported at first use, found by the same visits in session 19 (~0.12 s in all; the probe's ~60 ms,
    # tests/test_server_libraries.py checks that no page's first visit imports a core module any more)
    "core.io.snapshots", "core.lens.edit.methods", "core.lens.edit.scorecard", "core.lens.edit.sites",
    "core.lens.errors.birthplace",
    "core.lens.errors.slices", "core.lens.extrapolation", "core.lens.probe.dev_set", "core.lens.training_steps",
    "core.lens.where_from.dev_set", "core.lens.where_from.prompts", "core.lens.history.logs", "core.lens.heads",
    "core.lens.records", "core.data.loader", "core.lens.history.bands", "core.lens.history.presets",
    "core.lens.phase_change", "core.train.job", "core.lens.anatomy.table", "core.lens.anatomy.masks",
    "core.lens.anatomy.references",
    "core.io.handout",  # the Lesson page's "Hand it out" (session 20)
    "core.lens.history.data_server",  # TensorBoard folders through tensorboard-data-server (issue 61)
    "core.lens.perplexities",  # each page's held-out perplexity said against the others (issue 63)
    "core.lens.probes", "core.figures.representations",  # the Representations page (issue 62)
    "core.lens.sae", "core.figures.features", "core.train.sae_job",  # its Features tab
    "tokenizers",  # the subword tokenizers' library (~20 ms), imported by the first BPE model a process loads
)


@functools.cache
def warm_up() -> None:
    """Once per server process, after the first page has run (a person is reading it): the modules the other pages
    import, the app's plotly template (built and validated: ~0.5-0.8 s), and plotly's validators for the trace kinds
    the pages draw (built at their first use). Each page's first visit paid these itself: up to ~1.5 s of a first
    visit on this box. Nothing here is a page's result; a page that gets there first builds what it needs as before
    (imports wait for each other)."""
    import importlib

    import plotly.graph_objects as go

    for name in WARM_MODULES:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - an optional dependency missing: that page says so when visited
            continue
    from core.figures.common import app_template, use_app_template

    app_template()
    use_app_template()
    go.Figure([go.Heatmap(z=[[0.0]], colorbar=dict(title=dict(text="a")), text=[["a"]]),
               go.Bar(x=[0.0], marker=dict(color=["#000"]), error_x=dict(array=[0.0])),
               go.Scatter(x=[0.0], y=[0.0], mode="lines+markers", line=dict(color="#000"))],
              layout=dict(xaxis=dict(title=dict(text="a")), coloraxis=dict(colorscale="RdBu"),
                          legend=dict(orientation="h"))).to_plotly_json()


# Upload folders of sessions that are gone: Streamlit keeps a closed or reloaded tab's session for
# server.disconnectedSessionTTL in case it reconnects, then drops it without ending it, so the folder's own finalizer
# may never run (a reloaded session's folder was there 17 minutes later: issue 52). A live session touches its folder
# (upload_heartbeat); one daemon thread per server process removes the folders nothing touched for
# uploads.grace_s() (5 minutes; ATTENTION_LAB_UPLOAD_GRACE_S), as it removes those a killed server left behind.


def _sweep_uploads() -> None:
    while True:
        time.sleep(uploads.heartbeat_s())
        uploads.sweep_stale()


threading.Thread(target=_sweep_uploads, name="upload-folder-sweeper", daemon=True).start()


@st.fragment(run_every=uploads.heartbeat_s())
def upload_heartbeat(folder: uploads.SessionFolder) -> None:
    """While this session's tab is open, its browser reruns this (and nothing else) every heartbeat: the folder is
    touched, so the sweeper keeps it."""
    folder.touch()
