"""Across training: a birthplace model's candidate places at each kept step (core.lens.training_steps)."""

from __future__ import annotations

import html

import plotly.graph_objects as go

from core.figures.common import LEGEND_RIGHT, base_layout, finished

TRUTH_COLOR = "#1CA71C"  # as the probe's candidate bars
OTHER_COLORS = ("#EF553B", "#636EFA", "#AB63FA", "#FFA15A", "#19D3F3", "#FF6692", "#7F7F7F")  # no green


@finished
def candidate_steps_figure(probabilities, truth: str | None = None, title: str | None = None) -> go.Figure:
    """One line per followed place: its probability (normalised over the candidates) at each kept step.
    `probabilities`: a DataFrame indexed by step, one column per place. Steps are log-spaced, so the x
    axis shows them evenly, one category each; the true place is green and thicker."""
    steps = [f"{int(s):,}" for s in probabilities.index]
    others = [p for p in probabilities.columns if p != truth]
    colors = {p: OTHER_COLORS[i % len(OTHER_COLORS)] for i, p in enumerate(others)}
    fig = go.Figure()
    for place in probabilities.columns:
        is_truth = place == truth
        label = html.escape(place) + (" (true)" if is_truth else "")
        fig.add_trace(go.Scatter(
            x=steps, y=[float(v) for v in probabilities[place]], mode="lines+markers", name=label,
            line=dict(color=TRUTH_COLOR if is_truth else colors[place], width=4 if is_truth else 2),
            hovertemplate=f"{label}<br>step %{{x}}: %{{y:.1%}}<extra></extra>", meta={"place": place}))
    fig.update_xaxes(title="training step (kept snapshots)", type="category")
    fig.update_yaxes(title="probability", range=[0, 1.02], tickformat=".0%")
    base_layout(fig, html.escape(title) if title else None, 320)
    fig.update_layout(legend=LEGEND_RIGHT, hovermode="closest")
    return fig
