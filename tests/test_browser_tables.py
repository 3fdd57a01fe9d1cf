"""Issue 45, tables: pages hand st.dataframe / st.table an Arrow table converted once per shared table
(ui.browser_tables), and the browser gets exactly what it got when Streamlit converted the pandas frame (or the
list of records) itself on every run: the same Arrow bytes, index shown or hidden as before, the same column
configs. And a second session, or a rerun, converts nothing again."""

from __future__ import annotations

import pandas as pd
import pytest
from streamlit import dataframe_util
from streamlit.testing.v1 import AppTest

import ui.attention_views
import ui.browser_tables
import ui.errors_views
from core.io.checkpoint import load
from core.lens import attention as av
from tests.conftest import ROOT
from ui.display import fitted_columns

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


def output_before(output: av.ModelOutput) -> tuple:
    """The Attention page's output table as it was built: a frame of the records, handed to Streamlit."""
    table = pd.DataFrame(output.rows)
    return table, fitted_columns(table)


def sanity_before(run: av.AttentionRun) -> tuple:
    checks = av.sanity_checks(run)
    return [c.name for c in checks if c.passed is False], pd.DataFrame(
        [{"check": c.name, "result": {True: "pass", False: "FAIL", None: "n/a"}[c.passed], "detail": c.detail}
         for c in checks]).set_index("check")


def as_before(monkeypatch) -> None:
    """The pages as they were: the frame (or the records) handed to Streamlit, which converts it on every run;
    nothing kept (the Attention page's output and sanity tables built on the run, as they were built)."""
    monkeypatch.setattr(ui.browser_tables, "arrow_table", lambda frame: frame)
    monkeypatch.setattr(ui.browser_tables, "records_table", lambda rows: rows)
    monkeypatch.setattr(ui.errors_views, "arrow_table", lambda frame: frame)
    monkeypatch.setattr(ui.attention_views, "_output_table", output_before)
    monkeypatch.setattr(ui.attention_views, "_sanity", sanity_before)
    monkeypatch.setattr(ui.attention_views, "derived", lambda owner, what, build: build())


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


def test_output_and_sanity_tables_are_the_tables_pandas_made(folder):
    """The Attention page's tables, built from their columns (the first time a layout is met through pandas, then
    without): the bytes of the frames they were built as before, for each task's output."""
    for name, text in (("tiny-lm", "Ada was born"), ("tiny-lm", "Alan was born"), ("tiny-classifier", "Ada was"),
                       ("tiny-birthplace", "Where was Ada born?")):
        loaded = load(folder / f"{name}.safetensors")
        run = av.run_attention(loaded.model, loaded.tokenizer, loaded.task, text, loaded.labels)
        failed, table = ui.attention_views._sanity(run)
        assert (failed, arrow_bytes(table)) == (sanity_before(run)[0], arrow_bytes(sanity_before(run)[1]))
        if run.output.rows:
            table, widths = ui.attention_views._output_table(run.output)
            frame, widths_before = output_before(run.output)
            assert (arrow_bytes(table), widths) == (arrow_bytes(frame), widths_before)


def arrow_bytes(table) -> bytes:
    """What st.dataframe sends for a pyarrow Table or a pandas frame."""
    if isinstance(table, pd.DataFrame):
        return dataframe_util.convert_pandas_df_to_arrow_bytes(table)
    return dataframe_util.convert_arrow_table_to_arrow_bytes(table)


@pytest.mark.parametrize("columns, index", [
    ({"pos": [0, 1, 2], "token": ["a", "␣", "b"], "next #1": ["x 1.0%", "y 2.0%", "z 97.0%"]}, None),
    ({"label": ["England", "France"], "probability": [0.25, 0.75]}, None),
    ({"result": ["pass", "FAIL"], "detail": ["ok", "largest = 1e-3"]}, ("check", ["Rows sum to 1", "Causal"])),
    ({"flag": [True, False], "n": [-(2**63), 2**63 - 1]}, None),
    ({"x": [1.5, float("nan")], "n": [1, 2]}, None),  # NaN: pandas keeps its bits under the null
    ({"n": [1, 2**63]}, None),  # past int64: pandas makes it uint64
    ({"mixed": [1, "a"], "s": ["p", "q"]}, None),  # Streamlit's fix for a column Arrow cannot hold
    ({"empty": []}, None),
])
def test_columns_table_is_streamlits_conversion_of_the_frame(monkeypatch, columns, index):
    conversions = Conversions(monkeypatch)
    frame = pd.DataFrame(columns, index=pd.Index(index[1], name=index[0]) if index else None)
    expected = dataframe_util.convert_pandas_df_to_arrow_bytes(frame)
    conversions.count = 0
    first = ui.browser_tables.columns_table(columns, index)
    again = ui.browser_tables.columns_table({name: list(values) for name, values in columns.items()}, index)
    assert arrow_bytes(first) == expected and arrow_bytes(again) == expected
    plain = all(ui.browser_tables._kind(v) is not None for v in [*columns.values(), *(index[1:] if index else [])])
    assert conversions.count <= 1 if plain else conversions.count == 2  # a layout met again: no pandas


def test_frames_with_holes_and_mixed_columns_keep_streamlits_fixes():
    """A column Arrow cannot hold as it is (numbers and "" mixed: anatomy's fillna("")) is fixed as Streamlit fixes
    it; NaN, a named index and a records list's columns come through unchanged."""
    frames = [pd.DataFrame({"parameters": [12, 34], "buffers": [5, ""]}),
              pd.DataFrame({"x": [1.5, float("nan")], "y": ["a", None]}, index=pd.Index(["p", "q"], name="row"))]
    for frame in frames:
        table = ui.browser_tables.arrow_table(frame)
        assert dataframe_util.convert_arrow_table_to_arrow_bytes(table) == \
            dataframe_util.convert_pandas_df_to_arrow_bytes(frame)
    rows = [{"name": "a", "task": "lm", "layers": 2}, {"name": "b", "task": "", "layers": None}]
    expected = dataframe_util.convert_pandas_df_to_arrow_bytes(dataframe_util.convert_anything_to_pandas_df(rows))
    assert dataframe_util.convert_arrow_table_to_arrow_bytes(ui.browser_tables.records_table(rows)) == expected


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
    first = ui.browser_tables.arrow_table(frame)
    assert ui.browser_tables.arrow_table(frame) is first and conversions.count == 1
    rows = [{"name": "unique-to-this-test", "n": 1}]
    kept = ui.browser_tables.records_table(rows)
    assert ui.browser_tables.records_table([dict(r) for r in rows]) is kept  # equal records, another list
    assert conversions.count == 2
    assert ui.browser_tables.records_table([{"name": "unique-to-this-test", "n": 1.0}]) is not kept  # 1.0 != 1


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


@pytest.mark.parametrize("first, then", [([1, 2], [3, 2**63]), ([5, 2**63], [1, 2])])
def test_a_layout_met_again_with_numbers_past_int64_is_converted_as_pandas_holds_them(first, then):
    """Two frames of one layout but for numbers pandas holds as uint64: neither is built with the other's schema."""
    name = f"n {first} {then}"  # a layout no other test meets
    for values in (first, then):
        frame = pd.DataFrame({name: values})
        assert arrow_bytes(ui.browser_tables.columns_table({name: values})) == arrow_bytes(frame)
