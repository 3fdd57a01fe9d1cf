"""core.figures.where_from: the figures read back from fig.data."""

from __future__ import annotations

import numpy as np

from core.figures import where_from as viz


def test_logit_lens_heatmap_shows_the_answer_probability_and_names_the_top_piece():
    prob = np.array([[0.1, 0.2], [0.3, 0.9]])
    fig = viz.logit_lens_heatmap(prob, [["a", "<b>"], [" ", "Paris"]], ["x", "x"], ["embeddings", "after layer 0"],
                                 "Paris", title="<script>")
    heat = fig.data[0]
    np.testing.assert_array_equal(heat.z, prob.T)  # rows: positions, columns: layers
    assert heat.text[1][0] == "&lt;b&gt;" and heat.text[0][1] == "\u2423"
    assert len(set(heat.y)) == 2 and list(heat.x) == ["embeddings", "after layer 0"]  # equal tokens: two rows
    assert "<script>" not in fig.layout.title.text


def test_logit_lens_rows_keep_their_height_whatever_the_title_and_colour_bar_take():
    # 14 pieces under a three-line title and a long measure name: each row still gets 20 px (at 12 px a row plotly
    # dropped every other piece's label), and the long name beside the colour bar does not squeeze the map
    tokens = list("Where was Max Born?")[:14]
    prob = np.full((3, len(tokens)), 0.5)
    fig = viz.logit_lens_heatmap(prob, [["Manchester"] * len(tokens)] * 3, tokens,
                                 ["embeddings", "after layer 0", "after layer 1"], "Manchester",
                                 title="birth-vanilla-pretrained: probability of the first piece by layer")
    margin = fig.layout.margin
    assert fig.layout.height - margin.t - margin.b >= 20 * len(tokens)
    assert margin.r < 150


def test_attribution_bars_are_sorted_and_coloured_by_sign():
    fig = viz.attribution_bars(["emb", "L0 H0", "MLP 0", "MLP 1"], [-0.5, 1.0, 3.0, -2.0], 1.5, "Paris")
    bars = fig.data[0]
    assert list(bars.x) == [3.0, 1.0, -0.5, -2.0]
    assert list(bars.marker.color) == [viz.POSITIVE_COLOR] * 2 + [viz.NEGATIVE_COLOR] * 2
    assert list(fig.layout.yaxis.ticktext) == ["MLP 0", "L0 H0", "emb", "MLP 1"]
    assert list(viz.attribution_bars(["a", "b", "c"], [1, -5, 2], 0, "x", top=2).data[0].x) == [2, -5]


def test_causal_trace_panels_grey_out_what_cannot_matter():
    impossible = np.array([[False, False, False], [True, True, False]])
    grids = {k: np.array([[0.1, 0.2, 0.3], [0.0, 0.0, 1.0]]) for k in ("residual", "attention", "MLP")}
    fig = viz.causal_trace_panels(grids, impossible, ["a", "Bob", "?"], bold=[1])
    assert len(fig.data) == 6
    values, grey = fig.data[0], fig.data[1]
    assert np.isnan(np.asarray(values.z, dtype=float)[impossible]).all()
    assert np.asarray(values.z, dtype=float)[0, 2] == 0.3
    assert (np.asarray(grey.z, dtype=float)[impossible] == 1).all()
    assert np.isnan(np.asarray(grey.z, dtype=float)[~impossible]).all()
    assert values.x[1] == "<b>Bob</b>" and fig.data[4].xaxis == "x3"
    assert [a.text for a in fig.layout.annotations] == ["residual", "attention", "MLP"]


def test_salience_chips_scale_each_row_and_keep_the_raw_values():
    fig = viz.salience_chips(["W", "<i>", "?"], {"gradient x input": [1, -2, 0], "integrated gradients": [0, 0, 0]})
    chips = fig.data[0]
    np.testing.assert_allclose(chips.z, [[0.5, 0], [-1, 0], [0, 0]])  # pieces down, methods across
    np.testing.assert_allclose(chips.customdata, [[1, 0], [-2, 0], [0, 0]])
    assert chips.text[1][0] == "&lt;i&gt;"


def test_position_classes_are_labels_not_pieces():
    impossible = np.array([[False, False], [True, False]])
    fig = viz.causal_trace_panels({"residual": np.zeros((2, 2))}, impossible, ["before the name", "last position"],
                                  pieces=False)
    assert list(fig.data[0].x) == ["before the name", "last position"]
