"""The app's pages, in navigation order, as plain data (one list): app.py builds its st.Page objects from
it (`streamlit_pages`); the tests and benchmarks that walk every page read it without running Streamlit, so
a page listed here is covered by all of them. The other modules here are the page files and the modules
they share, named for what they hold."""

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
    def url_path(self) -> str:
        """The path Streamlit serves the page at: '' for the default page, else the file's name."""
        return "" if self.default else PurePosixPath(self.file).stem


APP_PAGES: tuple[AppPage, ...] = (
    AppPage("pages/home.py", "Home", ":material/home:", default=True),
    AppPage("pages/attention.py", "Attention", ":material/grid_on:"),
    AppPage("pages/positional.py", "Positional encodings", ":material/linear_scale:"),
    AppPage("pages/curves.py", "Training curves", ":material/show_chart:"),
    AppPage("pages/probe.py", "Birthplace probe", ":material/travel_explore:"),
    AppPage("pages/playground.py", "Attention playground", ":material/calculate:"),
    AppPage("pages/anatomy.py", "Model anatomy", ":material/account_tree:"),
    AppPage("pages/open_model.py", "Open your model", ":material/upload_file:"),
)


APP_RAN = "app_ran"  # session_state: app.py has run in this session (pages.multipage.leave_legacy_multipage_mode)


def streamlit_pages() -> list:
    """APP_PAGES as st.Page objects (each resolves its file against the entry point's folder)."""
    import streamlit as st

    return [st.Page(p.file, title=p.title, icon=p.icon, default=p.default) for p in APP_PAGES]
