"""Tables as the browser gets them: the Arrow table st.dataframe and st.table send, converted once per shared table
rather than on every rerun of every session (issue 45). Not a page.

Given a pandas DataFrame (or a list of records, which it reads into one), st.dataframe converts it to an Arrow
table on every run that draws it (`streamlit.dataframe_util.convert_pandas_df_to_arrow_table`: pyarrow's
conversion, with Streamlit's fixes for columns Arrow cannot hold), then serialises that; given a `pyarrow.Table`
it serialises the table as it is. So a table converted once by Streamlit's own function and kept with the data
it comes from sends the browser the same bytes, without the conversion per run (tests/test_browser_tables.py
compares the bytes):
- `arrow_table(frame)`: a frame kept in a shared cache (st.cache_resource, shared_caches.derived), converted once
  per frame object and kept while the frame lives (as core.figures.browser.for_browser keeps figures): frames
  are read-only once shared;
- `records_table(rows)`: records a page builds on every run (Home's checkpoint list), converted once per
  content per server.

What Streamlit would have decided from the frame itself is then said by the caller: `hide_index` (Streamlit hides
the index of a list of records by itself, not a table's). Two kinds of tables keep their frame: a pandas Styler
(its cells are formatted on the server) and a table with `on_select` (Streamlit reads the frame's index to
decide what a selection hides).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import streamlit as st
from streamlit import dataframe_util

from pages.shared_caches import derived

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa


def _converted(frame: pd.DataFrame) -> pa.Table:
    return dataframe_util.convert_pandas_df_to_arrow_table(frame)


def arrow_table(frame: pd.DataFrame) -> pa.Table:
    """`frame` as st.dataframe / st.table send it, converted once per frame object (kept while it lives)."""
    return derived(frame, "arrow table", lambda: _converted(frame))


@st.cache_resource(show_spinner=False, max_entries=32)
def _records_table(key: str, _rows: list[dict[str, Any]]) -> pa.Table:
    return _converted(dataframe_util.convert_anything_to_pandas_df(_rows, ensure_copy=False))


def records_table(rows: list[dict[str, Any]]) -> pa.Table:
    """A list of records (one dict per row, the same keys) as st.dataframe sends it, converted once per content
    per server and shared. Draw it with `hide_index=True`: Streamlit hides a list's index by itself, not a
    table's. Values are str, int, float, bool or None: their repr is the cache key."""
    return _records_table(repr(rows), rows)
