"""Attention Lab: the entry point. Owns page config and the explicit page list.

The shared sidebar (model picker) is drawn by `pages.common.checkpoint_picker()`, which every
page calls first: Streamlit's AppTest reruns only the page script, so sidebar code placed here
would vanish from page tests after the first run.
"""

import copy
import os

import streamlit as st
import torch

# One intra-op thread per forward pass: the server runs many small passes for concurrent
# sessions, and two threads per pass on a 2-core machine made a tiny model ~100x slower
# under load (measured by bench/attention_page.py while other jobs ran).
torch.set_num_threads(1)

st.set_page_config(page_title="Attention Lab", page_icon=":material/visibility:", layout="wide")

@st.cache_resource(show_spinner=False)
def page_list(folder: str) -> tuple[st.Page, ...]:
    """Built once per server process (each st.Page resolves its file on disk: ~8% of a run's time under load)."""
    return (
        st.Page("pages/home.py", title="Home", icon=":material/home:", default=True),
        st.Page("pages/attention.py", title="Attention", icon=":material/grid_on:"),
        st.Page("pages/positional.py", title="Positional encodings", icon=":material/linear_scale:"),
        st.Page("pages/curves.py", title="Training curves", icon=":material/show_chart:"),
        st.Page("pages/probe.py", title="Birthplace probe", icon=":material/travel_explore:"),
        st.Page("pages/playground.py", title="Attention playground", icon=":material/calculate:"),
        st.Page("pages/anatomy.py", title="Model anatomy", icon=":material/account_tree:"),
        st.Page("pages/open_model.py", title="Open your model", icon=":material/upload_file:"),
    )


# A copy per run: st.navigation marks the page it returns as callable and Page.run unmarks it, on the object,
# so sessions running at once must not share one (a shallow copy: no file is resolved again).
PAGES = [copy.copy(page) for page in page_list(os.path.dirname(os.path.abspath(__file__)))]
st.navigation(PAGES).run()
