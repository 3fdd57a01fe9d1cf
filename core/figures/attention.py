"""Attention maps: one head, every head (model view), one token."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

from core.figures.common import DIVERGING, LEGEND_BELOW, SEQUENTIAL, token_axis

# Token axes are positional (x = key position, y = query position) with the token text as ticktext,
# so repeated tokens never merge into one category. Masked cells are NaN drawn over a grey plot
# background: "not allowed to look" must never read as "looked with weight 0".
# Figures are built from one layout dict, without a named template: `update_layout` and template
# validation cost 5-10 ms each per figure, more than this page's whole rerun budget (bench/), and
# Streamlit's chart theme (plotly's default template under streamlit) styles the figure anyway.

ATTENTION_MASKED_COLOR = "rgb(200, 200, 200)"  # MASKED_COLOR made opaque: distinct from weight 0's white
HOVER_TOKENS_MAX = 64  # up to this many tokens the hover names both tokens; past it, positions only



def attention_height(n_tokens: int) -> int:
    return int(min(900, max(360, 160 + 11 * n_tokens)))  # ~11 px a row keeps labels legible


def attention_layout(title: str | None, height: int, **extra: Any) -> dict[str, Any]:
    """base_layout's settings as a dict (see the section comment for why not base_layout)."""
    import html

    layout = dict(title=dict(text=html.escape(title)) if title else None, height=height,
                  margin=dict(l=10, r=10, t=40 if title else 10, b=10), paper_bgcolor="white",
                  plot_bgcolor=ATTENTION_MASKED_COLOR)
    return {**layout, **extra}


def attention_heatmap(weights, tokens: list[str], allowed=None, positions=None, title: str | None = None,
                      diverging: bool = False, zmax: float | None = None,
                      height: int | None = None) -> go.Figure:
    """One (T, T) map: query tokens as rows, key tokens as columns.

    `tokens` are display labels for positions 0..; `positions` (default 0..T-1) says which positions
    the rows/columns are (after hiding tokens). fig.data[0].z is `weights` with NaN where `allowed`
    is False; the hover shows the exact weight. `zmax` fixes the colour scale (e.g. shared by two maps).
    """
    import html

    import numpy as np

    weights = np.asarray(weights)
    T = weights.shape[-1]
    positions = np.arange(T) if positions is None else np.asarray(positions)
    z = weights if allowed is None else np.where(allowed, weights, np.nan)
    labels = [html.escape(tokens[int(p)]) for p in positions]
    finite = np.abs(z[np.isfinite(z)])
    top = float(zmax) if zmax is not None else (float(finite.max()) if finite.size else 1.0)
    top = max(top, 1e-9)
    scale = dict(colorscale=DIVERGING, zmid=0.0, zmin=-top, zmax=top) if diverging else \
        dict(colorscale=SEQUENTIAL, zmin=0.0, zmax=top)
    value = "difference" if diverging else "weight"
    if T <= HOVER_TOKENS_MAX:
        text = [[f"query {int(q)} {labels[i]} → key {int(k)} {labels[j]}" for j, k in enumerate(positions)]
                for i, q in enumerate(positions)]
        hover = f"%{{text}}<br>{value} %{{z:.7g}}<extra></extra>"
    else:
        text = None
        hover = f"query %{{y}} → key %{{x}}<br>{value} %{{z:.7g}}<extra></extra>"
    axis = token_axis(labels, positions)
    layout = attention_layout(title, height or attention_height(T),
                              xaxis=dict(title=dict(text="key"), tickangle=-90, **axis),
                              yaxis=dict(title=dict(text="query"), autorange="reversed", **axis))
    trace = go.Heatmap(z=z, x=positions, y=positions, text=text, hovertemplate=hover, hoverongaps=False,
                       colorbar=dict(thickness=12), **scale)
    return go.Figure(data=[trace], layout=layout)


def attention_model_view(attention, allowed=None, focus: tuple[int, int] | None = None,
                         title: str | None = None) -> go.Figure:
    """Small multiples: every layer (rows) x head (columns), each scaled to its own maximum.

    The focused (layer, head) gets a frame. Trace order is layer-major: data[l * n_head + h]. The
    grid comes from make_subplots once, as a dict; per-axis `update_*` calls would cost ~0.2 s at 32 heads.
    """
    import numpy as np
    from plotly.subplots import make_subplots

    attention = np.asarray(attention)
    L, H, T, _ = attention.shape
    grid = make_subplots(rows=L, cols=H, horizontal_spacing=min(0.02, 0.2 / H),
                         vertical_spacing=min(0.06, 0.3 / L),
                         subplot_titles=[f"L{l} H{h}" for l in range(L) for h in range(H)]
                         ).layout.to_plotly_json()
    plain = dict(showticklabels=False, showgrid=False, zeroline=False)
    for key in grid:
        if key.startswith("xaxis"):
            grid[key].update(plain)
        elif key.startswith("yaxis"):
            grid[key].update(plain, autorange="reversed")
    for note in grid.get("annotations", []):
        note["font"] = dict(size=10)
    positions = np.arange(T)
    traces = []
    for l in range(L):
        for h in range(H):
            n = l * H + h + 1
            z = attention[l, h] if allowed is None else np.where(allowed, attention[l, h], np.nan)
            top = float(np.nanmax(z)) if np.isfinite(z).any() else 1.0
            traces.append(go.Heatmap(
                z=z, x=positions, y=positions, xaxis=f"x{n if n > 1 else ''}", yaxis=f"y{n if n > 1 else ''}",
                colorscale=SEQUENTIAL, zmin=0.0, zmax=max(top, 1e-9), showscale=False, hoverongaps=False,
                hovertemplate=f"layer {l} head {h}<br>query %{{y}} → key %{{x}}<br>weight %{{z:.7g}}"
                              "<extra></extra>"))
    shapes = []
    if focus is not None and 0 <= focus[0] < L and 0 <= focus[1] < H:
        n = focus[0] * H + focus[1] + 1
        suffix = "" if n == 1 else str(n)
        shapes.append(dict(type="rect", xref=f"x{suffix} domain", yref=f"y{suffix} domain", x0=-0.04,
                           x1=1.04, y0=-0.04, y1=1.04, line=dict(color="crimson", width=3)))
    cell = max(80, min(170, 1100 // H))
    layout = {**grid, **attention_layout(title, 60 + L * (cell + 20), shapes=shapes)}
    return go.Figure(data=traces, layout=layout)


def token_attention_figure(weights, tokens: list[str], query: int, allowed_row=None,
                           title: str | None = None) -> go.Figure:
    """Where one query token looks, per head: weights (n_head, T) -> one line per head over the keys.

    Masked keys are gaps (NaN), not zeros; a dotted line marks the query's own position.
    """
    import html

    import numpy as np

    weights = np.asarray(weights)
    H, T = weights.shape
    positions = np.arange(T)
    labels = [html.escape(t) for t in tokens[:T]]
    traces = [go.Scatter(x=positions, y=weights[h] if allowed_row is None else
                         np.where(allowed_row, weights[h], np.nan),
                         mode="lines+markers", name=f"head {h}", marker=dict(size=5), connectgaps=False,
                         hovertemplate=f"head {h}<br>key %{{x}}<br>weight %{{y:.7g}}<extra></extra>")
               for h in range(H)]
    layout = attention_layout(
        title, 420, plot_bgcolor="white", hovermode="closest",
        legend=LEGEND_BELOW,
        shapes=[dict(type="line", xref="x", yref="paper", x0=int(query), x1=int(query), y0=0, y1=1,
                     line=dict(color="crimson", dash="dot", width=1))],
        xaxis=dict(title=dict(text="key"), tickangle=-90, **token_axis(labels, positions)),
        yaxis=dict(title=dict(text="attention weight"), rangemode="tozero"))
    return go.Figure(data=traces, layout=layout)
