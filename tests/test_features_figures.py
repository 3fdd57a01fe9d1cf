"""core.figures.features, read through fig.data: densities, chips, logit bars, steering bars; labels escaped."""

from __future__ import annotations

import math

import numpy as np

from core.figures import features as figs


def test_density_histogram_draws_the_live_features_and_counts_the_dead():
    fig = figs.density_histogram([0.1, 0.01, 0.0, 0.001])
    assert np.allclose(sorted(fig.data[0].x), [-3, -2, -1])
    assert "1 never fire" in fig.layout.title.text


def test_context_chips_scale_by_the_top_activation_and_escape_pieces():
    fig = figs.context_chips([(["<b>", "a"], [2.0, 0.0], 0), (["x"], [1.0], 0)])
    z = fig.data[0].z
    assert z[0][0] == 1.0 and z[1][0] == 0.5 and math.isnan(z[1][1])
    assert fig.data[0].text[0][0] == "<b>&lt;b&gt;</b>"  # the top piece bold, its text escaped
    assert fig.data[0].customdata[0][0] == 2.0


def test_logit_effect_bars_put_raised_and_lowered_apart():
    fig = figs.logit_effect_bars([("up", 2.0), ("&", 1.0)], [("down", -3.0)])
    assert list(fig.data[0].x) == [1.0, 2.0] and list(fig.data[1].x) == [-3.0]
    assert "&amp;" in fig.data[0].y[0]


def test_steering_bars_pair_the_two_distributions():
    fig = figs.steering_bars(["a", "b"], [0.6, 0.1], [0.2, 0.7])
    assert list(fig.data[0].y) == [0.6, 0.1] and list(fig.data[1].y) == [0.2, 0.7]
    assert fig.data[1].name == "steered"
