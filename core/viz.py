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
