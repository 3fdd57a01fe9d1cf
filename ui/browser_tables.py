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
  content per server;
- `matrix_table(values, rows, columns)`: numbers under row and column labels a page makes on every run (the
  playground's tables), converted once per content per server;
- `columns_table(columns)`: a table made once per run of a model (the Attention page's output and sanity checks),
  built from its columns without pandas where a frame of the same layout was converted before: what Streamlit's
  conversion makes of a frame whose columns each hold one plain type (str, bool, int, float) depends on its
  layout only (the names, the types, the number of rows), so the schema it gave (Arrow types and pandas
  metadata) is kept per layout and the columns are put under it.

What Streamlit would have decided from the frame itself is then said by the caller: `hide_index` (Streamlit hides
the index of a list of records by itself, not a table's). Two kinds of tables keep their frame: a pandas Styler
(its cells are formatted on the server) and a table with `on_select` (Streamlit reads the frame's index to
decide what a selection hides).
"""

from __future__ import annotations

import hashlib
import math
from typing import TYPE_CHECKING, Any

import numpy as np
import streamlit as st
from streamlit import dataframe_util

from ui.shared_caches import by_name, derived

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa


def _converted(frame: pd.DataFrame) -> pa.Table:
    return dataframe_util.convert_pandas_df_to_arrow_table(frame)


def arrow_table(frame: pd.DataFrame) -> pa.Table:
    """`frame` as st.dataframe / st.table send it, converted once per frame object (kept while it lives)."""
    return derived(frame, "arrow table", lambda: _converted(frame))


@by_name
@st.cache_resource(show_spinner=False, max_entries=32)
def _records_table(key: str, _rows: list[dict[str, Any]]) -> pa.Table:
    return _converted(dataframe_util.convert_anything_to_pandas_df(_rows, ensure_copy=False))


def records_table(rows: list[dict[str, Any]]) -> pa.Table:
    """A list of records (one dict per row, the same keys) as st.dataframe sends it, converted once per content
    per server and shared. Draw it with `hide_index=True`: Streamlit hides a list's index by itself, not a
    table's. Values are str, int, float, bool or None: their repr is the cache key."""
    return _records_table(repr(rows), rows)


@by_name
@st.cache_resource(show_spinner=False, max_entries=256)
def _matrix_table(key: str, _values: np.ndarray, _rows: tuple[str, ...], _columns: tuple[str, ...]) -> pa.Table:
    import pandas as pd

    return _converted(pd.DataFrame(_values, index=list(_rows), columns=list(_columns)))


def matrix_table(values: np.ndarray, rows: list[str], columns: list[str]) -> pa.Table:
    """pd.DataFrame(values, index=rows, columns=columns) as st.dataframe sends it (float64 numbers under labels: the
    playground's tables), converted once per content per server and shared: the same tables come back on every
    rerun and page switch while nobody edits them. Keyed by the numbers' bytes, the shape and the labels."""
    values = np.ascontiguousarray(values, dtype=np.float64)
    digest = hashlib.blake2b(values.tobytes(), digest_size=16).hexdigest()
    key = repr((digest, values.shape, tuple(rows), tuple(columns)))
    return _matrix_table(key, values, tuple(rows), tuple(columns))


# (column names, one type per column, index name, rows) -> the Arrow schema (types and pandas metadata) Streamlit's
# conversion gave a frame of that layout; bounded (a few layouts per task and input length)
_LAYOUTS: dict[tuple, pa.Schema] = {}
MAX_LAYOUTS = 1024
INT64 = range(-(2**63), 2**63)


def _kind(values: list) -> type | None:
    """The one type of every value, where pandas and Arrow agree on how such a column is held: str, bool, int
    within int64, float but NaN (pandas keeps the NaN's bits under Arrow's null); else None."""
    kinds = {type(v) for v in values}
    if len(kinds) != 1:
        return None
    kind = kinds.pop()
    if kind is int and not all(v in INT64 for v in values) or kind is float and any(math.isnan(v) for v in values):
        return None
    return kind if kind in (str, bool, int, float) else None


def columns_table(columns: dict[str, list], index: tuple[str, list] | None = None) -> pa.Table:
    """The Arrow table Streamlit's conversion makes of pd.DataFrame(columns) (its index `index`: a name and the
    values, else 0, 1, ...), the same bytes: made from the columns with the schema a frame of the same layout was
    given, converted through pandas the first time a layout is met (or when a column is not of one plain type)."""
    import pandas as pd
    import pyarrow as pa

    named = {**columns, **({index[0]: index[1]} if index else {})}
    kinds = tuple(_kind(values) for values in named.values())
    lengths = {len(values) for values in named.values()}
    key = (tuple(columns), kinds, index and index[0], lengths.pop() if len(lengths) == 1 else None)
    plain = None not in kinds and key[-1] is not None and all(isinstance(name, str) for name in named)
    schema = _LAYOUTS.get(key) if plain else None
    if schema is not None:
        return pa.Table.from_arrays([pa.array(named[field.name], type=field.type) for field in schema], schema=schema)
    frame = pd.DataFrame(columns, index=pd.Index(index[1], name=index[0]) if index else None)
    table = _converted(frame)
    if plain:
        if len(_LAYOUTS) >= MAX_LAYOUTS:
            _LAYOUTS.clear()
        _LAYOUTS.setdefault(key, table.schema)
    return table
