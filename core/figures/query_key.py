"""Why this weight: the query-key view's figures (data from core.lens.query_key in, plotly Figure out).

- `vectors_figure`: the query vector q_i and every key k_j of one head, dimensions x tokens, one colour scale;
- `products_figure`: the weight each key gets (bars, top) over q_i[d] * k_j[d] per dimension (heatmap),
  the chosen key framed in both;
- `top_dimensions_figure`: the dimensions that move the chosen key's dot product most, sorted.
Signed values use the diverging scale centred on 0 (red negative, blue positive) and the bars the same
two colours, so a colour means the same sign in every figure of the view.
"""

from __future__ import annotations

import html

import numpy as np
import plotly.graph_objects as go

from core.figures.attention import ATTENTION_MASKED_COLOR, PAGE_PX, TITLE_PX, attention_layout
from core.figures.common import DIVERGING, TOKEN_FONT, category_axis, finished, token_categories

TITLE_CHARS = PAGE_PX // TITLE_PX  # a full-width title line at 1024x768

POSITIVE, NEGATIVE = "#2166AC", "#B2182B"  # the ends of RdBu: the heatmaps' colours for the same signs
SEQUENTIAL_BAR = "#4A90C8"  # a mid blue of the Blues scale the head view draws weights in
FRAME = dict(color="crimson", width=2)


LABEL_PX = 18  # a 13 px tick label's box is 17 px tall: rows closer than this are labelled every k-th


def dimension_px(head_size: int) -> int:
    """Pixels per dimension row: every row labelled up to 24 dimensions, then 12 px (32) down to 7 (64+)."""
    return LABEL_PX if head_size <= 24 else int(max(7, 400 // head_size))


def dimension_step(head_size: int) -> int:
    """Label every k-th dimension (1, 2, 4, 8...) so labels stay LABEL_PX apart."""
    step = 1
    while step * dimension_px(head_size) < LABEL_PX:
        step *= 2
    return step


def _labels(labels: list[str]) -> list[str]:
    return token_categories([html.escape(label, quote=False) for label in labels])  # plotly writes &quot; out


def _dimension_axis(head_size: int, **extra) -> dict:
    return dict(title=dict(text="dimension"), autorange="reversed", tickfont=TOKEN_FONT, showgrid=False,
                zeroline=False, dtick=dimension_step(head_size), automargin=True, **extra)


def _symmetric(*arrays: np.ndarray) -> float:
    top = max((float(np.abs(a).max()) for a in arrays if a.size), default=1.0)
    return max(top, 1e-9)


@finished
def vectors_figure(q, keys, query_label: str, key_labels: list[str], title: str | None = None) -> go.Figure:
    """q (hs,) as one column, keys (K, hs) as K columns (the window's keys), dimensions as rows.

    data[0] is q (z shape (hs, 1)), data[1] the keys (z shape (hs, K)); both on one coloraxis centred on 0.
    """
    q, keys = np.asarray(q, dtype=float), np.asarray(keys, dtype=float)
    hs = q.shape[0]
    top = _symmetric(q, keys)
    dims = list(range(hs))
    categories = _labels(key_labels)
    traces = [
        go.Heatmap(z=q[:, None], x=[html.escape(query_label, quote=False)], y=dims, coloraxis="coloraxis",
                   hovertemplate="query %{x}<br>dimension %{y}<br>q %{z:.4g}<extra></extra>"),
        go.Heatmap(z=keys.T, x=categories, y=dims, coloraxis="coloraxis", xaxis="x2", yaxis="y",
                   hovertemplate="key %{x}<br>dimension %{y}<br>k %{z:.4g}<extra></extra>"),
    ]
    layout = attention_layout(
        title, 190 + dimension_px(hs) * hs, TITLE_CHARS, plot_bgcolor="white",
        xaxis=category_axis(domain=[0.0, 0.05], title=dict(text="q")),
        xaxis2=category_axis(domain=[0.1, 1.0], anchor="y", title=dict(text="k (every key)")),
        yaxis=_dimension_axis(hs),
        coloraxis=dict(colorscale=DIVERGING, cmid=0.0, cmin=-top, cmax=top,
                       colorbar=dict(thickness=12, xpad=10, title=dict(text="value"), tickfont=TOKEN_FONT)))
    return go.Figure(data=traces, layout=layout)


@finished
def products_figure(products, weights, q, keys, key_labels: list[str], chosen: int | None = None,
                    allowed=None, title: str | None = None) -> go.Figure:
    """Bars: the weight of each key (the softmax's result). Heatmap: products (K, hs) transposed,
    q_i[d] * k_j[d] per dimension (rows) and key (columns). Keys the mask forbids (`allowed` False) are gaps
    in both, over grey, as in the head view. `chosen` is the index of the framed key among the K shown.
    data[0] the bars, data[1] the heatmap (z (hs, K))."""
    products, weights = np.asarray(products, dtype=float), np.asarray(weights, dtype=float)
    q, keys = np.asarray(q, dtype=float), np.asarray(keys, dtype=float)
    K, hs = products.shape
    categories = _labels(key_labels)
    allowed = np.ones(K, dtype=bool) if allowed is None else np.asarray(allowed, dtype=bool)
    shown = np.where(allowed, weights, np.nan)
    products = np.where(allowed[:, None], products, np.nan)
    top = _symmetric(products[allowed])
    parts = np.stack([np.broadcast_to(q, keys.shape), keys], axis=-1).transpose(1, 0, 2)  # (hs, K, 2)
    traces = [
        go.Bar(x=categories, y=shown, yaxis="y2", marker_color=SEQUENTIAL_BAR, name="weight",
               hovertemplate="key %{x}<br>weight %{y:.6f}<extra></extra>", showlegend=False),
        go.Heatmap(z=products.T, x=categories, y=list(range(hs)), customdata=parts, colorscale=DIVERGING,
                   zmid=0.0, zmin=-top, zmax=top, hoverongaps=False,
                   colorbar=dict(thickness=12, xpad=10, len=0.7, y=0.35, title=dict(text="q·k part"),
                                 tickfont=TOKEN_FONT),
                   hovertemplate="key %{x}<br>dimension %{y}<br>q %{customdata[0]:.4g} × k %{customdata[1]:.4g}"
                                 " = %{z:.4g}<extra></extra>"),
    ]
    body = dimension_px(hs) * hs
    height = 210 + body + 110
    split = body / (body + 110)
    shapes = [dict(type="rect", xref="x domain", yref="y domain", x0=0, x1=1, y0=0, y1=1, layer="below",
                   fillcolor=ATTENTION_MASKED_COLOR, line=dict(width=0))]  # what a masked (NaN) cell shows
    if chosen is not None and 0 <= chosen < K:
        for yref in ("y", "y2"):
            shapes.append(dict(type="rect", xref="x", yref=f"{yref} domain", x0=chosen - 0.5, x1=chosen + 0.5,
                               y0=0, y1=1, line=FRAME))
    layout = attention_layout(
        title, height, TITLE_CHARS, plot_bgcolor="white", shapes=shapes, bargap=0.15,
        xaxis=category_axis(title=dict(text="key"), anchor="y"),
        yaxis=_dimension_axis(hs, domain=[0.0, split - 0.04]),
        yaxis2=dict(domain=[split, 1.0], anchor="x", title=dict(text="weight"), rangemode="tozero",
                    tickfont=TOKEN_FONT, automargin=True, showgrid=True, gridcolor="#e6eaf1"))
    return go.Figure(data=traces, layout=layout)


@finished
def top_dimensions_figure(dims, values, title: str | None = None) -> go.Figure:
    """Horizontal bars, largest |q_i[d] k_j[d]| at the top; blue adds to the dot product, red takes away.
    data[0].y are the labels 'dim d' in that order, data[0].x the products."""
    dims, values = np.asarray(dims, dtype=int), np.asarray(values, dtype=float)
    labels = [f"dim {int(d)}" for d in dims]
    colors = [POSITIVE if v >= 0 else NEGATIVE for v in values]
    text = [f"{v:+.3g}" for v in values]
    low, high = min(float(values.min(initial=0.0)), 0.0), max(float(values.max(initial=0.0)), 0.0)
    pad = 0.3 * max(high - low, 1e-9)  # room for the numbers written beside the bars
    trace = go.Bar(x=values, y=labels, orientation="h", marker_color=colors, text=text, textposition="outside",
                   textfont=TOKEN_FONT, cliponaxis=False, showlegend=False,
                   hovertemplate="%{y}<br>q·k part %{x:.4g}<extra></extra>")
    layout = attention_layout(
        title, 120 + 24 * len(labels), TITLE_CHARS, plot_bgcolor="white",
        xaxis=dict(title=dict(text="q_i[d] × k_j[d]"), range=[low - (pad if low < 0 else 0), high + pad], zeroline=True,
                   zerolinecolor="#808495", tickfont=TOKEN_FONT, automargin=True),
        yaxis=dict(autorange="reversed", tickfont=TOKEN_FONT, automargin=True, type="category"))
    return go.Figure(data=[trace], layout=layout)
