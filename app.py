"""Attention Lab: the entry point. Owns page config and the explicit page list.

The shared sidebar (model picker) is drawn by `pages.common.checkpoint_picker()`, which every
page calls first: Streamlit's AppTest reruns only the page script, so sidebar code placed here
would vanish from page tests after the first run.
"""

import streamlit as st

st.set_page_config(page_title="Attention Lab", page_icon=":material/visibility:", layout="wide")

PAGES = [
    st.Page("pages/home.py", title="Home", icon=":material/home:", default=True),
]

st.navigation(PAGES).run()
