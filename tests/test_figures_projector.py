"""Issue 15 section 2: figures readable on a projector, read from fig.data / fig.layout (the label boxes
themselves are measured in a browser by tests/browser/test_projector.py)."""

import numpy as np
import pandas as pd

from core.figures import positional as figs
from core.figures.common import LEGEND_RIGHT, RUN_COLORS, log_axis, run_colors
from core.figures.curves import training_curves_figure
from core.lens import positional as pv
from core.lens.history.curves import build_curves
from core.model.positional import POSITIONAL, scheme_color, scheme_label


def test_a_run_keeps_its_colour_whatever_else_is_on_the_chart():
    alone = run_colors(["lm-rope"])
    crowd = run_colors(["birth-vanilla-pretrained", "lm-learned", "lm-rope", "names-scratch"])
    assert alone["lm-rope"] == crowd["lm-rope"] or len(set(crowd.values())) == 4
    many = run_colors([f"run-{i}" for i in range(len(RUN_COLORS))])
    assert len(set(many.values())) == len(RUN_COLORS)  # never two runs of one chart in one colour
    assert run_colors(["a", "b"]) == run_colors(["a", "b"])  # stable (crc32, not Python's salted hash)


def test_every_scheme_carries_its_label_colour_and_order_in_the_registry():
    assert [scheme_label(s) for s in ("sinusoidal", "learned", "alibi", "rope")] == [
        "sinusoidal", "learned", "ALiBi", "RoPE"]
    colors = [scheme_color(s) for s in POSITIONAL]
    assert len(set(colors)) == len(POSITIONAL)
    assert sorted(POSITIONAL, key=lambda s: POSITIONAL[s].order)[:4] == ["sinusoidal", "learned", "alibi", "rope"]


def frame(runs):
    rows = [{"run": r, "step": s, "epoch": s // 10, "tokens": s * 10, "wall_time": float(s), "split": "val",
             "metric": m, "value": v} for r in runs for s in (10, 20)
            for m, v in (("loss", 2.0 - s / 100), ("perplexity", float(np.exp(2.0 - s / 100))))]
    return pd.DataFrame(rows)


def test_perplexity_is_drawn_on_a_log_axis_and_loss_on_a_linear_one():
    data = frame(["a", "b"])
    assert figs.positional_training_figure(data, ["a", "b"], ["alibi", "rope"], "perplexity").layout.yaxis.type == "log"
    fig = figs.positional_training_figure(data, ["a", "b"], ["alibi", "rope"], "loss")
    assert fig.layout.yaxis.type == "linear"
    assert [t.line.color for t in fig.data] == [POSITIONAL["alibi"].color, POSITIONAL["rope"].color]


def test_log_axes_label_their_ticks_with_whole_numbers_not_first_digits():
    """Left alone, plotly labels a log axis spanning a decade '2' for 20 (the extrapolation panels did)."""
    axis = log_axis([2.6, 3.1, 24.7])
    assert axis["type"] == "log" and axis["ticktext"] == ["3", "5", "7", "10", "15", "20"]
    assert [float(t) for t in axis["ticktext"]] == axis["tickvals"]
    wide = log_axis([1.01, 5000, None, float("nan"), -1])
    assert wide["ticktext"] == ["1", "3", "10", "30", "100", "300", "1000", "3000"]  # at most 8, 1-3 steps
    assert log_axis([2.8, 3.1]) == {"type": "log"}  # under a tenth of a decade: plotly's own ticks
    assert log_axis([]) == {"type": "log"}
    ppl = figs.positional_training_figure(frame(["a"]), ["a"], ["alibi"], "perplexity")
    assert ppl.layout.yaxis.ticktext and all("e" not in t for t in ppl.layout.yaxis.ticktext)


def test_legends_sit_right_of_the_plot_not_on_the_axis_title():
    fig = figs.positional_training_figure(frame(["a"]), ["a"], ["alibi"], "loss")
    assert fig.layout.legend.x == LEGEND_RIGHT["x"] > 1 and fig.layout.legend.orientation == "v"


def test_best_stars_are_one_per_run_in_the_run_colour_and_legend_group():
    plot = build_curves(frame(["a", "b"]), ["a", "b"], "loss")
    fig = training_curves_figure(plot)
    stars = [t for t in fig.data if (t.meta or {}).get("kind") == "best"]
    assert len(stars) == 2 and [s.legendgroup for s in stars] == ["a", "b"]
    assert [s.marker.color for s in stars] == [run_colors(["a", "b"])[r] for r in ("a", "b")]
    assert all(s.marker.size <= 12 for s in stars)


def test_similarity_maps_stay_inside_their_positions():
    fig = figs.position_matrix_heatmap(pv.cosine_similarity(pv.sinusoidal_values(64, 32)), "t")
    assert list(fig.layout.yaxis.range) == [63.5, -0.5] and list(fig.layout.xaxis.range) == [-0.5, 63.5]
    assert fig.layout.xaxis.constrain == "domain" and fig.layout.yaxis.constrain == "domain"


def test_alibi_titles_do_not_sit_on_tick_labels():
    view = pv.alibi_view(8, 16)
    fig = figs.alibi_bias_figure(view.bias, view.slopes, "t")
    layout = fig.layout
    assert layout.xaxis.showticklabels is False and layout.xaxis5.showticklabels is not False  # bottom row only
    assert layout.yaxis2.showticklabels is False and layout.yaxis5.showticklabels is not False  # first column only
    tops = sorted({round(layout[f"yaxis{'' if n == 1 else n}"].domain[1], 3) for n in range(1, 9)})
    bottoms = sorted({round(layout[f"yaxis{'' if n == 1 else n}"].domain[0], 3) for n in range(1, 9)})
    assert tops[0] - bottoms[0] > 0 and bottoms[1] - tops[0] >= 0.1  # a gap between the rows for the titles
    assert {a.font.size for a in layout.annotations} == {13}


def test_every_figure_wears_the_white_template_whatever_was_imported_first():
    """Streamlit sets plotly's default template to its own on import: ours is assigned per figure."""
    import plotly.io as pio
    import streamlit  # noqa: F401

    white = pio.templates["plotly_white"].layout.plot_bgcolor
    fig = training_curves_figure(build_curves(frame(["a"]), ["a"], "loss"))
    assert fig.layout.template.layout.plot_bgcolor == white
    assert pio.to_json(fig).count('"plot_bgcolor":"' + white + '"') >= 1  # sent with the figure
