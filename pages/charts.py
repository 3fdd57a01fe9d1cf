"""Drawing a plotly figure on a page (`show_figure`), its toolbar exporting PNG or SVG as the sidebar says.
Not a page."""

from __future__ import annotations

import streamlit as st


def image_format() -> str:
    return st.session_state.get("image_format", "png")


def show_figure(fig, filename: str, key: str | None = None, on_select: bool = False):
    """Draw a plotly figure whose toolbar camera exports PNG or SVG (chosen in the sidebar); `on_select`:
    a click on a point reruns the page and the selection event is returned."""
    from core.figures.browser import for_browser
    from core.figures.common import chart_config

    # theme=None: the look is in the figure (core.figures.common.APP_LOOK); Streamlit's theme step would
    # make plotly.js draw every chart twice (core/figures/browser.py).
    return st.plotly_chart(for_browser(fig), config=chart_config(filename, image_format()), key=key, theme=None,
                           on_select="rerun" if on_select else "ignore", selection_mode="points")
