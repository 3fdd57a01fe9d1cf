"""What a model represents, layer by layer: a probe's accuracy by layer beside its controls and baselines, and a
layer's states drawn in 2-D. Data in, plotly Figure out; user text (labels, texts) is escaped."""

from __future__ import annotations

import html
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from core.figures.common import LEGEND_RIGHT, base_layout, finished, run_colors

PROBE_COLOR, CONTROL_COLOR, LENS_COLOR = "#2E6DB4", "#9AA0A6", "#E8A33D"
MAJORITY_COLOR, EMBEDDING_COLOR = "#5F6368", "#B45FB4"
RIGHT_COLOR, WRONG_COLOR = "#2E6DB4", "#EF553B"
MAX_HOVER_TEXT = 80


@finished
def probe_accuracy(layers: Sequence[str], accuracy: Sequence[float], low: Sequence[float], high: Sequence[float],
                   control: Sequence[float], control_low: Sequence[float], control_high: Sequence[float],
                   majority: float, lens: Sequence[float] | None = None, control_name: str = "control",
                   title: str | None = None) -> go.Figure:
    """Accuracy by layer (0 = the embedding) with its 95% interval over folds as error bars, the control the same
    way, the majority baseline and the embedding-only baseline as flat lines, and the logit lens where given."""
    layers = [html.escape(str(x), quote=False) for x in layers]
    accuracy, control = np.asarray(accuracy, dtype=float), np.asarray(control, dtype=float)

    def bars(mean, lo, hi) -> dict:
        return dict(type="data", symmetric=False, array=np.asarray(hi, dtype=float) - mean,
                    arrayminus=mean - np.asarray(lo, dtype=float), thickness=1.5, width=4)

    fig = go.Figure()
    fig.add_trace(go.Scatter(x=layers, y=accuracy, name="probe", mode="lines+markers",
                             line=dict(color=PROBE_COLOR, width=3), error_y=bars(accuracy, low, high),
                             hovertemplate="%{x}<br>probe %{y:.1%}<extra></extra>"))
    fig.add_trace(go.Scatter(x=layers, y=control, name=html.escape(control_name, quote=False), mode="lines+markers",
                             line=dict(color=CONTROL_COLOR, width=2, dash="dot"),
                             error_y=bars(control, control_low, control_high),
                             hovertemplate="%{x}<br>control %{y:.1%}<extra></extra>"))
    fig.add_trace(go.Scatter(x=layers, y=[majority] * len(layers), name="majority", mode="lines",
                             line=dict(color=MAJORITY_COLOR, width=1.5, dash="dash"),
                             hovertemplate="majority %{y:.1%}<extra></extra>"))
    if len(accuracy):
        fig.add_trace(go.Scatter(x=layers, y=[float(accuracy[0])] * len(layers), name="embedding only",
                                 mode="lines", line=dict(color=EMBEDDING_COLOR, width=1.5, dash="dashdot"),
                                 hovertemplate="embedding only %{y:.1%}<extra></extra>"))
    if lens is not None:
        fig.add_trace(go.Scatter(x=layers, y=np.asarray(lens, dtype=float), name="logit lens", mode="lines+markers",
                                 line=dict(color=LENS_COLOR, width=2),
                                 hovertemplate="%{x}<br>logit lens %{y:.1%}<extra></extra>"))
    fig.update_xaxes(type="category", title="layer (the residual stream after it)",
                     tickangle=0 if len(layers) <= 8 else -45)  # level where they fit: no room kept for turned ones
    fig.update_yaxes(range=[0, 1.02], tickformat=".0%", title="accuracy")
    fig.update_layout(legend=LEGEND_RIGHT, hovermode="x unified")
    return base_layout(fig, html.escape(title, quote=False) if title else None, 380)


@finished
def embedding_map(xy, labels: Sequence[str], texts: Sequence[str], correct: Sequence[bool] | None = None,
                  axis_titles: tuple[str, str] = ("PC 1", "PC 2"), title: str | None = None) -> go.Figure:
    """One point per example at `xy` (N, 2): coloured by label (one trace per label, in sorted order), or with
    `correct` by whether the probe got it right (two traces: right, wrong). Every point's customdata is its example
    index, so a click (a selection event) names the example; the hover shows its label and text."""
    xy = np.asarray(xy, dtype=float).reshape(-1, 2)
    labels = [str(x) for x in labels]
    shown = [html.escape(t if len(t) <= MAX_HOVER_TEXT else t[:MAX_HOVER_TEXT - 1] + "…", quote=False) for t in texts]
    if correct is not None:
        correct = np.asarray(correct, dtype=bool)
        groups = [("right", np.flatnonzero(correct), RIGHT_COLOR), ("wrong", np.flatnonzero(~correct), WRONG_COLOR)]
    else:
        names = sorted(set(labels))
        colors = run_colors(names)
        index = np.asarray(labels)
        groups = [(name, np.flatnonzero(index == name), colors[name]) for name in names]
    fig = go.Figure()
    for name, members, color in groups:
        fig.add_trace(go.Scatter(
            x=xy[members, 0], y=xy[members, 1], mode="markers", name=html.escape(name, quote=False),
            marker=dict(color=color, size=7, opacity=0.75, line=dict(width=0)),
            customdata=[[int(i), html.escape(labels[i], quote=False), shown[i]] for i in members],
            hovertemplate="%{customdata[1]}<br>%{customdata[2]}<extra></extra>"))
    fig.update_xaxes(title=axis_titles[0], zeroline=False)
    fig.update_yaxes(title=axis_titles[1], zeroline=False)
    fig.update_layout(legend=LEGEND_RIGHT, clickmode="event+select", dragmode="pan")
    return base_layout(fig, html.escape(title, quote=False) if title else None, 480)
