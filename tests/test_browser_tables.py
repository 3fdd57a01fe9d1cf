"""Issue 45, tables: pages hand st.dataframe / st.table an Arrow table converted once per shared table
(pages.browser_tables), and the browser gets exactly what it got when Streamlit converted the pandas frame (or the
list of records) itself on every run: the same Arrow bytes, index shown or hidden as before, the same column
configs. And a second session, or a rerun, converts nothing again."""

from __future__ import annotations

import pandas as pd
import pytest
from streamlit import dataframe_util
from streamlit.testing.v1 import AppTest

import pages.attention_views
import pages.browser_tables
import pages.errors_views
from core.io.checkpoint import load
from core.lens import attention as av
from tests.conftest import ROOT

PAGES = {"home": "pages/home.py", "attention": "pages/attention.py", "anatomy": "pages/anatomy.py",
         "curves": "pages/curves.py", "errors": "pages/errors.py"}


def page(name: str, **params) -> AppTest:
    at = AppTest.from_file(str(ROOT / PAGES[name]), default_timeout=120)
    for key, value in params.items():
        at.query_params[key] = value
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def sent(at: AppTest) -> list[tuple[str, bytes]]:
    """Every table element as the browser receives it: its kind and its whole protobuf message (the Arrow bytes,
    the column configs with the index's hidden flag, heights, column order)."""
    return [(kind, element.proto.SerializeToString()) for kind in ("dataframe", "table")
            for element in at.get(kind)]


@pytest.fixture
def folder(monkeypatch, tiny_checkpoints):
    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(tiny_checkpoints))
    return tiny_checkpoints


def as_before(monkeypatch) -> None:
    """The pages as they were: the frame (or the records) handed to Streamlit, which converts it on every run;
    nothing kept (the Attention page's output and sanity tables built on the run)."""
    monkeypatch.setattr(pages.browser_tables, "arrow_table", lambda frame: frame)
    monkeypatch.setattr(pages.browser_tables, "records_table", lambda rows: rows)
    for views in (pages.attention_views, pages.errors_views):
        monkeypatch.setattr(views, "arrow_table", lambda frame: frame)
    monkeypatch.setattr(pages.attention_views, "derived", lambda owner, what, build: build())


@pytest.mark.parametrize("name, params", [("home", {}), ("attention", {"model": "tiny-lm"}),
                                          ("attention", {"model": "tiny-classifier"}),
                                          ("attention", {"model": "tiny-birthplace"}),
                                          ("anatomy", {"model": "tiny-lm"}), ("curves", {}),
                                          ("errors", {"model": "tiny-lm"})])
def test_the_browser_gets_the_bytes_the_frame_gave(folder, monkeypatch, name, params):
    now = sent(page(name, **params))
    assert now, "the page draws a table"
    with monkeypatch.context() as before:
        as_before(before)
        then = sent(page(name, **params))
    assert [kind for kind, _ in now] == [kind for kind, _ in then]
    assert now == then


def test_sanity_table_is_the_table_set_index_made(folder):
    """The sanity checks' frame is built with its index rather than by set_index on records: the same bytes."""
    loaded = load(folder / "tiny-lm.safetensors")
    run = av.run_attention(loaded.model, loaded.tokenizer, loaded.task, "Ada was born", loaded.labels)
    checks = av.sanity_checks(run)
    records = pd.DataFrame([{"check": c.name, "result": {True: "pass", False: "FAIL", None: "n/a"}[c.passed],
                             "detail": c.detail} for c in checks]).set_index("check")
    failed, table = pages.attention_views._sanity(run)
    assert failed == []
    assert dataframe_util.convert_arrow_table_to_arrow_bytes(table) == \
        dataframe_util.convert_pandas_df_to_arrow_bytes(records)


def test_frames_with_holes_and_mixed_columns_keep_streamlits_fixes():
    """A column Arrow cannot hold as it is (numbers and "" mixed: anatomy's fillna("")) is fixed as Streamlit fixes
    it; NaN, a named index and a records list's columns come through unchanged."""
    frames = [pd.DataFrame({"parameters": [12, 34], "buffers": [5, ""]}),
              pd.DataFrame({"x": [1.5, float("nan")], "y": ["a", None]}, index=pd.Index(["p", "q"], name="row"))]
    for frame in frames:
        table = pages.browser_tables.arrow_table(frame)
        assert dataframe_util.convert_arrow_table_to_arrow_bytes(table) == \
            dataframe_util.convert_pandas_df_to_arrow_bytes(frame)
    rows = [{"name": "a", "task": "lm", "layers": 2}, {"name": "b", "task": "", "layers": None}]
    expected = dataframe_util.convert_pandas_df_to_arrow_bytes(dataframe_util.convert_anything_to_pandas_df(rows))
    assert dataframe_util.convert_arrow_table_to_arrow_bytes(pages.browser_tables.records_table(rows)) == expected


class Conversions:
    def __init__(self, monkeypatch) -> None:
        self.count = 0
        convert = dataframe_util.convert_pandas_df_to_arrow_table

        def counted(*args, **kwargs):
            self.count += 1
            return convert(*args, **kwargs)

        monkeypatch.setattr(dataframe_util, "convert_pandas_df_to_arrow_table", counted)


def test_a_table_is_converted_once_per_frame_and_records_once_per_content(monkeypatch):
    conversions = Conversions(monkeypatch)
    frame = pd.DataFrame({"a": [1, 2]})
    first = pages.browser_tables.arrow_table(frame)
    assert pages.browser_tables.arrow_table(frame) is first and conversions.count == 1
    rows = [{"name": "unique-to-this-test", "n": 1}]
    kept = pages.browser_tables.records_table(rows)
    assert pages.browser_tables.records_table([dict(r) for r in rows]) is kept  # equal records, another list
    assert conversions.count == 2
    assert pages.browser_tables.records_table([{"name": "unique-to-this-test", "n": 1.0}]) is not kept  # 1.0 != 1


@pytest.mark.parametrize("name, params", [("home", {}), ("attention", {"model": "tiny-lm"}),
                                          ("anatomy", {"model": "tiny-lm"}), ("curves", {}),
                                          ("errors", {"model": "tiny-lm"})])
def test_a_second_session_and_a_rerun_convert_no_table(folder, monkeypatch, name, params):
    """The first session may convert (nothing cached yet); a rerun of it, and a second session on the same page,
    convert no table: they send the one kept Arrow table. Before: Home and Anatomy converted on every run."""
    conversions = Conversions(monkeypatch)
    first = page(name, **params)
    tables = sent(first)
    conversions.count = 0
    first.run()
    assert not first.exception
    second = page(name, **params)
    assert conversions.count == 0
    assert sent(first) == tables and sent(second) == tables
