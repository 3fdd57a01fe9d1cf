"""core.figures.margins: every figure asks for the margins its labels need, so plotly draws it once (the
browser check, that plotly does not have to grow them, is in bench; here the estimates' behaviour)."""

import numpy as np
import plotly.graph_objects as go

from core.figures.attention import attention_heatmap
from core.figures.common import LEGEND_RIGHT
from core.figures.margins import fit_margins, text_width


def test_text_width_counts_wide_characters_double_and_ignores_tags_and_zero_width_spaces():
    assert text_width("abcd", 10) == text_width("ab", 10) * 2
    assert text_width("日本", 10) > text_width("ab", 10) * 1.5
    assert text_width("<b>ab</b>", 10) == text_width("ab", 10)
    assert text_width("ab\u200b\u200b", 10) == text_width("ab", 10)
    assert text_width("a<br>abcdef", 10) == text_width("abcdef", 10)  # the widest line
    assert text_width("&lt;", 10) == text_width("<", 10)


def test_longer_token_labels_get_a_wider_left_margin_and_margins_never_shrink():
    weights = np.tril(np.ones((4, 4))) / 4
    short = attention_heatmap(weights, ["a", "b", "c", "d"])
    long = attention_heatmap(weights, ["a", "b", "c", "extraordinarily"])
    assert long.layout.margin.l > short.layout.margin.l + 60
    assert short.layout.margin.l >= text_width("a", 13) + 30  # labels and the "query" title
    wide = go.Figure(layout=dict(margin=dict(l=300, r=300, b=300)))
    assert (fit_margins(wide).layout.margin.l, wide.layout.margin.r, wide.layout.margin.b) == (300, 300, 300)


def test_colour_bars_and_right_legends_make_room_on_the_right_and_nothing_else_does():
    weights = np.tril(np.ones((3, 3))) / 3
    assert attention_heatmap(weights, ["a", "b", "c"]).layout.margin.r >= 60  # the colour bar
    bare = fit_margins(go.Figure(go.Scatter(x=[0, 1], y=[0, 1])))
    assert bare.layout.margin.r in (None, 0)
    def runs(*names):
        return fit_margins(go.Figure([go.Scatter(x=[0, 1], y=[0, 1], name=n) for n in names],
                                     layout=dict(legend=LEGEND_RIGHT)))
    assert runs("a", "b").layout.margin.r >= 48  # the line sample
    assert runs("a", "a very long run name indeed").layout.margin.r > runs("a", "b").layout.margin.r + 80


def test_numeric_axes_are_not_measured_as_categories():
    fig = fit_margins(go.Figure(go.Scatter(x=np.arange(500), y=np.linspace(1.5, 3.0, 500)),
                                layout=dict(yaxis_title="loss", xaxis_title="step")))
    assert 60 <= fig.layout.margin.l <= 110  # "2.5" and a title, not 500 labels
    assert 50 <= fig.layout.margin.b <= 110


def test_a_legend_under_the_plot_gets_a_row_of_room_per_row_of_names():
    def under(*names):
        return fit_margins(go.Figure([go.Scatter(x=[0, 1], y=[0, 1], name=n) for n in names],
                                     layout=dict(legend=dict(orientation="h", y=-0.02)))).layout.margin.b
    alone = fit_margins(go.Figure(go.Scatter(x=[0, 1], y=[0, 1]))).layout.margin.b
    assert under("a") >= (alone or 0) + 40  # one row and its offset
    assert under("may attend", "masked") >= under("a") + 15  # two rows in a narrow column
    assert under("a long legend entry", "another long entry", "and a third one") > under("may attend", "masked")


def test_crowded_labels_at_given_positions_are_measured_turned():
    # Token axes give every label's position: plotly cannot thin them, so when they collide it turns
    # them, and the longest label sets the height (the probe's "MASK" under 28 characters, measured
    # at 1024 px: plotly turned them 90° and grew the bottom margin by 14 px when this was not counted).
    tokens = list("Where was Alan Turing born?") + ["MASK"]
    def bottom(labels):
        positions = list(range(len(labels)))
        fig = go.Figure(go.Heatmap(z=[[0.0] * len(labels)], x=positions))
        fig.update_xaxes(tickvals=positions, ticktext=labels, tickfont=dict(size=13))
        return fit_margins(fig).layout.margin.b
    assert bottom(tokens) >= text_width("MASK", 13) + 20
    assert bottom(tokens) > bottom(list("Where was Alan Turing born??"))  # one character each: not taller
    assert bottom(["a", "MASK"]) < bottom(tokens)  # two labels have room side by side


def test_a_right_legend_has_room_for_short_names_as_plotly_draws_them():
    fig = fit_margins(go.Figure([go.Scatter(x=[0, 1], y=[0, 1], name=f"head {h}") for h in range(4)],
                                layout=dict(legend=LEGEND_RIGHT)))
    assert fig.layout.margin.r >= 88 + 0.02 * 600  # 'head 0'..'head 3': 88 px measured, right of the plot


def test_a_colour_bar_title_on_its_right_side_takes_one_line_not_its_length():
    # plotly turns a colorbar title with side="right" upright beside the bar: the probe's logit lens named its
    # measure there ("probability of the first piece: Manchester") and got a 429 px right margin, which left
    # its heatmap ~60 px wide at 1024 px (issue 45's screenshots).
    def right(title):
        return fit_margins(go.Figure(go.Heatmap(z=[[0.0, 1.0]], colorbar=dict(title=title)))).layout.margin.r
    long = "probability of the first piece: Manchester"
    upright, across = right(dict(text=long, side="right")), right(dict(text=long, side="top"))
    assert upright < 130 <= right(dict(text="x", side="right")) + 60
    assert upright == right(dict(text="y", side="right"))  # its length does not count
    assert across > text_width(long, 15)  # a title across the top of the bar still needs its length
