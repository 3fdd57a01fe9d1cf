"""The teaching pages: attention playground (by hand, one vs two heads) and model anatomy."""

from __future__ import annotations

import plotly.graph_objects as go

from core.figures.common import (
    ALLOWED_COLOR,
    LEGEND_RIGHT,
    MASKED_COLOR,
    SEQUENTIAL,
    TOKEN_FONT,
    base_layout,
    category_axis,
    finished,
    index_axis,
    token_categories,
)
from core.text import visible_token

HEAD_SETUP_COLORS = {"one head": "#EF553B", "two heads": "#636EFA"}


@finished
def attention_weights_heatmap(weights, scores, key_labels: list[str], query_labels: list[str],
                              title: str | None = None, height: int | None = None) -> go.Figure:
    """Softmax weights (m, n) as a heatmap with each weight written in its cell; hover adds the score."""
    import numpy as np

    weights, scores = np.asarray(weights, dtype=float), np.asarray(scores, dtype=float)
    fig = go.Figure(go.Heatmap(
        z=weights, x=list(range(weights.shape[1])), y=list(range(weights.shape[0])),
        # every cell has its number (two decimals: at 1024 px a half column holds three cells of 13 px
        # "0.245" only by overlapping them), so no colour bar takes the cells' room; the hover is exact
        zmin=0.0, zmax=1.0, colorscale=SEQUENTIAL, showscale=False,
        text=np.vectorize(lambda w: f"{w:.2f}")(weights), texttemplate="%{text}",
        customdata=scores, hovertemplate="query %{y}, key %{x}<br>score %{customdata:.4g}"
                                         "<br>weight %{z:.4f}<extra></extra>",
    ))
    fig.update_traces(textfont=dict(size=13))
    fig.update_xaxes(title=None, side="top", tickfont=TOKEN_FONT, **index_axis(key_labels))  # keys named on top
    fig.update_yaxes(title="query", autorange="reversed", tickfont=TOKEN_FONT, **index_axis(query_labels))
    base_layout(fig, title, height or 150 + 45 * weights.shape[0])
    fig.update_layout(margin=dict(t=fig.layout.margin.t + 30))  # the key labels sit between title and cells
    return fig


@finished
def head_comparison_histograms(panels, title: str | None = None, height: int = 340) -> go.Figure:
    """One panel per quantity, the one-head and two-head distributions overlaid on the same bins.

    `panels`: (panel title, one-head values, two-head values), e.g. `NoisyKeysResult.panels()`.
    """
    import html

    import numpy as np
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=1, cols=len(panels), subplot_titles=[html.escape(p[0]) for p in panels])
    for col, (_, single, two) in enumerate(panels, start=1):
        values = np.concatenate([np.asarray(single, float), np.asarray(two, float)])
        low, high = float(values.min()), float(values.max())
        size = (high - low) / 40 if high > low else 1e-3  # identical samples: one visible bar
        for setup, data in (("one head", single), ("two heads", two)):
            fig.add_trace(go.Histogram(
                x=np.asarray(data, float), name=setup, legendgroup=setup, showlegend=col == 1,
                marker_color=HEAD_SETUP_COLORS[setup], opacity=0.6,
                xbins=dict(start=low - size / 2, end=high + size / 2, size=size),
            ), row=1, col=col)
        fig.update_yaxes(title="samples" if col == 1 else None, row=1, col=col)
    fig.update_layout(barmode="overlay", legend=LEGEND_RIGHT)
    base_layout(fig, title, height)
    fig.update_layout(margin=dict(t=80))
    return fig



@finished
def mask_heatmap(allowed, tokens: list[str], title: str | None = None, height: int | None = None
                 ) -> go.Figure:
    """A (T, T) boolean mask: rows are queries, columns keys; blue = may attend, grey = masked (a legend
    says so). Tokens label both axes as distinct categories (the browser thins them when they would
    overlap); the plot fills its box, so no gap opens between the key labels and the cells."""
    import html

    import numpy as np

    allowed = np.asarray(allowed, dtype=bool)
    labels = [html.escape(visible_token(t)) for t in tokens]
    categories = token_categories(labels)
    hover = [[f"query {i} '{labels[i]}' → key {j} '{labels[j]}': {'allowed' if allowed[i, j] else 'masked'}"
              for j in range(allowed.shape[1])] for i in range(allowed.shape[0])]
    fig = go.Figure(go.Heatmap(
        z=allowed.astype(int), x=categories, y=categories, zmin=0, zmax=1, showscale=False, xgap=1, ygap=1,
        colorscale=[[0.0, MASKED_COLOR], [0.5, MASKED_COLOR], [0.5, ALLOWED_COLOR], [1.0, ALLOWED_COLOR]],
        text=hover, hovertemplate="%{text}<extra></extra>", showlegend=False,
        meta={"positions": list(range(allowed.shape[1]))},
    ))
    for name, color in (("may attend", ALLOWED_COLOR), ("masked", MASKED_COLOR)):  # legend entries only
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=name, hoverinfo="skip",
                                 marker=dict(symbol="square", size=14, color=color,
                                             line=dict(color="#7F7F7F", width=1))))
    # Not forced square: in a narrow column a square leaves a band of white above and below the cells.
    fig.update_xaxes(category_axis(title="key (attended to)", side="top"))
    fig.update_yaxes(category_axis(title="query (attending)", autorange="reversed"))
    base_layout(fig, title, height or min(560, 170 + 15 * allowed.shape[0]))
    fig.update_layout(legend=dict(orientation="h", yanchor="top", y=-0.02, x=0), margin=dict(t=90 if title else 60))
    return fig


@finished
def parameter_share_bars(role_totals: dict[str, int], title: str | None = None,
                         height: int | None = None) -> go.Figure:
    """Parameters per part of the model (embeddings, attention, ...), with counts and shares."""
    total = sum(role_totals.values()) or 1
    roles = list(role_totals)
    fig = go.Figure(go.Bar(
        x=[role_totals[r] for r in roles], y=roles, orientation="h", marker_color=ALLOWED_COLOR,
        text=[f"{role_totals[r]:,} ({100 * role_totals[r] / total:.1f}%)" for r in roles],
        textposition="auto", hovertemplate="%{y}: %{x:,} parameters<extra></extra>",
    ))
    fig.update_xaxes(title="parameters")
    fig.update_yaxes(autorange="reversed")
    return base_layout(fig, title, height or 80 + 36 * len(roles))
