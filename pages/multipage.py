"""Keeping `pages/` without Streamlit's legacy multipage mode (`leave_legacy_multipage_mode`). Not a page."""

from __future__ import annotations

import streamlit as st
from streamlit import config as st_config

from pages import APP_RAN, streamlit_pages


def leave_legacy_multipage_mode() -> None:
    """Streamlit treats a `pages/` folder beside the entry point as a legacy (v1) multipage app until some
    run calls st.navigation; its documentation: "As soon as any session of your app executes the
    st.navigation command, your app will ignore the pages/ directory (across all sessions)". A server whose
    first visitor opens a page URL directly (a shared link) runs that page alone, without app.py, and would
    list every file in pages/ for everyone. So a page run without app.py (app.py marks every session it runs
    in) calls st.navigation itself, with the app's pages, and reruns: from then on app.py is in charge, for
    every session (checked in a real browser: tests/browser, first_visit).

    The one thing here that is not Streamlit's public API: AppTest runs a page file alone on purpose (no
    pages/ beside it, so no legacy mode), and only its hidden config option `global.appTest` says so, seen
    through `streamlit.config.get_option` (AppTest patches that function; `st.get_option` is bound before).
    Read only on a run without app.py; tests/test_app_shell.py fails if Streamlit changes either."""
    if APP_RAN in st.session_state or st_config.get_option("global.appTest"):
        return
    st.navigation(streamlit_pages(), position="hidden")
    st.rerun()
