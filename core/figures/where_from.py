"""Where an answer comes from: logit lens heatmap, sorted attribution bars, causal-trace panels, salience chips.

Pure functions: plain arrays and labels in (core.lens.where_from computes them), a plotly Figure out. Every
label a user typed (tokens, names) is escaped: plotly renders a subset of HTML in labels and hover text.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go

from core.figures.common import (
    DIVERGING,
    SEQUENTIAL,
    TOKEN_FONT,
    built_fitted,
    category_axis,
    colorscale,
    index_axis,
    layout_base,
    subplot_grid,
    token_categories,
    unchecked_figure,
)
from core.figures.margins import fitted_margin
from core.lens.probe.answers import FIRST_PIECE
from core.lens.where_from.attribution import BARS_SHOWN, bar_order
from core.text import visible_token

POSITIVE_COLOR = "#1F77B4"  # pushes the answer up
NEGATIVE_COLOR = "#D62728"  # pushes it down
IMPOSSIBLE_COLOR = "#B4B4B4"  # darker than a 0 cell (white in RdBu): "cannot matter", not "did not matter"
IMPOSSIBLE_TEXT = "cannot reach the answer (the last layer at an earlier position)"


def _labels(tokens: Sequence[str], bold: Sequence[int] = (), pieces: bool = True) -> list[str]:
    """Escaped, distinct category labels (pieces: whitespace made visible); positions in `bold` drawn bold."""
    shown = [html.escape((visible_token(t) if pieces else str(t)) or "∅") for t in tokens]
    shown = [f"<b>{s}</b>" if i in set(bold) else s for i, s in enumerate(shown)]
    return token_categories(shown)


@built_fitted  # unchecked_figure fits its margins
def logit_lens_heatmap(answer_prob, top_pieces: Sequence[Sequence[str]], tokens: Sequence[str],
                       row_labels: Sequence[str], answer_piece: str, title: str | None = None,
                       measured: str = FIRST_PIECE) -> go.Figure:
    """The answer's first piece's probability (`measured` names it on the colour bar: the probe's answer has
    more pieces, and its table shows the whole answer's probability) when the stream after each layer (columns:
    embeddings, after layer 0, ...) is read out, at each position (rows, top to bottom: the question in order);
    each cell names the top piece there (the columns are wide enough for it). `answer_prob` and `top_pieces` are
    (layers, T), as core.lens.where_from.LogitLens holds them; fig.data[0].z is their transpose (T, layers)."""
    z = np.asarray(answer_prob, dtype=float).T  # (T, layers)
    y = _labels(tokens)
    tops = [[html.escape(visible_token(p)) for p in row] for row in zip(*top_pieces)]  # (T, layers)
    answer = html.escape(visible_token(answer_piece))
    columns = [html.escape(str(r)) for r in row_labels]
    heatmap = dict(
        type="heatmap", z=z, x=columns, y=y, colorscale=colorscale(SEQUENTIAL), zmin=0.0, zmax=1.0, text=tops,
        texttemplate="%{text}", textfont=dict(size=12), xgap=2, ygap=1,
        hovertemplate=f"%{{y}}, %{{x}}<br>p({answer}) = %{{z:.3f}}<br>top piece: %{{text}}<extra></extra>",
        colorbar=dict(title=dict(text=f"{html.escape(measured)}: {answer}", side="right"), thickness=12))
    layout = layout_base(html.escape(title) if title else None)
    # the columns under the map: on top, their names sat on the chart's title
    layout.update(xaxis=category_axis(), yaxis=dict(autorange="reversed", title=dict(text="the piece read"),
                                                    **category_axis()))
    margin = fitted_margin(layout, [heatmap])  # the rows get 20 px each, whatever the title and labels take
    return unchecked_figure([heatmap], {**layout, "height": margin["t"] + margin["b"] + 20 * max(z.shape[0], 4)})


@built_fitted  # unchecked_figure fits its margins
def attribution_bars(names: Sequence[str], values, logit: float, answer_piece: str, top: int = BARS_SHOWN,
                     title: str | None = None) -> go.Figure:
    """Each piece's share of the answer's logit, sorted by size (largest on top), the `top` largest by absolute
    value; positive and negative coloured apart. fig.data[0] is the bars (x = values, in the order shown)."""
    values = np.asarray(values, dtype=float)
    order = bar_order(values, top)  # the pieces and order the attribution's sentence reads
    shown = [html.escape(str(names[i])) for i in order]
    v = values[order]
    bars = dict(
        type="bar", x=v, y=list(range(len(order))), orientation="h",
        marker=dict(color=[POSITIVE_COLOR if value >= 0 else NEGATIVE_COLOR for value in v]),
        text=[f"{value:+.2f}" for value in v], textposition="outside", textfont=dict(TOKEN_FONT), cliponaxis=False,
        customdata=shown, hovertemplate="%{customdata}: %{x:+.3f}<extra></extra>")
    span = float(np.abs(v).max()) if v.size else 1.0
    low, high = min(0.0, float(v.min(initial=0))), max(0.0, float(v.max(initial=0)))
    layout = layout_base(html.escape(title) if title else None, 110 + 24 * max(len(order), 3))
    layout.update(
        yaxis=dict(autorange="reversed", **index_axis(shown)),
        # room beyond the longest bars for their labels (outside the bar, in the axis font)
        xaxis=dict(title=dict(text=f"share of the logit of {html.escape(visible_token(answer_piece))} "
                                   f"({logit:.2f} in all)"),
                   range=[low - (0.45 * span if low < 0 else 0.05 * span), high + 0.45 * span], zeroline=True,
                   zerolinecolor="#888"))
    return unchecked_figure([bars], layout)


@built_fitted  # unchecked_figure fits its margins
def causal_trace_panels(grids: Mapping[str, np.ndarray], impossible: np.ndarray, columns: Sequence[str],
                        bold: Sequence[int] = (), measure: str = "share recovered", title: str | None = None,
                        pieces: bool = True) -> go.Figure:
    """One panel per kind (residual, attention, MLP), rows = layers, columns = positions (or position classes):
    the share of the corruption's effect that restoring that one state brings back. Cells that cannot reach the
    answer are drawn grey (a second trace per panel, z = 1 there), not as 0. fig.data[2k] is panel k's values
    (NaN where impossible), fig.data[2k + 1] its grey cells."""
    kinds = list(grids)
    impossible = np.asarray(impossible, dtype=bool)
    n_layer = impossible.shape[0]
    x = _labels(columns, bold, pieces)  # pieces=False: columns are position classes (dev-set averages)
    grid = subplot_grid(len(kinds), 1, [html.escape(k) for k in kinds], vertical_spacing=0.12)
    traces = []
    finite = [np.asarray(g, dtype=float)[~impossible] for g in grids.values()]
    top = max([float(np.nanmax(np.abs(f))) for f in finite if f.size and np.isfinite(f).any()] + [1.0])
    for n, kind in enumerate(kinds, start=1):
        z = np.asarray(grids[kind], dtype=float).copy()
        z[impossible] = np.nan
        suffix = str(n) if n > 1 else ""
        traces.append(dict(
            type="heatmap", z=z, x=x, y=list(range(n_layer)), coloraxis="coloraxis", xaxis=f"x{suffix}",
            yaxis=f"y{suffix}",
            hovertemplate=f"{html.escape(kind)}, layer %{{y}}, %{{x}}<br>{html.escape(measure)}: %{{z:.1%}}"
                          "<extra></extra>"))
        traces.append(dict(
            type="heatmap", z=np.where(impossible, 1.0, np.nan), x=x, y=list(range(n_layer)), showscale=False,
            colorscale=[[0, IMPOSSIBLE_COLOR], [1, IMPOSSIBLE_COLOR]], xaxis=f"x{suffix}", yaxis=f"y{suffix}",
            hovertemplate=f"layer %{{y}}, %{{x}}: {IMPOSSIBLE_TEXT}<extra></extra>"))
        grid[f"xaxis{suffix}"].update(category_axis(showticklabels=n == len(kinds)))
        grid[f"yaxis{suffix}"].update(autorange="reversed", **index_axis([str(i) for i in range(n_layer)]),
                                      **({"title": dict(text="layer")} if n == 1 else {}))
    layout = {**grid, **layout_base(html.escape(title) if title else None,
                                    160 + len(kinds) * (60 + 28 * n_layer))}
    layout["coloraxis"] = dict(colorscale=colorscale(DIVERGING), cmin=-top, cmax=top,
                               colorbar=dict(title=dict(text=html.escape(measure), side="right"), tickformat=".0%",
                                             thickness=12))
    layout["margin"]["t"] += 24  # the first panel's title below the chart's
    return unchecked_figure(traces, layout)


@built_fitted  # unchecked_figure fits its margins
def salience_chips(tokens: Sequence[str], rows: Mapping[str, Sequence[float]], title: str | None = None,
                   pieces: str = "the question's pieces, in order") -> go.Figure:
    """LIT's salience chips: one column per method (gradient x input, integrated gradients), one chip per input
    piece down the column in reading order, coloured by its signed attribution (each method scaled to its own
    largest magnitude, so a signed and an unsigned method read side by side); the chip's text is the piece.
    Pieces run down, not across: a question of 20-30 pieces in a row left each chip ~12 px at 1024x768.
    fig.data[0].z is the scaled values (pieces, methods), fig.data[0].customdata the raw ones."""
    methods = list(rows)
    raw = np.array([np.asarray(rows[m], dtype=float) for m in methods])  # (methods, T)
    scale = np.abs(raw).max(axis=1, keepdims=True)
    scaled = np.divide(raw, scale, out=np.zeros_like(raw), where=scale > 0)
    labels = [html.escape(visible_token(t) or "∅") for t in tokens]
    chips = dict(
        type="heatmap", z=scaled.T, x=list(range(len(methods))), y=list(range(len(tokens))),
        colorscale=colorscale(DIVERGING), zmin=-1, zmax=1, text=[[label] * len(methods) for label in labels],
        texttemplate="%{text}",
        textfont=dict(size=TOKEN_FONT["size"]),  # no colour: plotly picks dark or light text for each chip
        customdata=raw.T, xgap=8, ygap=2, hovertemplate="%{text}: %{customdata:+.4f}<extra></extra>",
        colorbar=dict(title=dict(text="scaled", side="right"), thickness=12))
    layout = layout_base(html.escape(title) if title else None, 140 + 22 * max(len(tokens), 4))
    layout.update(xaxis=dict(side="top", **index_axis(methods)),
                  yaxis=dict(autorange="reversed", showticklabels=False, showgrid=False, zeroline=False,
                             title=dict(text=pieces)))
    layout["margin"]["t"] += 34  # a line for the method names between title and chips (24 px: they touched)
    return unchecked_figure([chips], layout)
