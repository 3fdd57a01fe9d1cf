"""What app.py does once per server process, kept out of app.py's own body: app.py runs on every rerun of every
page, and a function decorated there was wrapped anew by st.cache_resource on each run (Streamlit reads the
function's source to key its cache: ~0.5 ms of every rerun, bench/README.md, issue 45 (fixed)). Defined here,
the decorators and the thread setting run once, when app.py first imports this module.
"""

from __future__ import annotations

import copy
import gc

import streamlit as st
import torch

from pages import streamlit_pages

# One intra-op thread per forward pass: the server runs many small passes for concurrent
# sessions, and two threads per pass on a 2-core machine made a tiny model ~100x slower
# under load (measured by bench/attention_page.py while other jobs ran).
torch.set_num_threads(1)


@st.cache_resource(show_spinner=False)
def page_list(folder: str) -> tuple[st.Page, ...]:
    """Built once per server process (each st.Page resolves its file on disk: ~8% of a run's time under load)."""
    return tuple(streamlit_pages())


def run_pages(folder: str) -> list[st.Page]:
    """A copy per run: st.navigation marks the page it returns as callable and Page.run unmarks it, on the object,
    so sessions running at once must not share one (a shallow copy: no file is resolved again)."""
    return [copy.copy(page) for page in page_list(folder)]


@st.cache_resource(show_spinner=False)
def settled(modules: int) -> int:
    """Once per server process and number of imported modules (a page's first visit imports its own): everything
    alive after that run (modules, plotly's validators, torch, loaded models) moved out of the garbage collector's
    sight (gc.freeze, after a collection so no garbage is kept). A full collection walked all of it, ~0.26 s of CPU
    each time (420,000 objects), charged to whichever interaction triggered it (bench/README.md, issue 45)."""
    gc.collect()
    gc.freeze()
    return modules
