"""Figures: pure functions, data in (tensors, arrays, frames), plotly Figure out.

No streamlit here, so every chart is unit-tested by inspecting `fig.data`. Sections below are
grouped by page; shared conventions come first.
"""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

IMAGE_FORMATS = ("png", "svg")
SEQUENTIAL = "Blues"  # attention weights and other [0, 1] quantities
DIVERGING = "RdBu"  # differences and signed values, centred on 0
MASKED_COLOR = "rgba(200, 200, 200, 0.35)"  # masked cells: visibly not the same as weight 0
# Horizontal legends go under the plot: above it they collide with the figure's title.
LEGEND_BELOW = dict(orientation="h", yanchor="top", y=-0.18, x=0)


def chart_config(filename: str, image_format: str = "png") -> dict[str, Any]:
    """Plotly config: the toolbar camera downloads this chart as PNG or SVG under a useful name."""
    if image_format not in IMAGE_FORMATS:
        image_format = "png"
    return {
        "displaylogo": False,
        "toImageButtonOptions": {"format": image_format, "filename": filename, "scale": 2},
    }


def base_layout(fig: go.Figure, title: str | None = None, height: int | None = None) -> go.Figure:
    fig.update_layout(title=title, height=height, margin=dict(l=10, r=10, t=40 if title else 10, b=10),
                      template="plotly_white")
    return fig


# --- Training curves ---

RUN_COLORS = (
    "#636EFA", "#EF553B", "#00CC96", "#AB63FA", "#FFA15A", "#19D3F3", "#FF6692", "#B6E880", "#FF97FF",
    "#FECB52", "#2E91E5", "#E15F99", "#1CA71C", "#FB0D0D", "#DA16FF", "#222A2A", "#B68100", "#750D86",
)  # plotly's qualitative palette, then Dark24's most distinct; repeats past 18 runs
SPLIT_DASH = {"train": "solid", "val": "dash"}  # any other split: dotted
RAW_OPACITY_UNDER_SMOOTHING = 0.25


def run_color(index: int) -> str:
    return RUN_COLORS[index % len(RUN_COLORS)]


def training_curves_figure(plot, title: str | None = None, height: int = 480) -> go.Figure:
    """Runs overlaid (one colour each), train solid / val dashed, the smoothed curve over a faint raw
    one, a star at each run's best validation value. `plot` is a `core.history.CurvePlot`.

    Every user string (run, split, metric names) is HTML-escaped: plotly renders tags in labels.
    `uirevision` is constant per (metric, x, scale), so a live refresh or a new smoothing keeps the
    user's zoom and legend clicks.
    """
    import html

    from core.history import METRIC_GOAL, X_AXES

    scatter = go.Scattergl if plot.webgl else go.Scatter
    colors = {run: run_color(i) for i, run in enumerate(plot.runs)}
    smoothed = plot.smoothing > 0
    fig = go.Figure()
    for curve in plot.curves:
        color = colors.get(curve.run, run_color(0))
        dash = SPLIT_DASH.get(curve.split, "dot")
        label = html.escape(f"{curve.run} · {curve.split}")
        group = html.escape(curve.run)
        mode = "lines+markers" if curve.x.size == 1 else "lines"
        hover = "<b>%{fullData.name}</b><br>%{x}<br>%{y:.4g}<extra></extra>"
        fig.add_trace(scatter(
            x=curve.x, y=curve.y, mode=mode, name=label + (" (raw)" if smoothed else ""),
            legendgroup=group, showlegend=not smoothed, connectgaps=False, hovertemplate=hover,
            line=dict(color=color, dash=dash, width=1 if smoothed else 2),
            opacity=RAW_OPACITY_UNDER_SMOOTHING if smoothed else 1.0,
            uid=f"{curve.run}|{curve.split}|raw",
            meta={"run": curve.run, "split": curve.split, "kind": "raw"}))
        if smoothed and curve.smooth_x is not None:
            fig.add_trace(scatter(
                x=curve.smooth_x, y=curve.smooth_y, mode=mode, name=label, legendgroup=group,
                connectgaps=False, hovertemplate=hover, line=dict(color=color, dash=dash, width=2),
                uid=f"{curve.run}|{curve.split}|smooth",
                meta={"run": curve.run, "split": curve.split, "kind": "smoothed"}))
    if plot.best:
        goal = "lowest" if METRIC_GOAL.get(plot.metric) == "min" else "highest"
        fig.add_trace(scatter(
            x=[b.x for b in plot.best], y=[b.y for b in plot.best], mode="markers",
            name=f"best val ({goal})", legendgroup="best",
            marker=dict(symbol="star", size=14, color=[colors.get(b.run, run_color(0)) for b in plot.best],
                        line=dict(color="black", width=1)),
            customdata=[[html.escape(b.run), b.epoch, b.step] for b in plot.best],
            hovertemplate="<b>%{customdata[0]}</b> best val %{y:.4g}<br>epoch %{customdata[1]}, "
                          "step %{customdata[2]}<extra></extra>",
            uid="best", meta={"kind": "best"}))
    metric = html.escape(plot.metric)
    base_layout(fig, title=html.escape(title) if title else None, height=height)
    fig.update_layout(
        uirevision=plot.uirevision, hovermode="closest",
        legend=LEGEND_BELOW,
        xaxis_title=X_AXES.get(plot.x, plot.x), yaxis_title=metric,
        yaxis_type="log" if plot.logy else "linear")
    return fig


# --- Attention playground ---

HEAD_SETUP_COLORS = {"one head": "#EF553B", "two heads": "#636EFA"}


def _index_axis(labels: list[str]) -> dict[str, Any]:
    """Numeric positions with text ticks: category axes would merge two equal labels into one."""
    import html

    return dict(tickmode="array", tickvals=list(range(len(labels))),
                ticktext=[html.escape(str(label)) for label in labels])


def attention_weights_heatmap(weights, scores, key_labels: list[str], query_labels: list[str],
                              title: str | None = None, height: int | None = None) -> go.Figure:
    """Softmax weights (m, n) as a heatmap with each weight written in its cell; hover adds the score."""
    import numpy as np

    weights, scores = np.asarray(weights, dtype=float), np.asarray(scores, dtype=float)
    fig = go.Figure(go.Heatmap(
        z=weights, x=list(range(weights.shape[1])), y=list(range(weights.shape[0])),
        zmin=0.0, zmax=1.0, colorscale=SEQUENTIAL, colorbar=dict(title="weight"),
        text=np.vectorize(lambda w: f"{w:.3f}")(weights), texttemplate="%{text}",
        customdata=scores, hovertemplate="query %{y}, key %{x}<br>score %{customdata:.4g}"
                                         "<br>weight %{z:.4f}<extra></extra>",
    ))
    fig.update_xaxes(title="key", side="top", **_index_axis(key_labels))
    fig.update_yaxes(title="query", autorange="reversed", **_index_axis(query_labels))
    return base_layout(fig, title, height or 120 + 45 * weights.shape[0])


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
    fig.update_layout(barmode="overlay", legend=LEGEND_BELOW)
    base_layout(fig, title, height)
    fig.update_layout(margin=dict(t=80))
    return fig


# --- Model anatomy ---

ALLOWED_COLOR = "#2E6DB4"


def _visible_token(token: str) -> str:
    """Whitespace would be an invisible tick label."""
    return {" ": "␣", "\n": "↵", "\t": "⇥", "": "∅"}.get(token, token)


def mask_heatmap(allowed, tokens: list[str], title: str | None = None, height: int | None = None
                 ) -> go.Figure:
    """A (T, T) boolean mask: rows are queries, columns keys; blue = may attend, grey = masked."""
    import html

    import numpy as np

    allowed = np.asarray(allowed, dtype=bool)
    labels = [_visible_token(t) for t in tokens]
    safe = [html.escape(label) for label in labels]
    hover = [[f"query {i} '{safe[i]}' → key {j} '{safe[j]}': {'allowed' if allowed[i, j] else 'masked'}"
              for j in range(allowed.shape[1])] for i in range(allowed.shape[0])]
    fig = go.Figure(go.Heatmap(
        z=allowed.astype(int), x=list(range(allowed.shape[1])), y=list(range(allowed.shape[0])),
        zmin=0, zmax=1, showscale=False, xgap=1, ygap=1,
        colorscale=[[0.0, MASKED_COLOR], [0.5, MASKED_COLOR], [0.5, ALLOWED_COLOR], [1.0, ALLOWED_COLOR]],
        text=hover, hovertemplate="%{text}<extra></extra>",
    ))
    fig.update_xaxes(title="key (attended to)", side="top", tickangle=0, **_index_axis(labels))
    fig.update_yaxes(title="query (attending)", autorange="reversed", scaleanchor="x",
                     **_index_axis(labels))
    return base_layout(fig, title, height or min(640, 160 + 22 * allowed.shape[0]))


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


# --- Attention ---
# Token axes are positional (x = key position, y = query position) with the token text as ticktext,
# so repeated tokens never merge into one category. Masked cells are NaN drawn over a grey plot
# background: "not allowed to look" must never read as "looked with weight 0".
# Figures are built from one layout dict, without a named template: `update_layout` and template
# validation cost 5-10 ms each per figure, more than this page's whole rerun budget (bench/), and
# Streamlit's chart theme (plotly's default template under streamlit) styles the figure anyway.

ATTENTION_MASKED_COLOR = "rgb(200, 200, 200)"  # MASKED_COLOR made opaque: distinct from weight 0's white
TICK_LABELS_MAX = 64  # more tokens than this: label every k-th one
HOVER_TOKENS_MAX = 64  # up to this many tokens the hover names both tokens; past it, positions only


def token_axis(labels: list[str], positions) -> dict[str, Any]:
    """Axis settings that label positions with (escaped) tokens, thinned and shrunk for long inputs."""
    import math

    n = len(positions)
    step = max(1, math.ceil(n / TICK_LABELS_MAX))
    font = int(min(12, max(8, 14 - n // 12)))
    shown = range(0, n, step)
    return dict(tickmode="array", tickvals=[int(positions[i]) for i in shown],
                ticktext=[labels[i] for i in shown], tickfont=dict(size=font), showgrid=False,
                zeroline=False)


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


# --- Positional encodings ---
# One colour per scheme on every chart of the page, so "ALiBi" is the same line everywhere.

SCHEME_COLORS = {"sinusoidal": "#636EFA", "learned": "#EF553B", "alibi": "#00CC96", "rope": "#AB63FA",
                 "none": "#7F7F7F"}
NOT_APPLICABLE_SYMBOL = "x"


def scheme_color(positional: str, index: int = 0) -> str:
    return SCHEME_COLORS.get(positional, RUN_COLORS[index % len(RUN_COLORS)])


def position_table_heatmap(table, title: str | None = None, height: int = 380,
                           x_title: str = "dimension", y_title: str = "position") -> go.Figure:
    """A (positions, dimensions) table as a heatmap centred on 0; fig.data[0].z is the table."""
    import html

    import numpy as np

    table = np.asarray(table, dtype=float)
    top = float(np.nanmax(np.abs(table))) if np.isfinite(table).any() else 1.0
    fig = go.Figure(go.Heatmap(
        z=table, x=np.arange(table.shape[1]), y=np.arange(table.shape[0]), colorscale=DIVERGING, zmid=0.0,
        zmin=-max(top, 1e-9), zmax=max(top, 1e-9), colorbar=dict(thickness=12),
        hovertemplate=f"{y_title} %{{y}}, {x_title} %{{x}}<br>value %{{z:.5g}}<extra></extra>"))
    base_layout(fig, html.escape(title) if title else None, height)
    fig.update_xaxes(title=x_title)
    fig.update_yaxes(title=y_title, autorange="reversed")
    return fig


def position_matrix_heatmap(matrix, title: str | None = None, value: str = "cosine similarity",
                            height: int = 360, zmin: float | None = None, zmax: float | None = None,
                            x_title: str = "position", y_title: str = "position") -> go.Figure:
    """A (T, T) matrix between positions (similarity, bias or score), diverging around 0."""
    import html

    import numpy as np

    matrix = np.asarray(matrix, dtype=float)
    finite = np.abs(matrix[np.isfinite(matrix)])
    top = float(finite.max()) if finite.size else 1.0
    lo = -top if zmin is None else zmin
    hi = top if zmax is None else zmax
    fig = go.Figure(go.Heatmap(
        z=matrix, x=np.arange(matrix.shape[1]), y=np.arange(matrix.shape[0]), colorscale=DIVERGING, zmid=0.0,
        zmin=min(lo, -1e-9), zmax=max(hi, 1e-9), colorbar=dict(thickness=12), hoverongaps=False,
        hovertemplate=f"{y_title} %{{y}}, {x_title} %{{x}}<br>{html.escape(value)} %{{z:.5g}}"
                      "<extra></extra>"))
    base_layout(fig, html.escape(title) if title else None, height)
    fig.update_xaxes(title=x_title)
    fig.update_yaxes(title=y_title, autorange="reversed", scaleanchor="x")
    return fig


def alibi_bias_figure(bias, slopes: list[float], title: str | None = None, columns: int = 4) -> go.Figure:
    """One small heatmap per head: bias (n_head, T, T) = -slope * (i - j); subplot titles give the slopes.

    All heads share one colour scale (0 down to the steepest bias), so a gentle slope reads as pale.
    fig.data[h].z is head h's matrix (NaN above the diagonal for causal models: no key there).
    """
    import html

    import numpy as np
    from plotly.subplots import make_subplots

    bias = np.asarray(bias, dtype=float)
    H, T, _ = bias.shape
    cols = min(columns, H)
    rows = -(-H // cols)
    fig = make_subplots(rows=rows, cols=cols, horizontal_spacing=0.04, vertical_spacing=0.12 / max(rows, 1),
                        subplot_titles=[f"head {h}: slope {s:.4g}" for h, s in enumerate(slopes)])
    low = float(bias.min()) if bias.size else -1.0
    causal_mask = np.tril(np.ones((T, T), dtype=bool))
    causal = bool(np.all(bias[:, ~causal_mask] == 0)) if T > 1 else True
    for h in range(H):
        z = np.where(causal_mask, bias[h], np.nan) if causal else bias[h]
        fig.add_trace(go.Heatmap(
            z=z, x=np.arange(T), y=np.arange(T), colorscale="Reds_r", zmin=min(low, -1e-9), zmax=0.0,
            showscale=h == 0, colorbar=dict(thickness=12, title="bias"), hoverongaps=False,
            hovertemplate=f"head {h} (slope {slopes[h]:.4g})<br>query %{{y}}, key %{{x}}<br>bias %{{z:.4g}}"
                          "<extra></extra>"), row=h // cols + 1, col=h % cols + 1)
    fig.update_yaxes(autorange="reversed")
    fig.update_annotations(font_size=11)
    base_layout(fig, html.escape(title) if title else None, 60 + rows * 230)
    fig.update_layout(plot_bgcolor=MASKED_COLOR)
    return fig


def rope_distance_figure(distances, ones_scores, random_scores, bound_distances, bound,
                         head_size: int, title: str | None = None) -> go.Figure:
    """Left: q.k after rotation against the relative distance m - n, for all-ones and a fixed random
    q = k. Right: Su et al.'s relative upper bound (their figure 2). Trace order: ones, random, bound."""
    import html

    from plotly.subplots import make_subplots

    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.08, subplot_titles=[
        f"q·k after rotation (head size {head_size})", "Su et al.'s relative upper bound (long-term decay)"])
    fig.add_trace(go.Scatter(x=distances, y=ones_scores, mode="lines", name="all-ones q = k",
                             line=dict(color=SCHEME_COLORS["rope"]),
                             hovertemplate="m - n = %{x}<br>q·k %{y:.4g}<extra>all-ones</extra>"),
                  row=1, col=1)
    fig.add_trace(go.Scatter(x=distances, y=random_scores, mode="lines", name="random q = k (seed 0)",
                             line=dict(color="#FFA15A"),
                             hovertemplate="m - n = %{x}<br>q·k %{y:.4g}<extra>random</extra>"), row=1, col=1)
    fig.add_trace(go.Scatter(x=bound_distances, y=bound, mode="lines", name="(1/(d/2)) Σ_j |S_j|",
                             line=dict(color="#222A2A"),
                             hovertemplate="m - n = %{x}<br>bound %{y:.4g}<extra></extra>"), row=1, col=2)
    fig.update_xaxes(title="relative distance m - n")
    fig.update_yaxes(title="q·k", row=1, col=1)
    fig.update_yaxes(title="relative upper bound", row=1, col=2)
    base_layout(fig, html.escape(title) if title else None, 380)
    fig.update_layout(legend=LEGEND_BELOW, margin=dict(t=90))
    return fig


def attention_distance_figure(series, title: str | None = None) -> go.Figure:
    """Mean attention weight against query-key distance i - j, one panel per model, one line per head.

    `series`: (label, positional, distances, means (n_head, D)) per model. Trace order: model-major.
    """
    import html

    import numpy as np
    from plotly.subplots import make_subplots

    n = max(len(series), 1)
    fig = make_subplots(rows=1, cols=n, shared_yaxes=True, horizontal_spacing=0.03,
                        subplot_titles=[html.escape(label) for label, *_ in series])
    for col, (label, _positional, distances, means) in enumerate(series, start=1):
        means = np.asarray(means, dtype=float)
        for h in range(means.shape[0]):
            fig.add_trace(go.Scatter(
                x=distances, y=means[h], mode="lines", name=f"head {h}", legendgroup=f"head {h}",
                showlegend=col == 1, line=dict(color=RUN_COLORS[h % len(RUN_COLORS)]), connectgaps=False,
                hovertemplate=f"{html.escape(label)}, head {h}<br>distance %{{x}}<br>mean weight %{{y:.4g}}"
                              "<extra></extra>"), row=1, col=col)
    fig.update_xaxes(title="distance i - j (query - key)")
    fig.update_yaxes(title="mean attention weight", row=1, col=1, rangemode="tozero")
    base_layout(fig, html.escape(title) if title else None, 360)
    fig.update_layout(legend=LEGEND_BELOW, margin=dict(t=80))
    fig.update_annotations(font_size=11)
    return fig


def positional_training_figure(frame, runs: list[str], positionals: list[str], metric: str = "loss",
                               splits: tuple[str, ...] = ("val",), x: str = "step",
                               title: str | None = None) -> go.Figure:
    """The variants' curves overlaid: one colour per scheme, val dashed with markers, train solid.

    `frame` is a tidy history table (core.history COLUMNS). Trace order: run-major, then `splits`.
    """
    import html

    fig = go.Figure()
    for i, (run, positional) in enumerate(zip(runs, positionals)):
        for split in splits:
            rows = frame[(frame["run"] == run) & (frame["split"] == split) & (frame["metric"] == metric)]
            rows = rows.sort_values(x, kind="stable")
            if rows.empty:
                continue
            fig.add_trace(go.Scatter(
                x=rows[x].to_numpy(float), y=rows["value"].to_numpy(float),
                mode="lines+markers" if split == "val" else "lines", name=html.escape(f"{run} · {split}"),
                line=dict(color=scheme_color(positional, i), dash="dash" if split == "val" else "solid",
                          width=2 if split == "val" else 1),
                opacity=1.0 if split == "val" else 0.6, meta={"run": run, "split": split},
                hovertemplate=f"{html.escape(run)} {split}<br>{x} %{{x}}<br>{metric} %{{y:.4g}}"
                              "<extra></extra>"))
    base_layout(fig, html.escape(title) if title else None, 400)
    fig.update_xaxes(title=x)
    fig.update_yaxes(title=metric)
    fig.update_layout(legend=LEGEND_BELOW)
    return fig


def extrapolation_figure(variants, labels: list[str], protocols: list[str], metric: str = "perplexity",
                         title: str | None = None) -> go.Figure:
    """Dev perplexity against window length, one panel per protocol, one line per variant.

    Lengths a variant cannot encode are never drawn as numbers: its line ends at its last measured
    length with an 'x' marker and an annotation ("no positions past 64"). A dotted line marks the
    training length. `variants` are core.evaluate.VariantExtrapolation. Trace order: protocol-major,
    variant, then (for a variant with an end) its end marker.
    """
    import html

    from plotly.subplots import make_subplots

    names = {"windows": "non-overlapping windows", "sliding": "sliding window (stride 1)"}
    fig = make_subplots(rows=1, cols=max(len(protocols), 1), shared_yaxes=False, horizontal_spacing=0.08,
                        subplot_titles=[names.get(p, p) for p in protocols])
    for col, protocol in enumerate(protocols, start=1):
        for i, (label, v) in enumerate(zip(labels, variants)):
            scores = sorted((s for s in v.scores if s.protocol == protocol), key=lambda s: s.length)
            if not scores:
                continue
            color = scheme_color(v.positional, i)
            ys = [getattr(s, metric) if s.applicable else None for s in scores]
            fig.add_trace(go.Scatter(
                x=[s.length for s in scores], y=ys, mode="lines+markers", name=html.escape(label),
                legendgroup=html.escape(label), showlegend=col == 1, connectgaps=False,
                line=dict(color=color), customdata=[[s.factor, s.tokens] for s in scores],
                meta={"variant": v.name, "protocol": protocol, "kind": "measured"},
                hovertemplate=f"{html.escape(label)}<br>%{{x}} tokens (%{{customdata[0]:g}}x)<br>{metric} "
                              "%{y:.4f}<br>%{customdata[1]} predictions<extra></extra>"), row=1, col=col)
            missing = [s for s in scores if not s.applicable]
            measured = [s for s in scores if s.applicable]
            if missing and measured:
                end = max(measured, key=lambda s: s.length)
                limit = v.max_length if v.max_length is not None else end.length
                fig.add_trace(go.Scatter(
                    x=[end.length], y=[getattr(end, metric)], mode="markers",
                    name=f"{html.escape(label)} ends",
                    legendgroup=html.escape(label), showlegend=False,
                    marker=dict(symbol=NOT_APPLICABLE_SYMBOL, size=14, color=color, line=dict(width=2)),
                    meta={"variant": v.name, "protocol": protocol, "kind": "end"},
                    hovertemplate=f"{html.escape(label)}: {html.escape(missing[0].reason or '')}"
                                  "<extra></extra>"),
                    row=1, col=col)
                fig.add_annotation(x=end.length, y=getattr(end, metric), text=f"no positions past {limit}",
                                   showarrow=True, arrowhead=0, ax=40, ay=-30,
                                   font=dict(color=color, size=11), row=1, col=col)
        if variants:
            fig.add_vline(x=variants[0].block_size, line=dict(color="grey", dash="dot", width=1),
                          row=1, col=col)
    fig.update_xaxes(title="window length (tokens); dotted: training length")
    fig.update_yaxes(title=f"dev {metric}", row=1, col=1)
    base_layout(fig, html.escape(title) if title else None, 420)
    fig.update_layout(legend=LEGEND_BELOW, margin=dict(t=90))
    return fig


def position_loss_figure(variants, labels: list[str], length: int, title: str | None = None) -> go.Figure:
    """Loss at each position of a window (non-overlapping windows of `length`), averaged over windows,
    one line per variant; a dotted line at the training length. Variants without numbers at this length
    are left out (the caller says why)."""
    import html

    fig = go.Figure()
    block = None
    for i, (label, v) in enumerate(zip(labels, variants)):
        score = next((s for s in v.scores if s.protocol == "windows" and s.length == length), None)
        block = v.block_size
        if score is None or not score.applicable or score.position_loss is None:
            continue
        fig.add_trace(go.Scatter(
            x=list(range(len(score.position_loss))), y=score.position_loss, mode="lines",
            name=html.escape(label), line=dict(color=scheme_color(v.positional, i)), connectgaps=False,
            meta={"variant": v.name},
            hovertemplate=f"{html.escape(label)}<br>position %{{x}}<br>mean loss %{{y:.4f}}<extra></extra>"))
    if block is not None:
        fig.add_vline(x=block - 0.5, line=dict(color="grey", dash="dot", width=1))
    base_layout(fig, html.escape(title) if title else None, 380)
    fig.update_xaxes(title=f"position in a window of {length} tokens; dotted: training length")
    fig.update_yaxes(title="mean loss (nats)")
    fig.update_layout(legend=LEGEND_BELOW)
    return fig


# --- Birthplace probe ---

PROBE_CATEGORY_COLORS = {
    "retrieved": "#1CA71C", "wrong despite evidence": "#EF553B", "correct by prior": "#FFA15A",
    "unseen name": "#AB63FA", "wrong, no evidence": "#7F7F7F",
}  # keys: core.probe.CATEGORIES
PROBE_GREEDY_COLOR = "#EF553B"
PROBE_TRUTH_COLOR = "#1CA71C"
PROBE_TRAINING_COLOR = "#7F7F7F"


def _probe_visible(token: str) -> str:
    return {" ": "␣", "\n": "↵", "\t": "⇥", "": "∅"}.get(token, token)


def candidate_bars(places: list[str], probabilities, greedy: str | None = None, truth: str | None = None,
                   title: str | None = None) -> go.Figure:
    """Top candidates as horizontal bars (best on top), probability normalised over the candidate list.
    The greedy answer is red, the true place green, the rest blue; bar text is the percentage."""
    import html

    probabilities = [float(p) for p in probabilities]
    colors = [PROBE_TRUTH_COLOR if p == truth else PROBE_GREEDY_COLOR if p == greedy else ALLOWED_COLOR
              for p in places]
    marks = [" (true)" if p == truth else "" for p in places]
    marks = [m + (" (greedy)" if p == greedy else "") for p, m in zip(places, marks)]
    labels = [p + m for p, m in zip(places, marks)]
    fig = go.Figure(go.Bar(
        x=probabilities, y=list(range(len(places))), orientation="h", marker_color=colors,
        text=[f"{100 * p:.1f}%" for p in probabilities], textposition="auto",
        customdata=[html.escape(label) for label in labels],
        hovertemplate="%{customdata}: %{x:.2%}<extra></extra>"))
    fig.update_yaxes(autorange="reversed", **_index_axis(labels))  # _index_axis escapes
    fig.update_xaxes(title="probability among the candidates", range=[0, 1], tickformat=".0%")
    return base_layout(fig, html.escape(title) if title else None, 90 + 26 * max(len(places), 1))


def answer_attention_heatmap(weights, tokens: list[str], row_labels: list[str],
                             title: str | None = None) -> go.Figure:
    """(rows, T): where the last prompt position (⁇, which predicts the answer's first character) looks,
    one row per layer (mean over heads) or per head. fig.data[0].z is `weights`."""
    import html

    import numpy as np

    weights = np.asarray(weights, dtype=float)
    labels = [html.escape(_probe_visible(t)) for t in tokens]
    rows = [html.escape(r) for r in row_labels]
    text = [[f"{row}: key {j} '{label}'" for j, label in enumerate(labels)] for row in rows]
    fig = go.Figure(go.Heatmap(
        z=weights, x=list(range(weights.shape[1])), y=list(range(weights.shape[0])), colorscale=SEQUENTIAL,
        zmin=0.0, zmax=max(float(weights.max()) if weights.size else 1.0, 1e-9), text=text,
        hovertemplate="%{text}<br>weight %{z:.4f}<extra></extra>", colorbar=dict(thickness=12)))
    fig.update_xaxes(title="prompt character (key)", tickangle=0,
                     **token_axis(labels, list(range(len(labels)))))
    fig.update_yaxes(autorange="reversed", **_index_axis(row_labels))
    return base_layout(fig, html.escape(title) if title else None, 140 + 28 * max(weights.shape[0], 1))


def place_share_bars(shares, title: str | None = None) -> go.Figure:
    """Grouped bars: share of each place (rows of `shares`) per column (training labels, then one per
    model). `shares` is `core.probe.place_shares`' frame."""
    import html

    fig = go.Figure()
    places = [html.escape(str(p)) for p in shares.index]
    for i, column in enumerate(shares.columns):
        name = html.escape(str(column))
        color = PROBE_TRAINING_COLOR if i == 0 else run_color(i - 1)
        fig.add_trace(go.Bar(x=list(range(len(places))), y=shares[column].tolist(), name=name,
                             marker_color=color, customdata=places, meta={"column": str(column)},
                             hovertemplate=f"{name}<br>%{{customdata}}: %{{y:.1%}}<extra></extra>"))
    fig.update_xaxes(tickangle=-45, **_index_axis(list(shares.index)))
    fig.update_yaxes(title="share of answers", tickformat=".0%")
    base_layout(fig, html.escape(title) if title else None, 420)
    fig.update_layout(barmode="group", legend=LEGEND_BELOW)
    return fig


def locale_place_heatmap(counts, title: str | None = None) -> go.Figure:
    """Counts of predicted places (columns) for names of each locale (rows): the model's strategy at a
    glance (one column = one city for everyone; a diagonal-ish pattern = a city of the name's country)."""
    import html

    import numpy as np

    z = np.asarray(counts.values, dtype=float)
    rows, cols = [str(r) for r in counts.index], [str(c) for c in counts.columns]
    text = [[f"{html.escape(r)} names → {html.escape(c)}" for c in cols] for r in rows]
    fig = go.Figure(go.Heatmap(
        z=z, x=list(range(len(cols))), y=list(range(len(rows))), colorscale=SEQUENTIAL, zmin=0,
        text=text, hovertemplate="%{text}: %{z:.0f}<extra></extra>", colorbar=dict(thickness=12)))
    fig.update_xaxes(title="predicted place", tickangle=-45, **_index_axis(cols))
    fig.update_yaxes(title="locale of the name", autorange="reversed", **_index_axis(rows))
    return base_layout(fig, html.escape(title) if title else None, 160 + 26 * max(len(rows), 1))


def reliability_figure(tables: dict[str, Any], title: str | None = None) -> go.Figure:
    """Accuracy per confidence bin, one bar group per model (bar text = questions in the bin), over a
    dotted diagonal (perfect calibration). `tables`: model -> `core.probe.reliability_table` frame."""
    import html

    fig = go.Figure()
    for i, (model, table) in enumerate(tables.items()):
        name = html.escape(model)
        middle = ((table["low"] + table["high"]) / 2).tolist()
        fig.add_trace(go.Bar(
            x=middle, y=table["accuracy"].tolist(), name=name, marker_color=run_color(i),
            text=[f"n={c}" for c in table["count"]], textposition="outside", meta={"model": model},
            customdata=table["count"].tolist(),
            hovertemplate=f"{name}<br>confidence %{{x:.2f}}<br>accuracy %{{y:.1%}}<br>%{{customdata}} "
                          "questions<extra></extra>"))
    fig.add_trace(go.Scatter(x=[0, 1], y=[0, 1], mode="lines", name="perfect calibration",
                             line=dict(color="grey", dash="dot", width=1), hoverinfo="skip"))
    base_layout(fig, html.escape(title) if title else None, 420)
    fig.update_xaxes(title="confidence (probability of the greedy answer)", range=[0, 1])
    fig.update_yaxes(title="accuracy", range=[0, 1.1], tickformat=".0%")
    fig.update_layout(barmode="group", legend=LEGEND_BELOW)
    return fig


def category_share_bars(summaries: dict[str, Any], title: str | None = None) -> go.Figure:
    """Stacked horizontal bars: each model's questions split by evidence category (one trace per
    category, in `core.probe.CATEGORIES` order). `summaries`: model -> `category_summary` frame."""
    import html

    models = list(summaries)
    categories = list(next(iter(summaries.values()))["category"]) if summaries else []
    fig = go.Figure()
    for category in categories:
        shares = [float(summaries[m].set_index("category").loc[category, "share"]) for m in models]
        counts = [int(summaries[m].set_index("category").loc[category, "count"]) for m in models]
        fig.add_trace(go.Bar(
            x=shares, y=list(range(len(models))), orientation="h", name=category,
            marker_color=PROBE_CATEGORY_COLORS.get(category, "#636EFA"), customdata=counts,
            text=[f"{s:.0%}" if s >= 0.04 else "" for s in shares], textposition="inside",
            meta={"category": category},
            hovertemplate=f"{category}: %{{x:.1%}} (%{{customdata}} questions)<extra></extra>"))
    fig.update_yaxes(autorange="reversed", **_index_axis(models))
    fig.update_xaxes(title="share of questions", range=[0, 1], tickformat=".0%")
    base_layout(fig, html.escape(title) if title else None, 140 + 40 * max(len(models), 1))
    fig.update_layout(barmode="stack", legend=LEGEND_BELOW)
    return fig


def confidence_by_category(frame, title: str | None = None) -> go.Figure:
    """Box plot of the greedy answer's confidence per evidence category: can confidence tell
    retrieval from invention? `frame` is `core.probe.DevAnalysis.frame`."""
    import html

    fig = go.Figure()
    for category, color in PROBE_CATEGORY_COLORS.items():
        values = frame.loc[frame["category"] == category, "confidence"].dropna().tolist()
        if not values:
            continue
        fig.add_trace(go.Box(y=values, name=f"{category} ({len(values)})", marker_color=color,
                             boxpoints="all" if len(values) <= 200 else "outliers", jitter=0.4,
                             meta={"category": category}))
    base_layout(fig, html.escape(title) if title else None, 380)
    fig.update_yaxes(title="confidence", range=[0, 1.02])
    fig.update_layout(showlegend=False)
    return fig
