"""What sessions share on one server (ui/shared_caches.py, app.py): one forward pass and one
browser figure per equal input whichever session asks, nothing rebuilt on a rerun or a page switch, and
nothing shared that a page could change."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from streamlit.navigation.page import Page
from streamlit.testing.v1 import AppTest

import core.figures.attention as attention_figures
import core.figures.browser as browser
from core.io.checkpoint import list_checkpoints, load
from core.lens import attention as av
from tests.conftest import ROOT
from ui import shared_caches
from ui import shared_caches as shared

APP = str(ROOT / "app.py")
PAGE = str(ROOT / "pages" / "attention.py")


class Counter:
    """Wraps a module function, counting calls (and, for run_attention, the texts)."""

    def __init__(self, monkeypatch, module, name: str) -> None:
        self.calls: list[tuple] = []
        original = getattr(module, name)

        def counted(*args, **kwargs):
            self.calls.append(args)
            return original(*args, **kwargs)
        monkeypatch.setattr(module, name, counted)


def session(monkeypatch, folder: Path, text: str, view: str = "single") -> AppTest:
    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(folder))
    at = AppTest.from_file(PAGE, default_timeout=60)
    at.query_params.update(model="tiny-lm", view=view)
    at.run()
    at.text_area(key="attn_text").input(text).run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def spec(at: AppTest) -> list[str]:
    return [chart.proto.spec for chart in at.get("plotly_chart")]


@pytest.mark.parametrize("view", ["single", "model", "token", "combine", "qk"])
def test_two_sessions_typing_one_sentence_share_one_forward_pass_and_its_figures(monkeypatch, tiny_checkpoints,
                                                                                 view):
    text = f"Ada was born in Paris, {view} view."  # no other test types it: nothing cached before
    passes = Counter(monkeypatch, av, "run_attention")
    specs = Counter(monkeypatch, browser, "browser_spec")
    first = session(monkeypatch, tiny_checkpoints, text, view)
    assert [args[3] for args in passes.calls].count(text) == 1
    built = len(specs.calls)
    assert built >= 1
    second = session(monkeypatch, tiny_checkpoints, text, view)
    assert [args[3] for args in passes.calls].count(text) == 1  # the second session's run: no forward pass
    assert spec(second) == spec(first)
    # its figures too, except the first run's (the page's default sentence, not typed by the first session)
    typed_runs = len(specs.calls) - built
    second.run()  # a rerun with nothing changed builds nothing at all
    assert len(specs.calls) - built == typed_runs
    assert [args[3] for args in passes.calls].count(text) == 1


def test_a_page_switch_and_back_recomputes_nothing(monkeypatch, tiny_checkpoints):
    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(tiny_checkpoints))
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.switch_page("pages/attention.py").run()
    at.text_area(key="attn_text").input("Grace was born in Leeds, switching.").run()
    passes = Counter(monkeypatch, av, "run_attention")
    heatmaps = Counter(monkeypatch, attention_figures, "attention_heatmap")
    specs = Counter(monkeypatch, browser, "browser_spec")
    before = spec(at)
    at.switch_page("pages/curves.py").run()
    specs.calls.clear()
    at.switch_page("pages/attention.py").run()
    assert not at.exception
    assert spec(at) == before
    assert (passes.calls, heatmaps.calls) == ([], [])
    assert specs.calls == []


def test_pages_are_built_once_per_process_and_each_run_gets_its_own_copies(monkeypatch, tiny_checkpoints):
    import streamlit as st

    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(tiny_checkpoints))
    AppTest.from_file(APP, default_timeout=60).run()  # the first run of this process builds them
    built, navigated = [], []
    original_init, original_navigation = Page.__init__, st.navigation

    def counted(self, *args, **kwargs):
        built.append(args)
        original_init(self, *args, **kwargs)
    counted.__wrapped__ = original_init.__wrapped__  # what Streamlit's own page scan calls (not st.Page)

    def navigation(pages, *args, **kwargs):
        navigated.append(list(pages))
        return original_navigation(pages, *args, **kwargs)
    monkeypatch.setattr(Page, "__init__", counted)
    monkeypatch.setattr(st, "navigation", navigation)
    for _ in range(2):  # two sessions (AppTest runs app.py on a session's first run, then the page alone)
        at = AppTest.from_file(APP, default_timeout=60)
        at.run()
        at.switch_page("pages/attention.py").run()
        assert not at.exception and at.title[0].value == "Attention"
    assert built == []  # no page resolved its file again
    assert len(navigated) == 2 and [p.url_path for p in navigated[0]] == [p.url_path for p in navigated[1]]
    # st.navigation marks the page it returns as callable on the object: each run has its own objects
    assert not {id(p) for p in navigated[0]} & {id(p) for p in navigated[1]}

def test_the_checkpoint_list_is_shared_not_copied_and_never_changed(monkeypatch, tiny_checkpoints):
    folder = str(tiny_checkpoints)
    first = shared_caches.available_checkpoints(folder)
    assert isinstance(first, tuple)
    assert shared_caches.available_checkpoints(folder) is first  # the same objects on every run: no unpickling
    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", folder)
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    for page in ("pages/attention.py", "pages/curves.py", "pages/anatomy.py", "pages/open_model.py",
                 "pages/probe.py", "pages/positional.py", "pages/home.py"):
        at.switch_page(page).run()
        assert not at.exception, page
    assert shared_caches.available_checkpoints(folder) == tuple(list_checkpoints(folder))  # nothing written to it


def test_a_shared_trace_is_read_only_and_equal_to_a_fresh_one(tiny_checkpoints):
    loaded = load(tiny_checkpoints / "tiny-lm.safetensors")
    text = "Alan was born in Rome, read only."
    _, run = shared.attention_run(loaded, text, False, queries_keys=True)
    fresh = av.run_attention(loaded.model, loaded.tokenizer, loaded.task, text, loaded.labels, False, True)
    with pytest.raises(ValueError, match="read-only"):
        run.attention[0, 0, 0, 0] = 1.0
    for record in run.queries_keys:
        assert not record.q.flags.writeable and not record.k.flags.writeable
    assert not run.allowed.flags.writeable and not run.special.flags.writeable
    np.testing.assert_array_equal(run.attention, fresh.attention)
    assert (run.tokens, run.ids, run.notes) == (fresh.tokens, fresh.ids, fresh.notes)


def test_the_same_file_at_two_paths_is_one_model(tmp_path, tiny_checkpoints):
    """Two sessions uploading the same file get two paths; their traces are one (keyed by content)."""
    copy = tmp_path / "elsewhere" / "upload.safetensors"
    copy.parent.mkdir()
    shutil.copy(tiny_checkpoints / "tiny-lm.safetensors", copy)
    text = "Marie was born in Vienna, twice."
    key_a, run_a = shared.attention_run(load(tiny_checkpoints / "tiny-lm.safetensors"), text, False)
    key_b, run_b = shared.attention_run(load(copy), text, False)
    assert key_a == key_b and run_b is run_a
    other = shared.attention_run(load(tiny_checkpoints / "tiny-birthplace.safetensors"), text, False)[0]
    assert other != key_a  # another file: another trace


def test_for_browser_gives_a_browser_figure_back_as_it_is():
    import plotly.graph_objects as go

    out = browser.for_browser(go.Figure(go.Heatmap(z=[[1, 2], [3, 4]])))
    assert browser.for_browser(out) is out


def test_a_browser_figure_is_sent_as_before_without_a_copy_per_run():
    """st.plotly_chart calls to_dict() on every run: one dict, made once, equal to plotly's own copy."""
    import plotly.graph_objects as go
    import plotly.io as pio
    from plotly.tools import return_figure_from_figure_or_data

    out = browser.for_browser(attention_figures.attention_heatmap(
        np.eye(4, dtype=np.float32), list("abcd"), np.tril(np.ones((4, 4), bool)), None, title="t"))
    assert out.to_dict() is out.to_dict()
    sent = pio.to_json(return_figure_from_figure_or_data(out, validate_figure=True), validate=False)
    assert sent == pio.to_json(out.to_dict(), validate=False)
    # what is sent is a valid plotly figure: plotly's own validation keeps every trace and layout value
    np.testing.assert_array_equal(np.asarray(go.Figure(out.to_dict()).to_dict()["data"][0]["z"], dtype=float),
                                  np.asarray(out.to_dict()["data"][0]["z"], dtype=float))


def test_large_figures_are_not_kept(monkeypatch):
    built = []

    def build():
        built.append(1)
        import plotly.graph_objects as go
        return go.Figure()
    for _ in range(2):
        shared.figure(("large figure",), build, shared.FIGURE_CELLS + 1)
    assert len(built) == 2
    for _ in range(2):
        shared.figure(("small figure", id(test_large_figures_are_not_kept)), build, 4)
    assert len(built) == 3


def test_playground_tables_show_four_decimals_without_a_styler():
    at = AppTest.from_file(str(ROOT / "pages" / "playground.py"), default_timeout=60)
    at.session_state["pg_tab"] = TWO_HEADS  # the second tab runs when open (the first always does)
    at.run()
    import json

    shown = [frame for frame in at.dataframe if frame.proto.editing_mode == type(frame.proto).EditingMode.READ_ONLY]
    numeric = [frame for frame in shown if frame.value.select_dtypes("float").shape[1]]
    assert len(numeric) >= 6
    for frame in numeric:
        config = json.loads(frame.proto.columns)
        for column in frame.value.select_dtypes("float").columns:
            assert config[str(column)]["type_config"]["format"] == "%.4f"


TWO_HEADS = "One head vs two heads"


@pytest.mark.parametrize("page, module, builders, state", [
    ("anatomy", "core.figures.teaching", ["mask_heatmap", "parameter_share_bars"], {}),
    ("playground", "core.figures.teaching", ["attention_weights_heatmap", "head_comparison_histograms"],
     {"pg_tab": TWO_HEADS}),
    ("probe", "core.figures.probe", ["answer_attention_heatmap"], {}),  # candidates need a world: not here
])
def test_teaching_figures_are_built_once_for_every_session(monkeypatch, tiny_checkpoints, page, module, builders,
                                                           state):
    import importlib

    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(tiny_checkpoints))
    first = AppTest.from_file(str(ROOT / "pages" / f"{page}.py"), default_timeout=60)
    for key, value in state.items():  # the tabs that draw the builders' figures
        first.session_state[key] = value
    first.run()
    counters = [Counter(monkeypatch, importlib.import_module(module), name) for name in builders]
    second = AppTest.from_file(str(ROOT / "pages" / f"{page}.py"), default_timeout=60)
    for key, value in state.items():
        second.session_state[key] = value
    second.run()
    assert not second.exception
    assert len(spec(second)) >= len(builders) and spec(second) == spec(first)
    assert [c.calls for c in counters] == [[] for _ in builders]


def test_a_cache_called_by_name_is_the_same_cache():
    """ui.shared_caches.by_name passes a cached function's arguments by name (Streamlit then skips its signature
    look-up per argument): the same entries as a positional call, underscore arguments still unhashed, and
    `clear` still there."""
    import streamlit as st

    built = []

    @st.cache_resource(show_spinner=False, max_entries=4)
    def cached(path: str, modified: float, _owner) -> object:
        built.append(path)
        return object()

    named = shared.by_name(cached)
    owner = object()
    first = cached("a", 1.0, owner)
    assert named("a", 1.0, object()) is first and named("a", modified=1.0, _owner=owner) is first
    assert named("b", 1.0, owner) is not first and built == ["a", "b"]
    named.clear()
    assert named("a", 1.0, owner) is not first and built == ["a", "b", "a"]
