"""Sparse-autoencoder features: the density histogram, a feature's top contexts as LIT-style chips, the pieces it
raises and lowers, the next-piece distribution with and without steering.

Pure functions: plain numbers and labels in (core.lens.sae computes them), a plotly Figure out. Every piece label
comes from a corpus or a prompt a user typed: escaped, since plotly renders a subset of HTML in labels and hovers.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from core.figures.common import TOKEN_FONT, base_layout, finished, token_categories
from core.text import visible_token

POSITIVE_COLOR = "#1F77B4"
NEGATIVE_COLOR = "#D62728"
PLAIN_COLOR = "#7F7F7F"
STEERED_COLOR = "#FF7F0E"


def _piece(p: str) -> str:
    return html.escape(visible_token(p) or "∅")


@finished
def density_histogram(density: Sequence[float], title: str | None = None) -> go.Figure:
    """How many features fire on what share of pieces: a histogram of log10(density) over the live features
    (fig.data[0].x); the dead ones (density 0) are counted in the title, not drawn."""
    d = np.asarray(density, dtype=float)
    live = d[d > 0]
    dead = int((d <= 0).sum())
    fig = go.Figure(go.Histogram(x=np.log10(live), nbinsx=40, marker_color=POSITIVE_COLOR,
                                 hovertemplate="10^%{x} of pieces: %{y} features<extra></extra>"))
    said = title or f"Activation density of {len(d):,} features ({dead:,} never fire)"
    base_layout(fig, html.escape(said), 280)
    fig.update_layout(xaxis_title="log10 (share of pieces a feature fires on)", yaxis_title="features", bargap=0.05)
    return fig


Chips = Sequence[tuple[Sequence[str], Sequence[float], int]]  # (pieces, activations, index of the top piece)


@finished
def context_chips(contexts: Chips, title: str | None = None) -> go.Figure:
    """LIT's chips for a feature's top contexts: one row per context (its top piece's activation first), one chip
    per piece in reading order, coloured by the feature's activation there (scaled to the largest over all rows);
    the top piece's chip is bold. `contexts`: (pieces, activations, index of the top piece). fig.data[0].z is the
    scaled activations (rows, longest context), NaN where a row is shorter; customdata the raw ones."""
    width = max((len(p) for p, _, _ in contexts), default=1)
    raw = np.full((max(len(contexts), 1), width), np.nan)
    text = [[""] * width for _ in range(raw.shape[0])]
    for row, (pieces, acts, focus) in enumerate(contexts):
        raw[row, : len(acts)] = acts
        for j, piece in enumerate(pieces):
            text[row][j] = f"<b>{_piece(piece)}</b>" if j == focus else _piece(piece)
    top = np.nanmax(raw) if np.isfinite(raw).any() else 1.0
    scaled = raw / (top if top > 0 else 1.0)
    fig = go.Figure(go.Heatmap(
        z=scaled, customdata=raw, text=text, texttemplate="%{text}", textfont=dict(size=TOKEN_FONT["size"]),
        colorscale=[[0, "#FFFFFF"], [1, "#E6550D"]], zmin=0, zmax=1,
        xgap=2, ygap=4, hovertemplate="%{text}: %{customdata:.3f}<extra></extra>",
        colorbar=dict(title=dict(text="activation / top", side="right"), thickness=12)))
    base_layout(fig, html.escape(title) if title else None, 80 + 34 * raw.shape[0])
    fig.update_layout(xaxis=dict(visible=False), yaxis=dict(autorange="reversed", tickmode="array",
                                                            tickvals=list(range(raw.shape[0])),
                                                            ticktext=[f"#{i + 1}" for i in range(raw.shape[0])]))
    return fig


@finished
def logit_effect_bars(raised: Sequence[tuple[str, float]], lowered: Sequence[tuple[str, float]],
                      title: str | None = None) -> go.Figure:
    """The pieces a feature raises (blue, top) and lowers (red, bottom) through the output head, per unit of its
    activation: one horizontal bar each. fig.data[0] is the raised, fig.data[1] the lowered."""
    up = list(raised)[::-1]
    down = list(lowered)
    labels = token_categories([_piece(p) for p, _ in down] + [_piece(p) for p, _ in up])
    fig = go.Figure([
        go.Bar(y=labels[len(down):], x=[v for _, v in up], orientation="h", marker_color=POSITIVE_COLOR,
               name="raises", hovertemplate="%{y}: %{x:+.3f}<extra></extra>"),
        go.Bar(y=labels[: len(down)], x=[v for _, v in down], orientation="h", marker_color=NEGATIVE_COLOR,
               name="lowers", hovertemplate="%{y}: %{x:+.3f}<extra></extra>"),
    ])
    base_layout(fig, html.escape(title) if title else None, 120 + 18 * len(labels))
    fig.update_layout(xaxis_title="logit change per unit of activation (direct, final LayerNorm frozen)",
                      yaxis=dict(type="category", categoryorder="array", categoryarray=labels), showlegend=False)
    return fig


@finished
def steering_bars(pieces: Sequence[str], plain: Sequence[float], steered: Sequence[float],
                  title: str | None = None) -> go.Figure:
    """The next-piece probabilities after the prompt without (grey) and with steering (orange), side by side.
    fig.data[0] is the plain, fig.data[1] the steered distribution."""
    labels = token_categories([_piece(p) for p in pieces])
    fig = go.Figure([
        go.Bar(x=labels, y=list(plain), name="without", marker_color=PLAIN_COLOR,
               hovertemplate="%{x}: %{y:.3f}<extra>without</extra>"),
        go.Bar(x=labels, y=list(steered), name="steered", marker_color=STEERED_COLOR,
               hovertemplate="%{x}: %{y:.3f}<extra>steered</extra>"),
    ])
    base_layout(fig, html.escape(title) if title else None, 300)
    fig.update_layout(barmode="group", yaxis_title="probability of the next piece", yaxis_range=[0, 1],
                      xaxis=dict(type="category"))
    return fig
