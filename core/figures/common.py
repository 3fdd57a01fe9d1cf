"""What every figure shares: palettes, layouts, token axes, the chart toolbar's export config.

Figures are pure functions, data in (tensors, arrays, frames), plotly Figure out; no streamlit, so
every chart is unit-tested by inspecting `fig.data` / `fig.layout`.
"""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

IMAGE_FORMATS = ("png", "svg")
SEQUENTIAL = "Blues"  # attention weights and other [0, 1] quantities
DIVERGING = "RdBu"  # differences and signed values, centred on 0
ALLOWED_COLOR = "#2E6DB4"  # "may attend", bars
MASKED_COLOR = "rgba(200, 200, 200, 0.35)"  # masked cells: visibly not the same as weight 0
TICK_LABELS_MAX = 64  # more tokens than this: label every k-th one
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


RUN_COLORS = (
    "#636EFA", "#EF553B", "#00CC96", "#AB63FA", "#FFA15A", "#19D3F3", "#FF6692", "#B6E880", "#FF97FF",
    "#FECB52", "#2E91E5", "#E15F99", "#1CA71C", "#FB0D0D", "#DA16FF", "#222A2A", "#B68100", "#750D86",
)  # plotly's qualitative palette, then Dark24's most distinct; repeats past 18 runs
SPLIT_DASH = {"train": "solid", "val": "dash"}  # any other split: dotted
RAW_OPACITY_UNDER_SMOOTHING = 0.25


def run_color(index: int) -> str:
    return RUN_COLORS[index % len(RUN_COLORS)]


def index_axis(labels: list[str]) -> dict[str, Any]:
    """Numeric positions with text ticks: category axes would merge two equal labels into one."""
    import html

    return dict(tickmode="array", tickvals=list(range(len(labels))),
                ticktext=[html.escape(str(label)) for label in labels])


def visible_token(token: str) -> str:
    """Whitespace would be an invisible tick label."""
    return {" ": "␣", "\n": "↵", "\t": "⇥", "": "∅"}.get(token, token)


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
