"""Positional encodings: the tables, similarities, ALiBi biases, RoPE, training and extrapolation."""

from __future__ import annotations

import math

import plotly.graph_objects as go

from core.figures.common import (
    DIVERGING,
    LEGEND_RIGHT,
    MASKED_COLOR,
    RUN_COLORS,
    base_layout,
    finished,
    log_axis,
    subplot_grid,
)

# One colour per scheme on every chart of every page: the colour lives in the scheme's registry entry
# (core.model.positional), so "ALiBi" is the same line everywhere.

NOT_APPLICABLE_SYMBOL = "x"
SHOWN_DIGITS = 5  # significant digits a heatmap's hover shows (%{z:.5g}): what its values are sent with


def shown_values(values, digits: int = SHOWN_DIGITS):
    """`values` rounded to the `digits` significant digits the hover shows (NaN and inf kept): the same picture
    and the same hover text, in less than half the JSON (a 64 x 128 table: 162 kB -> 71 kB, and half the time
    Streamlit spends encoding it on every run that draws it)."""
    import numpy as np

    values = np.array(values, dtype=float)
    rounded = np.isfinite(values) & (values != 0)
    exponent = np.floor(np.log10(np.abs(values[rounded])))
    scale = 10.0 ** (digits - 1 - exponent)
    values[rounded] = np.round(values[rounded] * scale) / scale
    return values


def scheme_color(positional: str, index: int = 0) -> str:
    """The scheme's registry colour; an unknown scheme gets a run colour by its index."""
    from core.model.positional import POSITIONAL

    return POSITIONAL[positional].color if positional in POSITIONAL else RUN_COLORS[index % len(RUN_COLORS)]


@finished
def position_table_heatmap(table, title: str | None = None, height: int = 380,
                           x_title: str = "dimension", y_title: str = "position") -> go.Figure:
    """A (positions, dimensions) table as a heatmap centred on 0; fig.data[0].z is the table to the 5 significant
    digits its hover shows."""
    import html

    import numpy as np

    table = np.asarray(table, dtype=float)
    top = float(np.nanmax(np.abs(table))) if np.isfinite(table).any() else 1.0
    fig = go.Figure(go.Heatmap(
        z=shown_values(table), x=np.arange(table.shape[1]), y=np.arange(table.shape[0]), colorscale=DIVERGING,
        zmid=0.0, zmin=-max(top, 1e-9), zmax=max(top, 1e-9), colorbar=dict(thickness=12),
        hovertemplate=f"{y_title} %{{y}}, {x_title} %{{x}}<br>value %{{z:.{SHOWN_DIGITS}g}}<extra></extra>"))
    base_layout(fig, html.escape(title) if title else None, height)
    fig.update_xaxes(title=x_title)
    fig.update_yaxes(title=y_title, autorange="reversed")
    return fig


@finished
def position_matrix_heatmap(matrix, title: str | None = None, value: str = "cosine similarity",
                            height: int = 360, zmin: float | None = None, zmax: float | None = None,
                            x_title: str = "position", y_title: str = "position") -> go.Figure:
    """A (T, T) matrix between positions (similarity, bias or score), diverging around 0; fig.data[0].z is the
    matrix to the 5 significant digits its hover shows."""
    import html

    import numpy as np

    matrix = np.asarray(matrix, dtype=float)
    finite = np.abs(matrix[np.isfinite(matrix)])
    top = float(finite.max()) if finite.size else 1.0
    lo = -top if zmin is None else zmin
    hi = top if zmax is None else zmax
    fig = go.Figure(go.Heatmap(
        z=shown_values(matrix), x=np.arange(matrix.shape[1]), y=np.arange(matrix.shape[0]), colorscale=DIVERGING,
        zmid=0.0, zmin=min(lo, -1e-9), zmax=max(hi, 1e-9), colorbar=dict(thickness=12), hoverongaps=False,
        hovertemplate=f"{y_title} %{{y}}, {x_title} %{{x}}<br>{html.escape(value)} %{{z:.{SHOWN_DIGITS}g}}"
                      "<extra></extra>"))
    base_layout(fig, html.escape(title) if title else None, height)
    # constrain="domain": a square plot shrinks its box instead of widening the range past the data
    fig.update_xaxes(title=x_title, range=[-0.5, matrix.shape[1] - 0.5], constrain="domain")
    fig.update_yaxes(title=y_title, range=[matrix.shape[0] - 0.5, -0.5], scaleanchor="x", constrain="domain")
    return fig


@finished
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
    cols = min(columns, H)  # slopes are powers of two: "2^-3" is short and exact where 0.125 is neither
    rows = -(-H // cols)
    fig = make_subplots(rows=rows, cols=cols, horizontal_spacing=0.03, vertical_spacing=0.28 / max(rows, 1),
                        shared_xaxes=True, shared_yaxes=True,
                        subplot_titles=[f"head {h}: slope 2<sup>{math.log2(s):.3g}</sup>"
                                        for h, s in enumerate(slopes)])
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
    fig.update_annotations(font_size=13, yshift=4)
    base_layout(fig, html.escape(title) if title else None, 80 + rows * 250)
    fig.update_layout(margin=dict(t=80 if title else 40))  # the first row's subplot titles sit above it
    fig.update_layout(plot_bgcolor=MASKED_COLOR)
    return fig


@finished
def rope_distance_figure(distances, ones_scores, random_scores, bound_distances, bound,
                         head_size: int, title: str | None = None) -> go.Figure:
    """Left: q.k after rotation against the relative distance m - n, for all-ones and a fixed random
    q = k. Right: Su et al.'s relative upper bound (their figure 2). Trace order: ones, random, bound."""
    import html

    from plotly.subplots import make_subplots

    # Two-line titles and room between the panels: at 1024 px one-line titles overlapped each other and the
    # right panel's y-axis title sat on the left panel's lines
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.16, subplot_titles=[
        f"q·k after rotation<br>(head size {head_size})", "Su et al.'s relative upper bound<br>(long-term decay)"])
    fig.add_trace(go.Scatter(x=distances, y=ones_scores, mode="lines", name="all-ones q = k",
                             line=dict(color=scheme_color("rope")),
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
    fig.update_yaxes(title="upper bound", row=1, col=2)
    base_layout(fig, html.escape(title) if title else None, 440)
    # the legend under the panels: at the right it took the width the two panels need apart at 1024 px
    fig.update_layout(legend=dict(orientation="h", yanchor="top", y=-0.3, x=0), margin=dict(t=110))
    return fig


@finished
def attention_distance_figure(series, title: str | None = None) -> go.Figure:
    """Mean attention weight against query-key distance i - j, one panel per model, one line per head.

    `series`: (label, positional, distances, means (n_head, D)) per model. Trace order: model-major.
    """
    import html

    import numpy as np

    n = max(len(series), 1)
    cols = min(n, 2)  # two panels a row: four across left each ~150 px at 1024x768
    rows = -(-n // cols)
    layout = subplot_grid(rows, cols, [html.escape(label) for label, *_ in series], shared_yaxes=True,
                          shared_xaxes=True, horizontal_spacing=0.06, vertical_spacing=0.16 / rows)
    traces = []
    for k, (label, _positional, distances, means) in enumerate(series):
        means = np.asarray(means, dtype=float)
        panel = k + 1 if k else ""  # make_subplots numbers the axes row-major: x, x2, ...
        for h in range(means.shape[0]):
            traces.append(go.Scatter(
                x=distances, y=means[h], mode="lines", name=f"head {h}", legendgroup=f"head {h}",
                showlegend=k == 0, line=dict(color=RUN_COLORS[h % len(RUN_COLORS)]), connectgaps=False,
                xaxis=f"x{panel}", yaxis=f"y{panel}",
                hovertemplate=f"{html.escape(label)}, head {h}<br>distance %{{x}}<br>mean weight %{{y:.4g}}"
                              "<extra></extra>"))
    for k in range(rows * cols):
        axis = f"{k + 1 if k else ''}"
        if k // cols == rows - 1:
            layout[f"xaxis{axis}"]["title"] = dict(text="distance i - j")
        if k % cols == 0:
            layout[f"yaxis{axis}"].update(title=dict(text="mean weight"), rangemode="tozero")
    for note in layout.get("annotations", []):
        note["font"] = dict(size=13)
    fig = go.Figure(data=traces, layout=layout)
    base_layout(fig, html.escape(title) if title else None, 120 + 230 * rows)
    fig.update_layout(legend=LEGEND_RIGHT, margin=dict(t=80))
    return fig


@finished
def positional_training_figure(frame, runs: list[str], positionals: list[str], metric: str = "loss",
                               splits: tuple[str, ...] = ("val",), x: str = "step",
                               title: str | None = None) -> go.Figure:
    """The variants' curves overlaid: one colour per scheme, val dashed with markers, train solid.

    `frame` is a tidy history table (core.lens.history COLUMNS). Trace order: run-major, then `splits`.
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
    # perplexity spans orders of magnitude (e^loss): on a linear axis everything under 10 is one line
    fig.update_yaxes(title=metric, **(log_axis(y for t in fig.data for y in t.y) if metric == "perplexity"
                                      else dict(type="linear")))
    fig.update_layout(legend=LEGEND_RIGHT)
    return fig


@finished
def extrapolation_figure(variants, labels: list[str], protocols: list[str], metric: str = "perplexity",
                         title: str | None = None) -> go.Figure:
    """Dev perplexity against window length, one panel per protocol, one line per variant.

    Lengths a variant cannot encode are never drawn as numbers: its line ends at its last measured
    length with an 'x' marker and an annotation ("no positions past 64"). A dotted line marks the
    training length. `variants` are core.lens.extrapolation.VariantExtrapolation. Trace order: protocol-major,
    variant, then (for a variant with an end) its end marker.
    """
    import html

    from plotly.subplots import make_subplots

    names = {"windows": "non-overlapping windows", "sliding": "sliding window (stride 1)"}
    log = metric == "perplexity"
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
                y = getattr(end, metric)  # annotations on a log axis are placed in log10 units
                fig.add_annotation(x=end.length, y=math.log10(y) if log and y > 0 else y,
                                   text=f"no positions past {limit}",
                                   showarrow=True, arrowhead=0, ax=40, ay=-30,
                                   font=dict(color=color, size=11), row=1, col=col)
        if variants:
            fig.add_vline(x=variants[0].block_size, line=dict(color="grey", dash="dot", width=1),
                          annotation=dict(text="trained", font=dict(size=11, color="grey")),
                          annotation_position="top right", row=1, col=col)
        shown = [getattr(s, metric) for v in variants for s in v.scores if s.protocol == protocol and s.applicable]
        fig.update_yaxes(**(log_axis(shown) if log else dict(type="linear")), row=1, col=col)
    fig.update_xaxes(title="window length (tokens)")  # one short title per panel: two long ones overlapped
    fig.update_yaxes(title=f"dev {metric}" + (" (log scale)" if log else ""), row=1, col=1)
    base_layout(fig, html.escape(title) if title else None, 420)
    fig.update_layout(legend=LEGEND_RIGHT, margin=dict(t=90))
    return fig


@finished
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
    fig.update_layout(legend=LEGEND_RIGHT)
    return fig
