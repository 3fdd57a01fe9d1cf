"""core.figures.browser: the figure plotly.js receives is the figure we built, drawn once per change.

Streamlit sends `plotly.io.to_json(return_figure_from_figure_or_data(fig))` and the browser reacts twice
to it (the mount, then a JSON copy). plotly.js recomputes and redraws on the copy when it finds a
template object, a typed array or an object `meta` (compared by identity), or no datarevision (every
array by identity). The tests read the JSON Streamlit would send, built by Streamlit's own path.
"""

from __future__ import annotations

import json

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
import pytest
from plotly.tools import return_figure_from_figure_or_data

from core.figures.browser import apply_template, browser_spec, for_browser, plain, under
from core.figures.common import APP_LOOK, finished, use_app_template


def sent(fig: go.Figure) -> dict:
    """What st.plotly_chart puts on the wire for `fig` (streamlit/elements/plotly_chart.py)."""
    return json.loads(pio.to_json(return_figure_from_figure_or_data(fig, validate_figure=True), validate=False))


def walk(value, path=""):
    yield path, value
    if isinstance(value, dict):
        for key, item in value.items():
            yield from walk(item, f"{path}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from walk(item, f"{path}[{i}]")


@finished
def heatmap_with_numpy() -> go.Figure:
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=1, cols=2, subplot_titles=["a", "b"])
    fig.add_trace(go.Heatmap(z=np.random.default_rng(0).random((5, 6)), x=np.arange(6), meta={"run": "r"},
                             colorscale="Blues"),
                  row=1, col=1)
    fig.add_trace(go.Scatter(x=np.arange(4), y=np.linspace(0, 1, 4), meta={"run": "s"}), row=1, col=2)
    fig.update_layout(title="two panels", xaxis2=dict(title="distance"))
    return fig


def test_what_streamlit_sends_has_nothing_plotly_js_compares_by_identity():
    spec = sent(for_browser(heatmap_with_numpy()))
    assert not isinstance(spec["layout"].get("template"), dict)
    assert isinstance(spec["layout"]["datarevision"], str) and spec["layout"]["datarevision"]
    typed = [path for path, value in walk(spec) if isinstance(value, dict) and "bdata" in value]
    assert not typed, typed
    assert all(isinstance(trace["meta"], list) for trace in spec["data"])
    # ... while the figure as built keeps numpy data, a template and its meta tags
    raw = sent(heatmap_with_numpy())
    assert isinstance(raw["layout"]["template"], dict) and "datarevision" not in raw["layout"]
    assert any(isinstance(value, dict) and "bdata" in value for _, value in walk(raw))


def test_the_data_survive_and_the_datarevision_follows_them():
    fig = heatmap_with_numpy()
    spec = sent(for_browser(fig))
    np.testing.assert_allclose(spec["data"][0]["z"], fig.data[0].z)
    assert spec["data"][0]["x"] == list(range(6)) and spec["data"][0]["meta"] == [{"run": "r"}]
    assert sent(for_browser(heatmap_with_numpy()))["layout"]["datarevision"] == spec["layout"]["datarevision"]
    other = heatmap_with_numpy()
    other.data[0].z = other.data[0].z + 1
    assert sent(for_browser(other))["layout"]["datarevision"] != spec["layout"]["datarevision"]


def test_the_template_is_applied_the_way_plotly_js_applies_it():
    fig = heatmap_with_numpy()
    template = fig.layout.template.to_plotly_json()
    spec = browser_spec(fig)
    layout = spec["layout"]
    # every x axis takes template.layout.xaxis under its own values
    for axis in ("xaxis", "xaxis2"):
        assert layout[axis]["tickfont"] == APP_LOOK["xaxis"]["tickfont"]
        assert layout[axis]["gridcolor"] == template["layout"]["xaxis"]["gridcolor"]
    assert layout["xaxis2"]["title"]["text"] == "distance"  # the figure's own value wins ...
    assert layout["xaxis2"]["title"]["standoff"] == APP_LOOK["xaxis"]["title"]["standoff"]  # ... beside the look's
    # annotationdefaults goes under each annotation (the panel titles), keeping the annotation's text
    assert [a["text"] for a in layout["annotations"]] == ["a", "b"]
    assert all(a["arrowcolor"] == template["layout"]["annotationdefaults"]["arrowcolor"] for a in layout["annotations"])
    # the title's look, and the figure's own title text
    assert layout["title"]["text"] == "two panels" and layout["title"]["font"]["weight"] == 700
    # trace templates: the heatmap's colour bar look, but the figure's own colour scale
    heat = spec["data"][0]
    assert heat["colorbar"]["outlinewidth"] == template["data"]["heatmap"][0]["colorbar"]["outlinewidth"]
    assert heat["colorscale"] == [list(stop) for stop in fig.data[0].colorscale]


def test_trace_templates_cycle_per_trace_type():
    spec = {"data": [{"type": "bar"}, {"type": "bar"}, {"type": "scatter"}, {"type": "bar"}],
            "layout": {"template": {"data": {"bar": [{"opacity": 0.1}, {"opacity": 0.2}],
                                             "scatter": [{"mode": "lines"}]}, "layout": {}}}}
    out = apply_template(spec)
    assert [t.get("opacity") for t in out["data"]] == [0.1, 0.2, None, 0.1]
    assert out["data"][2]["mode"] == "lines" and "template" not in out["layout"]


def test_figures_without_cartesian_traces_get_no_axes():
    spec = {"data": [{"type": "pie", "values": [1, 2]}],
            "layout": {"template": {"layout": {"xaxis": {"gridcolor": "red"}, "font": {"size": 12}}}}}
    out = apply_template(spec)["layout"]
    assert "xaxis" not in out and out["font"] == {"size": 12}


@pytest.mark.parametrize("value, expected", [
    ({"dtype": "f8", "bdata": "AAAAAAAA8D8AAAAAAAAAQA=="}, [1.0, 2.0]),
    ({"dtype": "i1", "bdata": "AAECAwQF", "shape": "2, 3"}, [[0, 1, 2], [3, 4, 5]]),
    (np.arange(3, dtype=np.int32), [0, 1, 2]),
    ((1, (2, 3)), [1, [2, 3]]),
    ("text", "text"),
])
def test_plain_makes_lists_of_arrays_and_typed_array_specs(value, expected):
    assert plain(value) == expected


def test_under_merges_dicts_and_replaces_everything_else():
    assert under({"a": {"b": 1, "c": 2}, "d": [1]}, {"a": {"b": 3}, "d": [2]}) == {"a": {"b": 3, "c": 2}, "d": [2]}
    assert under({"a": 1}, None) is None


def test_a_figure_is_converted_once_while_it_lives():
    fig = heatmap_with_numpy()
    assert for_browser(fig) is for_browser(fig)
    assert for_browser(heatmap_with_numpy()) is not for_browser(fig)


def test_every_figure_of_the_app_keeps_its_look_without_streamlit_s_theme():
    use_app_template()
    fig = go.Figure(go.Scatter(x=[1, 2], y=[3, 4]), layout=dict(title="t"))
    layout = sent(for_browser(fig))["layout"]
    assert layout["font"]["family"] == APP_LOOK["font"]["family"]
    assert layout["title"]["font"]["size"] == APP_LOOK["title"]["font"]["size"]
    assert layout["plot_bgcolor"] == "white" and layout["xaxis"]["showgrid"] is False


def test_a_template_colour_does_not_switch_a_part_on_once_applied():
    """plotly.js shows an axis line when a line colour is given, a minor grid when its colour is given;
    a template's colour is not "given". Applied to the layout, the switches keep their defaults."""
    template = {"layout": {"xaxis": {"linecolor": "#eee", "minor": {"gridcolor": "#eee"}, "gridcolor": "#eee"}}}
    spec = {"data": [{"type": "scatter"}], "layout": {"template": template, "xaxis2": {"linecolor": "red"}}}
    layout = apply_template(spec)["layout"]
    assert layout["xaxis"]["showline"] is False and layout["xaxis"]["minor"]["showgrid"] is False
    assert "showgrid" not in layout["xaxis"]  # the major grid is on by default either way
    assert "showline" not in layout["xaxis2"]  # the figure's own colour does switch its line on


def test_every_axis_sent_skips_plotly_js_label_overflow_measuring():
    """plotly.js's default for a numeric axis ("hide past div") measures every tick label again after each one is
    placed; the app's axes say "allow" (labels fit: fitted margins), and so does every axis the browser receives,
    numbered subplot axes included."""
    spec = sent(for_browser(heatmap_with_numpy()))
    axes = {key: axis for key, axis in spec["layout"].items() if key.startswith(("xaxis", "yaxis"))}
    assert set(axes) == {"xaxis", "yaxis", "xaxis2", "yaxis2"}
    assert {key: axis.get("ticklabeloverflow") for key, axis in axes.items()} == dict.fromkeys(axes, "allow")
    assert spec["data"][0]["colorbar"]["ticklabeloverflow"] == "allow"  # the heatmap's colour bar
    shared = sent(for_browser(finished(lambda: go.Figure(go.Heatmap(z=[[1, 2]], coloraxis="coloraxis"),
                                                         layout=dict(coloraxis=dict(cmin=0))))()))
    assert shared["layout"]["coloraxis"]["colorbar"]["ticklabeloverflow"] == "allow"
