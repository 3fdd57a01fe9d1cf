"""Figures built in one step without plotly's checks (core.figures.common.unchecked_figure) are exactly the figures
plotly's checks would have made: each is rebuilt checked from its own dict (an unknown property raises, a title
string or a colour-scale name is rewritten) and the two must send the same JSON to the browser."""

from __future__ import annotations

import json

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
import pytest

from core.figures import attention as av
from core.figures import probe as pv
from core.figures import where_from as wf
from core.figures.common import colorscale, unchecked_figure

TOKENS = ["W", "her", "e", " ", "was", " ", "Ma", "x", " ", "Born", " ", "born", "?", "⁇"]


def checked_twin(fig: go.Figure) -> go.Figure:
    return go.Figure(fig.to_dict())  # validated property by property


def sent(fig: go.Figure) -> dict:
    """The figure as the browser gets it (key order aside)."""
    return json.loads(pio.to_json(fig))


FIGURES = {
    "logit lens": lambda: wf.logit_lens_heatmap(np.linspace(0, 1, 3 * len(TOKENS)).reshape(3, -1),
                                                [["<b>Paris</b>"] * len(TOKENS)] * 3, TOKENS,
                                                ["embeddings", "after layer 0", "after layer 1"], "Paris",
                                                title="model: probability of the first piece by layer"),
    "attribution": lambda: wf.attribution_bars(["embeddings", "L0 H0", "MLP 0", "<i>MLP 1</i>"], [0.5, -1.0, 3.0, -2.0],
                                               0.5, "Paris", title="model: what writes Paris"),
    "causal trace": lambda: wf.causal_trace_panels(
        {kind: np.linspace(-1, 1, 2 * len(TOKENS)).reshape(2, -1) for kind in ("residual", "attention", "MLP")},
        np.arange(2 * len(TOKENS)).reshape(2, -1) % 3 == 0, TOKENS, bold=[6, 7], title="model: restoring one state"),
    "salience": lambda: wf.salience_chips(TOKENS, {"gradient x input": np.linspace(-1, 2, len(TOKENS)),
                                                   "integrated gradients": np.zeros(len(TOKENS))}, title="salience"),
    "candidates": lambda: pv.candidate_bars(["Paris", "London", "<b>Rome</b>"], [0.5, 0.3, 0.2], "London", "Paris",
                                            title="model: top 3 of 144 candidates"),
    "attention map": lambda: av.attention_heatmap(np.tril(np.full((len(TOKENS), len(TOKENS)), 0.1)), TOKENS,
                                                  allowed=np.tril(np.ones((len(TOKENS), len(TOKENS)), bool)),
                                                  title="L0 H1: where each query looks"),
    "attention difference": lambda: av.attention_heatmap(np.eye(3) - 0.5, TOKENS[:3], diverging=True, zmax=0.5,
                                                         colorbar=False, query_labels=False,
                                                         hovers=["<a>", "b", "c"]),
    "answer attention": lambda: pv.answer_attention_heatmap(np.full((2, 3 * len(TOKENS)), 0.02), TOKENS * 3,
                                                            ["layer 0", "layer 1"], title="where the MASK looks"),
}


@pytest.mark.parametrize("name", list(FIGURES))
def test_an_unchecked_figure_is_what_plotly_checks_would_make(name):
    fig = FIGURES[name]()
    assert sent(fig) == sent(checked_twin(fig))


def test_the_comparison_catches_what_plotly_would_have_rewritten():
    for layout in (dict(title="a string title"), dict(xaxis=dict(title="axis")), dict(height=300, widht=20)):
        fig = unchecked_figure([dict(type="heatmap", z=[[1.0]], colorscale=colorscale("Blues"))], layout)
        with pytest.raises(ValueError) if "widht" in layout else pytest.raises(AssertionError):
            assert sent(fig) == sent(checked_twin(fig))
    named = unchecked_figure([dict(type="heatmap", z=[[1.0]], colorscale="Blues")], {})
    assert sent(named) != sent(checked_twin(named))  # a name becomes the list it stands for
