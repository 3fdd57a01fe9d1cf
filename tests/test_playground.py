"""Attention by hand: hand-computed values, the course presets, and one head vs two heads."""

import math

import numpy as np
import pandas as pd
import pytest

from core.figures import teaching as viz
from core.lens import playground as pg

HAND_K = [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]
HAND_V = [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]


def test_attend_matches_a_hand_calculation():
    # q = (1, 2): scores 1, 2, 3; weights e^s / (e + e^2 + e^3); c = w0 v0 + w1 v1 + w2 v2.
    result = pg.attend([1.0, 2.0], HAND_K, HAND_V)
    np.testing.assert_allclose(result.scores, [[1.0, 2.0, 3.0]])
    np.testing.assert_allclose(result.weights, [[0.09003057, 0.24472847, 0.66524096]], atol=1e-8)
    np.testing.assert_allclose(result.output, [[0.75527153, 0.90996943]], atol=1e-8)


def test_scaled_scores_divide_by_sqrt_d():
    result = pg.attend([1.0, 2.0], HAND_K, HAND_V, scaled=True)
    np.testing.assert_allclose(result.scores, [[1 / math.sqrt(2), 2 / math.sqrt(2), 3 / math.sqrt(2)]])
    np.testing.assert_allclose(result.weights.sum(), 1.0)


def test_all_zero_keys_give_uniform_weights_and_the_mean_value():
    V = pg.example_values(5, 3)
    result = pg.attend(np.ones((2, 3)), np.zeros((5, 3)), V)
    np.testing.assert_allclose(result.weights, np.full((2, 5), 0.2))
    np.testing.assert_allclose(result.output, np.tile(V.mean(0), (2, 1)))


def test_softmax_does_not_overflow():
    weights = pg.softmax(np.array([[1000.0, 1000.0, -1000.0]]))
    np.testing.assert_allclose(weights, [[0.5, 0.5, 0.0]])


@pytest.mark.parametrize("Q,K,V,fragment", [
    ([1.0, 2.0, 3.0], HAND_K, HAND_V, "dimensions"),
    ([1.0, 2.0], HAND_K, HAND_V[:2], "one value per key"),
    ([1.0, float("nan")], HAND_K, HAND_V, "finite"),
    ([1.0, 2.0], np.zeros((0, 2)), HAND_V, "non-empty"),
])
def test_bad_tables_are_one_sentence(Q, K, V, fragment):
    with pytest.raises(pg.PlaygroundError, match=fragment):
        pg.attend(Q, K, V)


def run(name, n, d, beta, scaled=False):
    setup = pg.build_setup(name, n, d, beta, scaled)
    return setup, pg.attend(setup.Q, setup.K, setup.V, scaled)


def test_select_with_independent_keys_hits_the_target_scores():
    beta, n = 10.0, 4
    setup, result = run("select", n, 4, beta)
    assert np.linalg.matrix_rank(setup.K) == n  # invertible
    np.testing.assert_allclose(result.scores, [[beta, 0, 0, 0]], atol=1e-9)
    expected = math.exp(beta) / (math.exp(beta) + n - 1)
    assert result.weights[0, 0] == pytest.approx(expected, abs=1e-12)
    assert result.weights[0, 0] > 0.99
    assert np.linalg.norm(result.output - setup.V[0]) < 0.01


def test_select_with_more_keys_than_dimensions_is_only_a_least_squares_fit():
    beta = 10.0
    setup, result = run("select", 8, 3, beta)
    target = np.zeros(8)
    target[0] = beta
    residual = setup.K @ setup.Q[0] - target
    np.testing.assert_allclose(setup.K.T @ residual, 0, atol=1e-9)  # normal equations: best fit
    assert np.linalg.norm(residual) > 1  # but no exact solution
    assert result.weights[0, 0] < 0.99
    assert "least squares" in setup.note


def test_identity_preset_selects_every_value():
    beta = 10.0
    setup, result = run("identity", 4, 4, beta)
    np.testing.assert_allclose(setup.Q, beta * setup.K, atol=1e-9)  # q_i = beta k_i for orthonormal keys
    assert np.all(np.diag(result.weights) > 0.99)
    np.testing.assert_allclose(result.output, setup.V, atol=0.01)
    _, crowded = run("identity", 8, 3, beta)
    assert np.diag(crowded.weights).min() < 0.99  # 8 keys cannot be orthonormal in 3 dimensions


def test_average_all_is_exactly_uniform():
    setup, result = run("average-all", 6, 3, 10.0)
    np.testing.assert_allclose(result.weights, np.full((1, 6), 1 / 6))
    np.testing.assert_allclose(result.output[0], setup.V.mean(0))


def test_average_two_puts_half_on_each():
    setup, result = run("average-two", 4, 4, 10.0)
    np.testing.assert_allclose(result.weights[0, :2], [0.5, 0.5], atol=1e-3)
    assert result.weights[0, 2:].max() < 1e-3
    np.testing.assert_allclose(result.output[0], (setup.V[0] + setup.V[1]) / 2, atol=0.02)


def test_changed_key_averages_three_with_a_unit_key():
    beta = 10.0
    setup, result = run("change-key-average-three", 4, 4, beta)
    assert np.linalg.norm(setup.K[2]) == pytest.approx(1.0)
    assert setup.Q[0] @ setup.K[2] == pytest.approx(beta)
    np.testing.assert_allclose(setup.Q[0], beta * (setup.K[0] + setup.K[1]))  # the same query
    np.testing.assert_allclose(result.weights[0, :3], [1 / 3] * 3, atol=1e-3)


def test_changed_unit_key_returns_v2_for_large_beta():
    beta, n = 20.0, 4
    setup, result = run("change-key-return-v2", n, 4, beta)
    assert np.linalg.norm(setup.K[2]) == pytest.approx(1.0)
    assert setup.Q[0] @ setup.K[2] == pytest.approx(beta * math.sqrt(2))
    gap = (math.sqrt(2) - 1) * beta
    expected = 1 / (1 + 2 * math.exp(-gap) + (n - 3) * math.exp(-math.sqrt(2) * beta))
    assert result.weights[0, 2] == pytest.approx(expected, abs=1e-9)
    assert result.weights[0, 2] > 0.99


def test_scaling_multiplies_the_preset_query_so_the_weights_stay():
    _, plain = run("average-two", 4, 4, 10.0)
    _, scaled = run("average-two", 4, 4, 10.0, scaled=True)
    np.testing.assert_allclose(plain.weights, scaled.weights, atol=1e-12)


@pytest.mark.parametrize("name", list(pg.PRESETS))
@pytest.mark.parametrize("n,d,beta", [(1, 1, 0.0), (8, 8, 50.0), (8, 1, 50.0), (2, 8, 0.0)])
def test_every_preset_is_finite_at_the_extremes(name, n, d, beta):
    setup, result = run(name, n, d, beta)
    assert setup.K.shape[0] >= n and setup.Q.shape[1] == setup.K.shape[1]
    assert np.all(np.isfinite(result.weights)) and np.all(np.isfinite(result.output))
    np.testing.assert_allclose(result.weights.sum(axis=1), 1.0)
    assert setup.target.shape == result.output.shape
    assert pg.PRESETS[name].explanation.count(". ") == 0  # one sentence


def test_blank_preset_is_all_zero():
    setup = pg.build_setup("blank", 5, 4, 10.0)
    assert not setup.K.any() and not setup.Q.any()


def test_unknown_preset_and_bad_beta_are_refused():
    with pytest.raises(pg.PlaygroundError, match="Unknown preset"):
        pg.build_setup("nope", 3, 3, 1.0)
    with pytest.raises(pg.PlaygroundError, match="β"):
        pg.build_setup("select", 3, 3, float("nan"))


def test_frames_round_trip_and_count_empty_cells():
    frame = pg.to_frame(np.arange(6.0).reshape(2, 3), "k")
    assert list(frame.index) == ["k_0", "k_1"] and list(frame.columns) == ["x0", "x1", "x2"]
    frame.iloc[0, 1] = np.nan
    frame = frame.astype(object)
    frame.iloc[1, 2] = "abc"
    values, missing = pg.from_frame(frame)
    assert missing == 2
    np.testing.assert_allclose(values, [[0, 0, 2], [3, 4, 0]])


# --- one head vs two heads -------------------------------------------------------------------------

def test_noisy_keys_have_the_exact_covariance():
    alpha, samples = 0.1, 40_000
    keys = pg.sample_noisy_keys(3, 4, alpha, samples, np.random.default_rng(1), a=0)
    means = np.eye(3, 4)
    np.testing.assert_allclose(keys.mean(0), means, atol=0.02)
    cov_a = np.cov(keys[:, 0].T)
    expected_a = alpha * np.eye(4) + 0.5 * np.outer(means[0], means[0])
    np.testing.assert_allclose(cov_a, expected_a, atol=0.02)
    np.testing.assert_allclose(np.cov(keys[:, 1].T), alpha * np.eye(4), atol=0.01)


def test_one_head_swings_and_two_heads_stay_near_the_average():
    result = pg.noisy_keys_experiment(n=4, d=4, alpha=0.01, beta=10.0, samples=1000, seed=0)
    assert result.single_weight_a.std() > 2 * result.two_weight_a.std()
    assert result.single_weight_a.std() > 0.3  # it really swings between v_a and v_b
    assert result.two_distance.mean() < result.single_distance.mean() / 3
    assert np.median(result.two_distance) < 0.05
    again = pg.noisy_keys_experiment(n=4, d=4, alpha=0.01, beta=10.0, samples=1000, seed=0)
    np.testing.assert_array_equal(result.single_weight_a, again.single_weight_a)  # seeded


def test_beta_zero_is_uniform_for_both_setups():
    result = pg.noisy_keys_experiment(n=5, d=8, alpha=1.0, beta=0.0, samples=10)
    np.testing.assert_allclose(result.single_weight_a, 0.2)
    np.testing.assert_allclose(result.two_weight_b, 0.2)


def test_alpha_zero_two_heads_are_exact_when_the_key_keeps_its_sign():
    result = pg.noisy_keys_experiment(n=2, d=2, alpha=0.0, beta=50.0, samples=500, seed=3)
    ok = result.two_distance < 1e-6
    assert ok.mean() > 0.85  # fails only when 1 + z/sqrt(2) <= 0, about 8% of samples


def test_experiment_refuses_more_keys_than_dimensions():
    with pytest.raises(pg.PlaygroundError, match="n ≤ d"):
        pg.noisy_keys_experiment(n=5, d=4, alpha=0.1, beta=1.0, samples=10)
    with pytest.raises(pg.PlaygroundError, match="variance"):
        pg.noisy_keys_experiment(n=2, d=4, alpha=-1.0, beta=1.0, samples=10)


def test_summary_rows():
    result = pg.noisy_keys_experiment(n=3, d=3, alpha=0.01, beta=5.0, samples=50)
    frame = pd.DataFrame(result.summary())
    assert len(frame) == 6 and set(frame["setup"]) == {"one head", "two heads"}
    row = frame[(frame.quantity == "weight on v_a") & (frame.setup == "one head")].iloc[0]
    assert row["std"] == pytest.approx(result.single_weight_a.std())


# --- figures ----------------------------------------------------------------------------------------

def test_weights_heatmap_writes_each_weight_and_keeps_duplicate_labels():
    result = pg.attend([1.0, 2.0], HAND_K, HAND_V)
    fig = viz.attention_weights_heatmap(result.weights, result.scores, ["k", "k", "<b>k</b>"], ["q_0"])
    heat = fig.data[0]
    assert heat.zmin == 0 and heat.zmax == 1
    assert list(heat.text[0]) == ["0.09", "0.24", "0.67"] and heat.showscale is False  # numbers, not a bar
    np.testing.assert_allclose(heat.customdata, result.scores)
    assert list(fig.layout.xaxis.ticktext) == ["k", "k", "&lt;b&gt;k&lt;/b&gt;"]
    assert list(fig.layout.xaxis.tickvals) == [0, 1, 2]


def test_head_histograms_overlay_both_setups_per_quantity():
    result = pg.noisy_keys_experiment(n=3, d=3, alpha=0.01, beta=5.0, samples=100)
    fig = viz.head_comparison_histograms(result.panels())
    assert [t.name for t in fig.data] == ["one head", "two heads"] * 3
    assert [t.showlegend for t in fig.data] == [True, True, False, False, False, False]
    np.testing.assert_allclose(fig.data[0].x, result.single_weight_a)
    np.testing.assert_allclose(fig.data[5].x, result.two_distance)
    assert fig.data[0].xbins.size == fig.data[1].xbins.size  # same bins, comparable bars
    constant = pg.noisy_keys_experiment(n=3, d=3, alpha=0.0, beta=0.0, samples=10)
    assert viz.head_comparison_histograms(constant.panels()).data[0].xbins.size > 0
