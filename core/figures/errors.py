"""Error analysis: the confusion matrix (a click on a cell is a selection event), metrics per slice with their
95% intervals, GLTR's coloured pieces (a click on a piece is a selection event), and two language models by
position in the block. Data in, plotly Figure out; user text is escaped."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go

from core.figures.common import LEGEND_RIGHT, TOKEN_FONT, base_layout, finished, run_colors
from core.text import visible_token

# GLTR's colours: green (top 1), yellow (top 10), red (top 100), purple (beyond)
BUCKET_COLORS = {"top 1": "#B5E3B5", "top 10": "#FFE58A", "top 100": "#F7A8A0", "beyond": "#D2B4F0"}
RIGHT_COLOR, WRONG_COLOR = "#2E6DB4", "#EF553B"


@finished
def confusion_matrix(counts, labels: Sequence[str], title: str | None = None) -> go.Figure:
    """counts (gold rows, predicted columns): a heatmap whose cells fill the grid at any width (the diagonal blue,
    mistakes red, darker with more examples: z is +sqrt(count) on the diagonal, -sqrt(count) off it), under one
    square marker per cell in a scatter, nearly transparent, that carries the count as text and makes a click
    select the cell (its customdata is [gold, predicted, count]; point i is gold i // n, predicted i % n). Gold
    labels down, predicted across; empty cells have no text."""
    counts = np.asarray(counts, dtype=int)
    n = len(labels)
    shown = [html.escape(str(label)) for label in labels]
    # square roots: a single mistake stays visible beside a diagonal cell of 20
    signed = np.sqrt(counts) * np.where(np.eye(n, dtype=bool), 1, -1) if n else counts
    top = np.sqrt(max(int(counts.max()) if counts.size else 1, 1))
    gold, predicted = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")  # (n, n)
    gold, predicted, value = gold.ravel(), predicted.ravel(), counts.ravel()
    fig = go.Figure(go.Heatmap(z=signed, x=shown, y=shown, zmin=-top, zmax=top, xgap=2, ygap=2, showscale=False,
                               colorscale=[[0.0, WRONG_COLOR], [0.5, "#FFFFFF"], [1.0, RIGHT_COLOR]],
                               hoverinfo="skip"))
    fig.add_trace(go.Scatter(
        x=[shown[p] for p in predicted], y=[shown[g] for g in gold], mode="markers+text",
        marker=dict(symbol="square", size=max(14, min(40, int(520 / max(n, 1)))), color="#FFF", opacity=0.01),
        text=[str(v) if v else "" for v in value], textfont=dict(size=12),
        customdata=[[labels[g], labels[p], int(v)] for g, p, v in zip(gold, predicted, value)],
        hovertemplate="gold %{y}<br>predicted %{x}<br>%{customdata[2]} examples<extra></extra>"))
    fig.update_xaxes(title="predicted", type="category", categoryorder="array", categoryarray=shown,
                     tickangle=-45, showgrid=False)
    fig.update_yaxes(title="gold", type="category", categoryorder="array", categoryarray=shown,
                     autorange="reversed", showgrid=False)
    return base_layout(fig, html.escape(title) if title else None, 200 + max(n, 3) * 30)


@finished
def slice_bars(table, title: str | None = None) -> go.Figure:
    """Accuracy per slice (`core.lens.errors.slices` rows) as horizontal bars with the Wilson 95% interval as error
    bars; the bar's text is right/count. Empty slices have no bar."""
    names = [html.escape(str(s)) for s in table["slice"]]
    accuracy = np.asarray(table["accuracy"], dtype=float)
    low, high = np.asarray(table["low"], dtype=float), np.asarray(table["high"], dtype=float)
    fig = go.Figure(go.Bar(
        y=names, x=accuracy, orientation="h", marker_color=RIGHT_COLOR,
        error_x=dict(type="data", symmetric=False, array=np.nan_to_num(high - accuracy),
                     arrayminus=np.nan_to_num(accuracy - low), color="#444", thickness=1.2),
        text=[f"{r}/{c}" for r, c in zip(table["right"], table["count"])], textposition="inside",
        insidetextanchor="start", customdata=np.stack([low, high], axis=1) if len(table) else None,
        hovertemplate="%{y}<br>accuracy %{x:.1%} (95%: %{customdata[0]:.1%}–%{customdata[1]:.1%})<br>"
                      "%{text}<extra></extra>"))
    fig.update_xaxes(title="accuracy (bars: 95% Wilson interval)", range=[0, 1.02], tickformat=".0%")
    fig.update_yaxes(autorange="reversed", type="category")
    return base_layout(fig, html.escape(title) if title else None, 120 + 30 * max(len(names), 2))


@finished
def gltr_pieces(pieces: Sequence[str], buckets: Sequence[str], losses: Sequence[float], per_row: int = 16,
                selected: int | None = None, title: str | None = None) -> go.Figure:
    """GLTR: one chip per piece, in reading order, `per_row` a row, coloured by the bucket of the true piece's rank
    (top 1 green, top 10 yellow, top 100 red, beyond purple); hover: loss. A scatter of square markers, so a click
    selects a piece (customdata[0] is its index in `pieces`). `selected`: outlined."""
    n = len(pieces)
    index = np.arange(n)
    x, y = index % per_row, index // per_row
    fig = go.Figure()
    for bucket, color in BUCKET_COLORS.items():
        members = [i for i in range(n) if buckets[i] == bucket]
        fig.add_trace(go.Scatter(
            x=x[members], y=y[members], mode="markers+text", name=bucket,
            marker=dict(symbol="square", size=30, color=color,
                        line=dict(width=[3 if i == selected else 0 for i in members], color="#000")),
            text=[html.escape(visible_token(pieces[i]) or "∅")[:8] for i in members],
            textfont=dict(size=TOKEN_FONT["size"] - 1),
            customdata=[[i, float(losses[i])] for i in members],
            hovertemplate="%{text}<br>loss %{customdata[1]:.3f}<extra>" + bucket + "</extra>"))
    fig.update_xaxes(visible=False, range=[-0.6, per_row - 0.4])
    fig.update_yaxes(visible=False, autorange="reversed")
    fig.update_layout(legend=dict(orientation="h", yanchor="bottom", y=1.0, xanchor="left", x=0))
    rows = int(y.max()) + 1 if n else 1
    return base_layout(fig, html.escape(title) if title else None, 110 + 36 * rows)


@finished
def loss_by_position(table, models: Sequence[str], title: str | None = None) -> go.Figure:
    """Mean loss per position in the block, one line per model (`LanguageModelComparison.by_position`)."""
    colors = dict(zip(models, (RIGHT_COLOR, WRONG_COLOR))) if len(models) <= 2 else run_colors(models)
    fig = go.Figure()
    for model in models:
        fig.add_trace(go.Scatter(x=table["block position"], y=table[model], mode="lines", name=html.escape(model),
                                 line=dict(color=colors[model]), meta={"model": model},
                                 hovertemplate="position %{x}<br>mean loss %{y:.3f}<extra>"
                                               + html.escape(model) + "</extra>"))
    fig.update_xaxes(title="position in the block (pieces of context - 1)")
    fig.update_yaxes(title="mean loss (nats)")
    fig.update_layout(legend=LEGEND_RIGHT)
    return base_layout(fig, html.escape(title) if title else None, 360)


@finished
def document_bars(names: Sequence[str], values: Mapping[str, Sequence[float]], measure: str = "perplexity",
                  title: str | None = None) -> go.Figure:
    """One bar group per document (a PA2 speaker), one bar per model."""
    colors = run_colors(list(values))
    fig = go.Figure()
    for model, numbers in values.items():
        fig.add_trace(go.Bar(x=[html.escape(n) for n in names], y=list(numbers), name=html.escape(model),
                             marker_color=colors[model], meta={"model": model},
                             texttemplate="%{y:.4g}", textposition="outside"))
    fig.update_yaxes(title=measure)
    fig.update_layout(barmode="group", legend=LEGEND_RIGHT)
    return base_layout(fig, html.escape(title) if title else None, 340)


@finished
def class_probability_bars(labels: Sequence[str], series: Mapping[str, Sequence[float]], gold: str | None = None,
                           title: str | None = None) -> go.Figure:
    """The probability of every label (rows, in the checkpoint's order), one bar per series (the example as
    read, the edited text); the gold label's row is marked 'gold'. Bar text: the percentage."""
    names = [html.escape(str(label)) + (" (gold)" if label == gold else "") for label in labels]
    colors = run_colors(list(series))
    fig = go.Figure()
    for name, values in series.items():
        values = [float(v) for v in values]
        fig.add_trace(go.Bar(x=values, y=names, orientation="h", name=html.escape(name), marker_color=colors[name],
                             meta={"series": name}, text=[f"{100 * v:.1f}%" for v in values],
                             # a long bar's label inside it: outside, at 1024 px its "%" ran past the plot's edge
                             textposition=["inside" if v > 0.6 else "outside" for v in values],
                             insidetextanchor="end", cliponaxis=False,
                             hovertemplate="%{y}: %{x:.2%}<extra>" + html.escape(name) + "</extra>"))
    fig.update_yaxes(autorange="reversed", type="category")
    fig.update_xaxes(title="probability", range=[0, 1.2], tickvals=[0, 0.5, 1], tickformat=".0%")
    fig.update_layout(barmode="group", legend=dict(orientation="h", yanchor="bottom", y=1.0, xanchor="left", x=0))
    return base_layout(fig, html.escape(title) if title else None, 110 + (14 + 12 * len(series)) * len(labels))
