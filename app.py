"""Attention Lab: the entry point. Owns page config and the navigation over the explicit page list
(pages/__init__.py: APP_PAGES).

The shared sidebar (model picker) is drawn by `pages.model_picker.checkpoint_picker()`, which every
page calls first: Streamlit's AppTest reruns only the page script, so sidebar code placed here
would vanish from page tests after the first run.
"""

import copy
import gc
import os
import sys

import streamlit as st
import torch

from pages import APP_RAN, streamlit_pages

# One intra-op thread per forward pass: the server runs many small passes for concurrent
# sessions, and two threads per pass on a 2-core machine made a tiny model ~100x slower
# under load (measured by bench/attention_page.py while other jobs ran).
torch.set_num_threads(1)

st.set_page_config(page_title="Attention Lab", page_icon=":material/visibility:", layout="wide")

@st.cache_resource(show_spinner=False)
def page_list(folder: str) -> tuple[st.Page, ...]:
    """Built once per server process (each st.Page resolves its file on disk: ~8% of a run's time under load)."""
    return tuple(streamlit_pages())


# A copy per run: st.navigation marks the page it returns as callable and Page.run unmarks it, on the object,
# so sessions running at once must not share one (a shallow copy: no file is resolved again).
PAGES = [copy.copy(page) for page in page_list(os.path.dirname(os.path.abspath(__file__)))]


@st.cache_resource(show_spinner=False)
def settled(modules: int) -> int:
    """Once per server process and number of imported modules (a page's first visit imports its own): everything
    alive after that run (modules, plotly's validators, torch, loaded models) moved out of the garbage collector's
    sight (gc.freeze, after a collection so no garbage is kept). A full collection walked all of it, ~0.26 s of CPU
    each time (420,000 objects), charged to whichever interaction triggered it (bench/README.md, issue 45)."""
    gc.collect()
    gc.freeze()
    return modules


st.session_state[APP_RAN] = True
try:
    st.navigation(PAGES).run()
finally:
    settled(len(sys.modules))
