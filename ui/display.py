"""Showing results on a page, at projector size: a plotly figure with its toolbar exporting PNG or SVG as the
sidebar says (`show_figure`); tables with numbers as a table shows them, empty cells blank (`shown_table`),
and column widths that add up to the room a table has on a 1024 px projector (`fitted_columns`). Not a page."""

from __future__ import annotations

import functools
from collections.abc import Callable

import streamlit as st


def _cell(value) -> str:
    """A number as a table shows it: whole or large numbers with thousands separators (step 12,000, not
    1.2e+04), the rest to 4 significant digits."""
    if not isinstance(value, float):
        return str(value)
    if value.is_integer() or abs(value) >= 1000:
        return f"{value:,.0f}" if value.is_integer() else f"{value:,.1f}"
    return f"{value:.4g}"


def shown_table(frame):
    """A frame for st.dataframe, which writes "None" in empty cells: columns empty in every row are left
    out, and the empty cells of the others are blank (their numbers then written by `_cell`)."""
    import pandas as pd

    frame = frame.dropna(axis=1, how="all")
    holes = [c for c in frame.columns if frame[c].isna().any()]
    if holes:
        frame = frame.copy()
        for column in holes:
            frame[column] = ["" if pd.isna(v) else _cell(v) for v in frame[column]]
    return frame


MAIN_WIDTH, EXPANDER_WIDTH = 560, 520  # px a table has at 1024x768 with the sidebar open: the page, an expander


MIN_COLUMN, MAX_COLUMN = 48, 200  # px: a column narrower cuts its header to nothing; wider is one long text


def fitted_columns(frame, room: int = MAIN_WIDTH, config: dict | None = None, index: bool = False) -> dict:
    """A column_config whose widths add up to `room` px, each column's share by its longest text (header or
    cell, between MIN_COLUMN and MAX_COLUMN), so a table never scrolls sideways at 1024 px: a long cell is cut
    with "…" inside the table instead. `config` entries keep their other settings (format, label, help);
    `index`: the table shows its index (the first column). `frame`: a DataFrame, or its columns as a dict of lists
    (a table made without pandas, ui.browser_tables.columns_table)."""
    import pandas as pd

    config = dict(config or {})
    names = list(frame)  # a DataFrame's column names, a dict's keys
    hidden = {c: None for c in names if c in config and config[c] is None}
    columns = ([None] if index else []) + [c for c in names if c not in hidden]
    label = {c: str((config.get(c) or {}).get("label") or c) for c in names}

    def longest(column) -> int:
        values = frame.index if column is None else frame[column]
        cells = [len(f"{v:,.4g}" if isinstance(v, float) else str(v)) for v in list(values)[:200]
                 if not (isinstance(v, float) and pd.isna(v))]  # a float as a table formats it, not its repr
        return max([len(label.get(column, "")), *cells, 3])

    whole = {c: max(7 * longest(c) + 18, MIN_COLUMN) for c in columns}  # ~7 px a character
    if sum(whole.values()) <= room:  # every cell whole: no cap needed (a LLaMA folder's long module names)
        wanted = whole
    else:
        wanted = {c: min(w, MAX_COLUMN) for c, w in whole.items()}
    width = dict(wanted)
    for _ in range(len(columns)):  # shrink the columns above the floor until the sum fits
        floor = [c for c in columns if width[c] <= MIN_COLUMN]
        free = room - MIN_COLUMN * len(floor)
        above = sum(wanted[c] for c in columns if c not in floor)
        width = {c: MIN_COLUMN if c in floor else max(MIN_COLUMN, int(wanted[c] * min(1.0, free / max(above, 1))))
                 for c in columns}
        if sum(width.values()) <= room or len(floor) == len(columns):
            break
    out = dict(hidden)
    for column in columns:
        key = "_index" if column is None else column
        out[key] = {**(config.get(key) or {}), "width": width[column]}
    return out


def image_format() -> str:
    return st.session_state.get("image_format", "png")


def show_figure(fig, filename: str, key: str | None = None, on_select: bool = False):
    """Draw a plotly figure whose toolbar camera exports PNG or SVG (chosen in the sidebar); `on_select`:
    a click on a point reruns the page and the selection event is returned."""
    from core.figures.browser import chart_config, for_browser

    # theme=None: the look is in the figure (core.figures.common.APP_LOOK); Streamlit's theme step would
    # make plotly.js draw every chart twice (core/figures/browser.py).
    return st.plotly_chart(for_browser(fig), config=chart_config(filename, image_format()), key=key, theme=None,
                           on_select="rerun" if on_select else "ignore", selection_mode="points")


# The chart library, fetched while Home is read: Streamlit loads its plotly element (a 4.7 MB script) at the first
# chart of a tab, so without this the first chart of the next page paid it (bench.first_visits). One empty figure,
# 10 px high (plotly's least), with nothing to see or read.
WARM_UP = {"data": [{"type": "scatter", "x": [0], "y": [0], "mode": "none", "hoverinfo": "skip"}],
           "layout": {"height": 10, "margin": {"l": 0, "r": 0, "t": 0, "b": 0},
                      "xaxis": {"visible": False}, "yaxis": {"visible": False}}}
@functools.cache
def _warm_up_figure():
    """`WARM_UP` built for the browser, once per process."""
    import plotly.graph_objects as go

    from core.figures.browser import for_browser

    return for_browser(go.Figure(WARM_UP))


def warm_up_chart() -> None:
    """Draw `WARM_UP`: given as a dict, st.plotly_chart validated it into a plotly Figure on every run of Home (~4 ms of
    server CPU a visit, more than the rest of the page's own work; bench.streamlit_floor)."""
    st.plotly_chart(_warm_up_figure(), height=10, theme=None, key="home_chart_warmup",
                    config={"staticPlot": True, "displayModeBar": False})


def within_limit(text: str, limit: int, what: str) -> str:
    """Text a box reads cut to its `limit` characters, with one sentence saying so: a box with `max_chars` left
    the old text in place with no message when more was pasted (issue 41). The box keeps what was typed."""
    if len(text) <= limit:
        return text
    st.info(f"{what} has {len(text):,} characters; the first {limit:,} are used (this box reads at most "
            f"{limit:,}).")
    return text[:limit]


def csv_download(label: str, table: Callable, filename: str, key: str | None = None, where=st) -> None:
    """A CSV of `table()` (a DataFrame) made when the button is clicked, Streamlit running the callable then:
    tables built and sent on every run were most of some pages' work (issue 45). The click reruns nothing
    (on_click="ignore": with the file made on the click, a second button clicked during a first click's rerun
    never downloaded). core.io.tables.table_csv writes it, so no cell reads as a spreadsheet formula."""
    from core.io.tables import table_csv

    where.download_button(label, lambda: table_csv(table()), file_name=filename, mime="text/csv", key=key,
                          on_click="ignore")
