"""Issue 45, page switches: what a page's default view reads from the model and the files is computed once per
server, not once per session or per switch. Two AppTest sessions of one process share Streamlit's caches as two
browsers share a server's: the second session's switch to a page must not compute again what the first one did
(counters on the computing functions), and results shared by st.cache_resource reach both as the same object (no
unpickled copy per run)."""

from __future__ import annotations

import dataclasses

import pytest
from streamlit.testing.v1 import AppTest

import core.io.tables
import ui.errors_views
from core.lens.errors import classify, lm
from tests.conftest import ROOT

APP = str(ROOT / "app.py")


@dataclasses.dataclass
class Calls:
    counts: dict[str, int] = dataclasses.field(default_factory=dict)
    results: list = dataclasses.field(default_factory=list)

    def counting(self, name: str, function, keep: bool = False):
        def wrapper(*args, **kwargs):
            self.counts[name] = self.counts.get(name, 0) + 1
            out = function(*args, **kwargs)
            if keep:
                self.results.append(out)
            return out
        return wrapper

    def reset(self) -> None:
        self.counts.clear()
        self.results.clear()


def switched(page: str, query: dict[str, str]) -> AppTest:
    """A new session (a new browser) on the Attention page, then a switch to `page` with the URL's query."""
    at = AppTest.from_file(APP, default_timeout=180)
    at.run()
    at.switch_page("pages/attention.py").run()
    for key, value in query.items():
        at.query_params[key] = value
    at.switch_page(page).run()
    assert not at.exception, [e.message for e in at.exception]
    return at


@pytest.fixture
def bundled(monkeypatch):
    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(ROOT / "checkpoints"))


@pytest.mark.parametrize("model, result_type", [("names-pretrained", classify.ClassifierErrors),
                                                ("lm-learned", lm.LanguageModelErrors)])
def test_errors_second_session_reads_the_first_ones_result_caption_and_tables(bundled, monkeypatch, model,
                                                                             result_type):
    calls = Calls()
    views = ui.errors_views
    monkeypatch.setattr(views, "evaluate", calls.counting("evaluate", views.evaluate, keep=True))
    monkeypatch.setattr(core.io.tables, "table_csv", calls.counting("table_csv", core.io.tables.table_csv))
    monkeypatch.setattr(result_type, "caption", calls.counting("caption", result_type.caption))
    monkeypatch.setattr(views, "fitted_columns", calls.counting("fitted_columns", views.fitted_columns))
    first = switched("pages/errors.py", {"model": model})
    assert calls.counts.get("evaluate") == 1
    shown = [m.value for m in first.markdown]
    kept = calls.results[0]
    calls.reset()
    second = switched("pages/errors.py", {"model": model})
    assert [m.value for m in second.markdown] == shown  # the same page
    assert calls.results and calls.results[0] is kept  # the first session's result itself, not a copy
    # nothing read from the result again: its caption, the tables' column widths; no CSV made before a click
    assert calls.counts.get("caption", 0) == 0 and calls.counts.get("fitted_columns", 0) == 0
    assert calls.counts.get("table_csv", 0) == 0
    assert len(second.get("download_button")) >= 2


def test_errors_shared_result_is_read_only(bundled, monkeypatch):
    """A view that wrote into the shared result's arrays would change every session's page: it fails instead."""
    calls = Calls()
    views = ui.errors_views
    monkeypatch.setattr(views, "evaluate", calls.counting("evaluate", views.evaluate, keep=True))
    switched("pages/errors.py", {"model": "names-pretrained"})
    shared = calls.results[0]
    with pytest.raises(ValueError):
        shared.probabilities[0, 0] = 1.0


def test_curves_second_session_draws_the_first_ones_chart(bundled, monkeypatch):
    """Checkpoint runs (the page's opening comparison): their table, curves, figure and summary are built once; a
    second session's switch reads them (the page script imports these names from core on each run)."""
    import core.figures.curves
    import core.lens.history.curves

    calls = Calls()
    for module, name in ((core.lens.history.curves, "build_curves"), (core.lens.history.curves, "summarize_runs"),
                         (core.figures.curves, "training_curves_figure")):
        monkeypatch.setattr(module, name, calls.counting(name, getattr(module, name)))
    first = switched("pages/curves.py", {})
    spec = first.get("plotly_chart")[0].proto.spec
    calls.reset()
    second = switched("pages/curves.py", {})
    assert second.get("plotly_chart")[0].proto.spec == spec  # the same chart
    assert calls.counts == {}
    second.checkbox(key="curves_logy").check().run()  # another view is computed, once
    assert calls.counts.get("training_curves_figure") == 1 and not second.exception


def test_anatomy_second_session_reads_the_counted_table(bundled, monkeypatch):
    """The selected checkpoint's parameter table is counted once per model version, not on every visit."""
    from core.lens.anatomy import table

    calls = Calls()
    monkeypatch.setattr(table, "parameter_table", calls.counting("parameter_table", table.parameter_table))
    first = switched("pages/anatomy.py", {"model": "lm-learned"})
    shown = first.dataframe[0].value
    calls.reset()
    second = switched("pages/anatomy.py", {"model": "lm-learned"})
    assert second.dataframe[0].value.equals(shown) and calls.counts == {}
    assert "Counted on the loaded model lm-learned." in [c.value for c in second.caption]


def test_errors_csv_is_written_on_click_with_its_example_column(monkeypatch):
    """The page hands Streamlit a callable (run when the button is clicked): nothing is written on a run, and
    the file is the table as before, the example numbers its first column."""
    import pandas as pd

    from core.io.tables import table_csv

    calls = Calls()
    views = ui.errors_views
    monkeypatch.setattr(core.io.tables, "table_csv", calls.counting("table_csv", table_csv))  # where it is called
    kept = {}

    class Where:
        def download_button(self, label, data, **kwargs):
            kept.update(label=label, data=data, **kwargs)

    frame = pd.DataFrame({"text": ["=cmd()", "Ada"], "right": [True, False]}, index=[3, 7])
    views._csv(frame, "These rows (CSV)", "x.csv", "err_csv_view", Where(), index="example")
    assert callable(kept["data"]) and calls.counts == {} and kept["file_name"] == "x.csv"
    assert kept["data"]() == table_csv(frame.reset_index(names="example"))
    assert kept["data"]().splitlines()[:2] == ["example,text,right", "3,'=cmd(),True"]
