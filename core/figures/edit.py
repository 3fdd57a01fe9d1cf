"""Editing a fact: the sweep of edit sites beside the causal trace of the same questions.

Pure functions: arrays and labels in (core.lens.edit computes them), a plotly Figure out.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from core.figures.common import SEQUENTIAL, base_layout, finished, index_axis, subplot_grid

UNREACHABLE_COLOR = "#B4B4B4"
UNREACHABLE_TEXT = "cannot reach the answer (the last layer at an earlier position)"


@finished
def site_sweep_panels(panels: dict[str, np.ndarray], positions: Sequence[str], impossible: np.ndarray,
                      title: str | None = None) -> go.Figure:
    """One panel per measure (efficacy, specificity, the traced share), one under another (side by side, at 1024 px
    their titles and position labels ran into each other); rows = layers, columns = position classes; every cell
    labelled with its percentage; a note under the panels says what the grey cells are. fig.data[2k] is panel k's
    values (NaN where the site cannot reach the answer), fig.data[2k + 1] its grey cells."""
    impossible = np.asarray(impossible, dtype=bool)
    n_layer = impossible.shape[0]
    x = [html.escape(p) for p in positions]
    grid = subplot_grid(len(panels), 1, [html.escape(k) for k in panels], vertical_spacing=0.5 / len(panels))
    traces = []
    for n, (label, values) in enumerate(panels.items(), start=1):
        z = np.asarray(values, dtype=float).copy()
        z[impossible] = np.nan
        suffix = str(n) if n > 1 else ""
        text = [["" if not np.isfinite(v) else f"{v:.0%}" for v in row] for row in z]
        traces.append(go.Heatmap(
            z=z, x=x, y=list(range(n_layer)), coloraxis="coloraxis", xaxis=f"x{suffix}", yaxis=f"y{suffix}",
            text=text, texttemplate="%{text}",
            hovertemplate=f"{html.escape(label)}, MLP %{{y}}, %{{x}}: %{{z:.1%}}<extra></extra>"))
        traces.append(go.Heatmap(
            z=np.where(impossible, 1.0, np.nan), x=x, y=list(range(n_layer)), showscale=False,
            colorscale=[[0, UNREACHABLE_COLOR], [1, UNREACHABLE_COLOR]], xaxis=f"x{suffix}", yaxis=f"y{suffix}",
            hovertemplate=f"MLP %{{y}}, %{{x}}: {UNREACHABLE_TEXT}<extra></extra>"))
        grid[f"xaxis{suffix}"].update(tickangle=0)  # two short classes: never turned (and no margin kept for it)
        grid[f"yaxis{suffix}"].update(autorange="reversed", title="layer",
                                      **index_axis([str(i) for i in range(n_layer)]))
    fig = go.Figure(traces, layout=grid)
    fig.update_layout(coloraxis=dict(colorscale=SEQUENTIAL, cmin=0.0, cmax=1.0,
                                     colorbar=dict(tickformat=".0%", thickness=12)))
    fig = base_layout(fig, html.escape(title) if title else None, 120 + len(panels) * (70 + 36 * n_layer))
    if impossible.any():  # the grey cells, said under the panels
        fig.add_annotation(text=f"grey: {UNREACHABLE_TEXT}", xref="paper", yref="paper", x=0, y=0, yanchor="top",
                           yshift=-28, xanchor="left", showarrow=False, font=dict(size=12, color="#555"))
        fig.update_layout(margin=dict(b=fig.layout.margin.b + 36))
    fig.update_layout(margin=dict(t=fig.layout.margin.t + 24))
    return fig
