"""core.figures.attention, checked by inspecting fig.data and fig.layout (no browser)."""

from __future__ import annotations

import numpy as np
import pytest

from core.figures import attention as viz
from core.figures.common import ZERO_WIDTH


def causal(T: int) -> np.ndarray:
    return np.tril(np.ones((T, T), bool))


def random_rows(T: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    w = rng.random((T, T)).astype(np.float32) * causal(T)
    return w / w.sum(-1, keepdims=True)


def test_heatmap_z_is_the_input_and_masked_cells_are_nan_on_grey():
    w = random_rows(5)
    fig = viz.attention_heatmap(w, list("abcde"), causal(5), title="L0 H0")
    z = np.asarray(fig.data[0].z, dtype=float)
    np.testing.assert_array_equal(z[causal(5)], w[causal(5)])
    assert np.isnan(z[~causal(5)]).all()  # masked: not drawn as 0 ...
    assert fig.layout.plot_bgcolor == viz.ATTENTION_MASKED_COLOR  # ... but over grey
    zero_colour = fig.data[0].colorscale[0][1]  # the colour a weight of exactly 0 gets
    assert zero_colour.replace(" ", "") != viz.ATTENTION_MASKED_COLOR.replace(" ", "")
    assert fig.data[0].zmin == 0 and fig.data[0].zmax == float(w.max())
    assert "%{z:.7g}" in fig.data[0].hovertemplate


def test_zero_weight_stays_zero_not_masked():
    w = np.array([[1.0, 0.0], [0.0, 1.0]], dtype=np.float32)
    fig = viz.attention_heatmap(w, ["a", "b"], np.ones((2, 2), bool))
    assert np.asarray(fig.data[0].z)[0, 1] == 0.0


def visible(labels) -> list[str]:
    return [label.replace(ZERO_WIDTH, "") for label in labels]


def test_duplicate_tokens_keep_their_own_positions():
    fig = viz.attention_heatmap(random_rows(4), ["a", "a", "a", "b"], causal(4))
    assert fig.data[0].meta["positions"] == [0, 1, 2, 3]
    assert len(set(fig.data[0].x)) == 4 and list(fig.data[0].x) == list(fig.data[0].y)  # 4 rows, not 2
    assert visible(fig.data[0].x) == ["a", "a", "a", "b"]
    assert fig.layout.xaxis.type == "category" and fig.layout.yaxis.type == "category"
    assert fig.layout.yaxis.autorange == "reversed"  # first query at the top


def test_labels_stay_readable_and_the_browser_thins_them_for_128_tokens():
    """Thinning happens in the browser (category axis, tickmode auto); tests/browser measures the boxes."""
    T = 128
    fig = viz.attention_heatmap(random_rows(T), [f"t{i}" for i in range(T)], causal(T))
    for axis in (fig.layout.xaxis, fig.layout.yaxis):
        assert axis.type == "category" and axis.tickmode == "auto" and axis.tickvals is None
        assert axis.tickfont.size >= 12 and axis.tickfont.color == "#1F2328"
    assert visible(fig.data[0].x)[:3] == ["t0", "t1", "t2"]
    assert 320 <= fig.layout.height <= 900
    short = viz.attention_heatmap(random_rows(8), list("abcdefgh"), causal(8))
    assert short.layout.xaxis.tickfont.size >= 12
    assert fig.data[0].text is None  # tokens from the axes only in the hover past HOVER_TOKENS_MAX


def test_user_text_is_escaped_in_labels_hover_and_title():
    tokens = ["<script>", "b&", "<b>x</b>"]
    fig = viz.attention_heatmap(random_rows(3), tokens, causal(3), title="<i>t</i>")
    assert "<script>" not in "".join(fig.data[0].x)
    assert fig.data[0].x[0] == "&lt;script&gt;"
    assert all("<b>" not in cell for row in fig.data[0].text for cell in row)
    assert fig.layout.title.text == "&lt;i&gt;t&lt;/i&gt;"


def test_hidden_positions_label_the_rows_they_are():
    w = random_rows(3)[1:, 1:]
    fig = viz.attention_heatmap(w, ["first", "b", "c"], causal(2), positions=[1, 2])
    assert fig.data[0].meta["positions"] == [1, 2] and visible(fig.data[0].x) == ["b", "c"]


def test_difference_map_is_diverging_and_centred_on_zero():
    d = np.array([[0.2, -0.5], [0.0, 0.1]])
    fig = viz.attention_heatmap(d, ["a", "b"], np.ones((2, 2), bool), diverging=True)
    assert fig.data[0].zmid == 0 and fig.data[0].zmin == -0.5 and fig.data[0].zmax == 0.5
    np.testing.assert_array_equal(np.asarray(fig.data[0].z), d)


def test_model_view_has_every_layer_and_head_and_frames_the_focus():
    rng = np.random.default_rng(1)
    attention = rng.random((2, 3, 4, 4)).astype(np.float32)
    fig = viz.attention_model_view(attention, causal(4), focus=(1, 2))
    assert len(fig.data) == 6
    z = np.asarray(fig.data[1 * 3 + 2].z, dtype=float)
    np.testing.assert_array_equal(z[causal(4)], attention[1, 2][causal(4)])
    assert np.isnan(z[~causal(4)]).all()
    frame = fig.layout.shapes[0]
    assert frame.xref == "x6 domain" and frame.yref == "y6 domain"
    assert [a.text for a in fig.layout.annotations][:2] == ["L0 H0", "L0 H1"]
    assert all(a.font.size >= 12 for a in fig.layout.annotations)
    assert fig.layout.margin.t >= 30  # room for the first row's titles


def test_model_view_shows_tokens_and_one_colour_bar():
    attention = np.random.default_rng(2).random((2, 2, 3, 3))
    fig = viz.attention_model_view(attention, causal(3), tokens=["<a>", " ", "c"])
    assert {t.coloraxis for t in fig.data} == {"coloraxis"} and fig.layout.coloraxis.colorbar.title.text == "weight"
    assert fig.layout.coloraxis.cmax == pytest.approx(float(attention[:, :, causal(3)].max()))
    assert visible(fig.data[0].y) == ["&lt;a&gt;", "␣", "c"]
    assert fig.layout.yaxis.showticklabels and not fig.layout.yaxis2.showticklabels  # first column only
    assert fig.layout.xaxis3.showticklabels and not fig.layout.xaxis.showticklabels  # last row only


def test_token_figure_has_one_line_per_head_with_gaps_at_masked_keys():
    weights = np.array([[0.5, 0.5, 0.0, 0.0], [0.9, 0.1, 0.0, 0.0]])
    fig = viz.token_attention_figure(weights, list("abcd"), query=1,
                                     allowed_row=np.array([True, True, False, False]))
    assert [t.name for t in fig.data] == ["head 0", "head 1"]
    y = np.asarray(fig.data[1].y, dtype=float)
    assert y[:2].tolist() == [0.9, 0.1] and np.isnan(y[2:]).all()
    assert fig.layout.shapes[0].x0 == 1  # the query's own position is marked


def test_every_query_is_labelled_when_the_rows_have_room():
    import numpy as np

    from core.figures.attention import attention_heatmap
    T = 20
    fig = attention_heatmap(np.tril(np.ones((T, T))) / np.arange(1, T + 1)[:, None], [f"t{i}" for i in range(T)])
    assert fig.layout.yaxis.tickmode == "linear" and fig.layout.yaxis.dtick == 1  # plotly thinned to every other
    crowded = attention_heatmap(np.eye(40), [f"t{i}" for i in range(40)], height=400)  # 7 px a row: plotly thins
    assert crowded.layout.yaxis.dtick is None
