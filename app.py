"""Attention Lab: the entry point. Owns page config and the navigation over the explicit page list
(ui/__init__.py: APP_PAGES).

The shared sidebar (model picker) is drawn by `ui.model_picker.checkpoint_picker()`, which every
page calls first: Streamlit's AppTest reruns only the page script, so sidebar code placed here
would vanish from page tests after the first run. What is done once per server process (the st.Page objects,
torch's thread count, gc.freeze after a first visit) lives in ui/app_shell.py: this file runs on every rerun.
"""

import os
import sys

import streamlit as st

from ui import APP_RAN
from ui.app_shell import run_pages, settled, upload_heartbeat

st.set_page_config(page_title="Attention Lab", page_icon=":material/visibility:", layout="wide")

PAGES = run_pages(os.path.dirname(os.path.abspath(__file__)))

st.session_state[APP_RAN] = True
if (uploaded := st.session_state.get("upload_dir")) is not None:  # this session keeps uploads: it is alive
    with st.sidebar:
        upload_heartbeat(uploaded)
try:
    st.navigation(PAGES).run()
finally:
    settled(len(sys.modules))
