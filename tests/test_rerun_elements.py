"""Issue 45, session 15 (reruns): less per rerun where the page looks the same. The playground's five tables are
converted once per content per server (ui.browser_tables.matrix_table) and reach the browser as the same bytes;
the Attention page holds no placeholder element for its Words toggle; the trace key reads a model's file digest
once per loaded model. Each test counts the work on reruns and a second session, then changes what the kept thing
depends on and checks that the page follows."""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest
from streamlit.delta_generator import DeltaGenerator
from streamlit.testing.v1 import AppTest

import ui.browser_tables
import ui.shared_caches
from bench.attention_map_build import copying_spec
from core.lens import playground as pg
from tests.conftest import ROOT
from tests.test_attention_page import assert_no_exception, open_page
from tests.test_browser_tables import Conversions, arrow_bytes, sent
from tests.test_rerun_fixed_cost import Counting

PLAYGROUND = str(ROOT / "pages" / "playground.py")


def playground(monkeypatch, folder) -> AppTest:
    monkeypatch.setenv("ATTENTION_LAB_CHECKPOINTS", str(folder))
    at = AppTest.from_file(PLAYGROUND, default_timeout=60).run()
    assert_no_exception(at)
    return at


@pytest.mark.parametrize("preset", ["select", "average-two", "blank", "change-key-return-v2"])
def test_the_playground_tables_are_the_bytes_their_frames_gave(monkeypatch, tiny_checkpoints, preset):
    """Each table element as the browser gets it (Arrow bytes, column configs, index) equals what the page sent
    when it handed Streamlit the frame on every run; the data editors are untouched."""
    def drawn(at: AppTest) -> list[tuple[str, bytes]]:
        at.selectbox(key="pg_preset").set_value(preset).run()
        assert_no_exception(at)
        return sent(at)

    now = drawn(playground(monkeypatch, tiny_checkpoints))
    with monkeypatch.context() as before:
        before.setattr(ui.browser_tables, "matrix_table",
                       lambda values, rows, columns: pd.DataFrame(values, index=rows, columns=columns))
        then = drawn(playground(monkeypatch, tiny_checkpoints))
    assert len(now) == len(then) >= 8  # three editors and five tables (four where the preset has no target)
    assert now == then


def test_the_output_table_with_its_distance_is_the_frame_the_page_built():
    """The output table is one array now (the output and its distance to the target side by side); the page built
    it as a frame and added the distance as a column: the same bytes."""
    rng = np.random.default_rng(0)
    output, target = rng.normal(size=(2, 3)), rng.normal(size=(2, 3))
    distance = np.linalg.norm(output - target, axis=1)
    frame = pg.to_frame(output, "c")
    frame["‖c − target‖"] = distance
    rows, columns = pg.labels(output, "c")
    table = ui.browser_tables.matrix_table(np.column_stack([output, distance]), rows, [*columns, "‖c − target‖"])
    assert arrow_bytes(table) == arrow_bytes(frame)


def test_a_rerun_and_a_second_session_convert_no_playground_table(monkeypatch, tiny_checkpoints):
    """Streamlit converts a frame handed to st.dataframe to Arrow on every run that draws it: the five tables were
    converted on every rerun and page switch (the data editors convert their frames their own way, uncounted)."""
    at = playground(monkeypatch, tiny_checkpoints)
    conversions = Conversions(monkeypatch)
    at.run()
    playground(monkeypatch, tiny_checkpoints)  # another browser, the same settings
    assert conversions.count == 0
    at.slider(key="pg_beta").set_value(20.0).run()  # new numbers: new tables, converted once, and shown
    assert_no_exception(at)
    assert conversions.count == 4  # scores, weights, the solved query, the output: the target is the same table
    at.run()
    assert conversions.count == 4
    weights = at.dataframe[4].value  # editors K, V, Q, then scores and weights
    assert list(weights.columns) == ["k_0", "k_1", "k_2"] and weights.iloc[0, 0] == pytest.approx(1.0, abs=1e-6)


class Sent:
    """The kinds of the elements a run sends (every element goes through DeltaGenerator._enqueue), in order."""

    def __init__(self, monkeypatch) -> None:
        self.kinds: list[str] = []
        enqueue = DeltaGenerator._enqueue

        def counted(generator, delta_type, *args, **kwargs):
            self.kinds.append(delta_type)
            return enqueue(generator, delta_type, *args, **kwargs)

        monkeypatch.setattr(DeltaGenerator, "_enqueue", counted)


def test_the_attention_page_holds_no_placeholder_for_the_words_toggle(monkeypatch, tiny_checkpoints):
    """The Words toggle is drawn under the View radio, in the same column, where a placeholder (st.empty) was sent
    first on every rerun and then filled: no empty element now, and the toggle still comes right after the radio."""
    at = open_page(monkeypatch, tiny_checkpoints, model="tiny-lm", text="Ada was born in Paris.")
    sent_now = Sent(monkeypatch)
    at.run()
    assert_no_exception(at)
    assert "empty" not in sent_now.kinds and "checkbox" in sent_now.kinds  # the toggle (a checkbox proto) is sent
    assert [element.type for element in at.columns[0].children.values()] == ["radio", "toggle"]
    assert at.columns[0].toggle[0].label == "Words"


def test_the_trace_key_reads_the_file_digest_once_per_loaded_model(monkeypatch, tiny_checkpoints):
    digest = Counting(ui.shared_caches.model_digest)
    monkeypatch.setattr(ui.shared_caches, "model_digest", digest)
    at = open_page(monkeypatch, tiny_checkpoints, model="tiny-lm", text="Ada was born in Paris.")
    asked = digest.calls
    assert asked == 1
    at.run()
    at.text_area(key="attn_text").input("Alan was born in Leeds.").run()  # a new sentence: the same model
    open_page(monkeypatch, tiny_checkpoints, model="tiny-lm", text="Ada was born in Paris.")  # a second session
    assert digest.calls == asked
    path = tiny_checkpoints / "tiny-lm.safetensors"
    stamp = path.stat().st_mtime + 10
    os.utime(path, (stamp, stamp))  # a new file version: loaded anew, so its digest is read anew
    at.run()
    assert_no_exception(at)
    assert digest.calls == asked + 1 and at.get("plotly_chart")


def app_figures() -> list:
    """Figures of several kinds as pages build them: an unchecked attention map, a checked subplot figure with
    numpy data and meta, a template whose axes carry a minor grid colour (the part `apply_template` writes)."""
    import plotly.graph_objects as go

    from core.figures.attention import attention_heatmap
    from tests.test_figure_browser import heatmap_with_numpy

    rng = np.random.default_rng(0)
    weights = rng.random((6, 6))
    minor = go.Figure(go.Scatter(x=[1, 2], y=[3, 4]), layout=dict(
        template=dict(layout=dict(xaxis=dict(linecolor="#eee", minor=dict(gridcolor="#eee"))))))
    return [attention_heatmap(weights / weights.sum(1, keepdims=True), list("abcdef"), title="Layer 0, head 0"),
            heatmap_with_numpy(), minor]


def test_the_browser_spec_is_read_without_copying_and_is_the_spec_the_copies_gave(monkeypatch):
    """core.figures.browser.browser_spec reads the figure as plotly holds it: the same spec as the deep-copying
    reading, no deep copy made, and the figure (its template included) left as it was."""
    import plotly.basedatatypes

    from core.figures.browser import browser_spec

    for fig in app_figures():
        expected, before = copying_spec(fig), fig.to_plotly_json()
        copies = Counting(plotly.basedatatypes.deepcopy)  # what to_plotly_json copies with
        with monkeypatch.context() as counting:
            counting.setattr(plotly.basedatatypes, "deepcopy", copies)
            spec = browser_spec(fig)
        assert copies.calls == 0
        assert spec == expected
        assert fig.to_plotly_json() == before  # nothing written into the figure (the template's minor grid)


@pytest.mark.parametrize("options", [
    {}, {"title": "Layer 0, head 0"}, {"diverging": True, "colorbar": False}, {"query_labels": False, "room": 300},
    {"title": "A long title " * 12, "height": 200}, {"long": True}, {"many": True}, {"hovers": True}])
def test_the_attention_map_is_fitted_as_built_and_fit_margins_would_change_nothing(monkeypatch, options):
    """attention_heatmap's figure comes from unchecked_figure, which fits the margins to the labels: `built_fitted`
    leaves out `finished`'s second fitting (fit_margins, not called now), and that fitting finds nothing to grow
    in the figure, whatever the labels."""
    import core.figures.common
    from core.figures.attention import attention_heatmap
    from core.figures.margins import fit_margins

    options = dict(options)
    n = 70 if options.pop("many", False) else 7
    tokens = [f"token-{i}" * (4 if options.pop("long", False) and i == 3 else 1) for i in range(n)]
    if options.pop("hovers", False):
        options["hovers"] = [f"piece {t}" for t in tokens]
    weights = np.tril(np.random.default_rng(n).random((n, n))) + 1e-3
    fitting = Counting(fit_margins)
    monkeypatch.setattr(core.figures.common, "fit_margins", fitting)
    fig = attention_heatmap(weights / weights.sum(1, keepdims=True), tokens, **options)
    assert fitting.calls == 0
    built = fig.to_plotly_json()
    assert fit_margins(fig).to_plotly_json() == built


def _probe_figure_cases():
    """The probe's and where-from's figures that return unchecked_figure(...) as built, with short and long labels,
    few and many rows (each case: name, function, args, kwargs)."""
    from core.figures import probe, where_from

    rng = np.random.default_rng(45)
    for n, label in ((1, "X"), (3, "Paris"), (10, "Santiago de Compostela")):
        places = [f"{label}{i}" for i in range(n)]
        yield "candidate_bars", probe.candidate_bars, (places, rng.random(n)), dict(
            greedy=places[0], truth=places[-1], title="Answers of a model")
    for T, rows in ((12, ["layer 0", "layer 1"]), (45, [f"layer {i}, head {j}" for i in range(2) for j in range(4)])):
        yield "answer_attention_heatmap", probe.answer_attention_heatmap, (
            rng.random((len(rows), T)), [f"tok{i}" for i in range(T)], rows), dict(title="Where ⁇ looks")
    for T, L in ((12, 3), (30, 5)):
        tops = [[f"top{i}{j}" for j in range(T)] for i in range(L)]
        columns = ["embeddings"] + [f"after layer {i}" for i in range(L - 1)]
        yield "logit_lens_heatmap", where_from.logit_lens_heatmap, (
            rng.random((L, T)), tops, [f"piece{i}" for i in range(T)], columns, "Par"), dict(title="The logit lens")
    for n in (5, 40):
        yield "attribution_bars", where_from.attribution_bars, (
            [f"head {i} of layer {i % 3}, a long name" for i in range(n)], rng.normal(size=n), 3.2, "Par"), dict(
            title="Attribution")
    for T, L in ((12, 2), (30, 4)):
        impossible = np.zeros((L, T), bool)
        impossible[-1, :-1] = True
        grids = {k: rng.normal(size=(L, T)) for k in ("residual stream", "attention output", "MLP output")}
        yield "causal_trace_panels", where_from.causal_trace_panels, (
            grids, impossible, [f"p{i}" for i in range(T)]), dict(bold=[2, 3], title="Causal trace")
    for T in (8, 40):
        rows = {"gradient × input": rng.normal(size=T), "integrated gradients": rng.normal(size=T)}
        yield "salience_chips", where_from.salience_chips, ([f"w{i}" for i in range(T)], rows), dict(title="Salience")


@pytest.mark.parametrize("case", list(_probe_figure_cases()), ids=lambda case: case[0])
def test_the_probe_figures_are_fitted_as_built_and_fit_margins_would_change_nothing(monkeypatch, case):
    """As the attention map: each of these figures is unchecked_figure's as built, so `built_fitted` leaves out the
    second fitting (~30% of each figure's build; the causal trace's 1.3 of 3.4 ms), and that fitting would grow
    nothing."""
    import core.figures.common
    from core.figures.margins import fit_margins

    _, make, args, kwargs = case
    fitting = Counting(fit_margins)
    monkeypatch.setattr(core.figures.common, "fit_margins", fitting)
    fig = make(*args, **kwargs)
    assert fitting.calls == 0
    built = fig.to_plotly_json()
    assert fit_margins(fig).to_plotly_json() == built
