"""The modules the pages share (pages/ holds the page scripts alone, so the list Streamlit shows before app.py
first runs names only pages), and here the app's pages in navigation order, as plain data (one list): app.py
builds its st.Page objects from it (`streamlit_pages`); the tests and benchmarks that walk every page read it
without running Streamlit, so a page listed here is covered by all of them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePosixPath


@dataclass(frozen=True)
class AppPage:
    file: str  # relative to app.py's folder
    title: str
    icon: str
    default: bool = False

    @property
    def name(self) -> str:
        """The page's name in a lesson's slides (core.io.lessons): its file's stem, 'home' for Home."""
        return PurePosixPath(self.file).stem

    @property
    def url_path(self) -> str:
        """The path Streamlit serves the page at: '' for the default page, else the file's name."""
        return "" if self.default else PurePosixPath(self.file).stem


APP_PAGES: tuple[AppPage, ...] = (
    AppPage("pages/home.py", "Home", ":material/home:", default=True),
    AppPage("pages/attention.py", "Attention", ":material/grid_on:"),
    AppPage("pages/positional.py", "Positional encodings", ":material/linear_scale:"),
    AppPage("pages/curves.py", "Training curves", ":material/show_chart:"),
    AppPage("pages/probe.py", "Birthplace probe", ":material/travel_explore:"),
    AppPage("pages/errors.py", "Errors", ":material/rule:"),
    AppPage("pages/playground.py", "Attention playground", ":material/calculate:"),
    AppPage("pages/anatomy.py", "Model anatomy", ":material/account_tree:"),
    AppPage("pages/representations.py", "Representations", ":material/scatter_plot:"),
    AppPage("pages/open_model.py", "Open your model", ":material/upload_file:"),
    AppPage("pages/lesson.py", "Lesson", ":material/slideshow:"),
)


def page_by_name(name: str) -> AppPage | None:
    """The page a lesson's slide names (`AppPage.name`), or None when this app has no such page."""
    return next((page for page in APP_PAGES if page.name == name), None)


APP_RAN = "app_ran"  # session_state: app.py has run in this session (leave_legacy_multipage_mode)


def streamlit_pages() -> list:
    """APP_PAGES as st.Page objects (each resolves its file against the entry point's folder)."""
    import streamlit as st

    return [st.Page(p.file, title=p.title, icon=p.icon, default=p.default) for p in APP_PAGES]


def leave_legacy_multipage_mode() -> None:
    """Streamlit treats a `pages/` folder beside the entry point as a legacy (v1) multipage app until some
    run calls st.navigation; its documentation: "As soon as any session of your app executes the
    st.navigation command, your app will ignore the pages/ directory (across all sessions)". A server whose
    first visitor opens a page URL directly (a shared link) runs that page alone, without app.py, and would
    list every file in pages/ for everyone. So a page run without app.py (app.py marks every session it runs
    in) calls st.navigation itself, with the app's pages, and reruns: from then on app.py is in charge, for
    every session (checked in a real browser: tests/browser, first_visit). Still needed with pages/ holding only
    page scripts: without it that first visitor's page runs without app.py (no page config, no shared sidebar)
    and the folder's listing stays up for everyone (tests/test_app_shell.py, the first listing).

    The one thing here that is not Streamlit's public API: AppTest runs a page file alone on purpose (no
    pages/ beside it, so no legacy mode), and only its hidden config option `global.appTest` says so, seen
    through `streamlit.config.get_option` (AppTest patches that function; `st.get_option` is bound before).
    Read only on a run without app.py; tests/test_app_shell.py fails if Streamlit changes either."""
    import streamlit as st
    from streamlit import config as st_config

    if APP_RAN in st.session_state or st_config.get_option("global.appTest"):
        return
    st.navigation(streamlit_pages(), position="hidden")
    st.rerun()
