"""Margins a figure needs, estimated from its own labels, so the browser draws it once.

Plotly's automargin draws a chart, measures its tick labels, axis titles, colour bar and legend, and
when they need more room than the margin it grows the margin and draws the whole chart again. Every
chart of the app started at 10 px margins, so every chart was drawn twice: about 20 ms a chart in
headless Chromium, most of a rerun's budget on pages with five charts (bench/browser_latency.py).
`fit_margins` asks for the room up front; automargin stays on, so an estimate that falls short costs
only the second draw, never a clipped label. Estimates err a few pixels large: plotly measures with
the browser's fonts, we with average character widths.
"""

from __future__ import annotations

import html
import math
import re
import unicodedata
from collections.abc import Iterable
from typing import Any

import numpy as np
import plotly.graph_objects as go

EM = 0.62  # a Latin character's average advance, in font sizes (wide East Asian characters: 1.0)
LEGEND_EM, LEGEND_SIZE = 0.45, 12  # legend names are mostly lower case, in Streamlit's narrow 12 px font
TICK_SIZE, TITLE_SIZE = 14, 15  # font sizes where a figure leaves them unset (Streamlit's theme, rounded up)
AXIS_PAD = 22  # tick label to axis line, and the margin's own padding
TITLE_GAP = 18  # axis title to tick labels
LEGEND_SYMBOL = 56  # a legend entry's line sample, gaps and the legend's padding (measured: 'head 0' takes 88 px)
LEGEND_ROW, LEGEND_UNDER = 19, 28  # a horizontal legend under the plot: px per row, and its offset
LEGEND_ROW_PX = 150  # names one such row holds under a third-of-a-projector column (1024 px, two columns)
CORNER = 0.03  # a colour bar or legend at x = 1.02 starts ~2 % of the plot width right of it
ASSUMED_PLOT_PX = 600  # plot width that offset is taken of: a half-screen column, most charts' place (a
# full-width chart at 1400 px may need ~10 px more: one redraw; more here would squeeze narrow columns)
TAGS = re.compile(r"<[^>]+>")


def text_width(text: object, size: float, em: float = EM) -> float:
    """Pixels one line of label text takes at font `size` (HTML tags and entities as plotly shows them)."""
    lines = TAGS.sub("\n", str(text)).split("\n")
    widest = 0.0
    for line in lines:
        line = html.unescape(line).replace("\u200b", "")
        units = sum(1.0 if unicodedata.east_asian_width(c) in "WF" else em for c in line)
        widest = max(widest, units)
    return widest * size


def _font_size(font: Any, default: float) -> float:
    size = (font or {}).get("size") if isinstance(font, dict) else None
    return float(size) if size else default


def _title(axis: dict) -> str:
    title = axis.get("title")
    return str((title or {}).get("text") or "") if isinstance(title, dict) else str(title or "")


def _number_chars(values: Iterable[float], tickformat: str | None, log: bool) -> int:
    """Characters of the longest numeric tick label plotly writes for this data range."""
    finite = [float(v) for v in values if v is not None and np.isfinite(v)]
    if tickformat and tickformat.endswith("%"):
        return 4  # "100%"
    if not finite:
        return 3
    top = max(abs(v) for v in finite)
    sign = 1 if min(finite) < 0 else 0
    if log or top >= 1000:
        return 4 + sign  # "1k", "200k", "1.5M"
    if top >= 10:
        return int(math.log10(top)) + 1 + sign + (2 if max(finite) - min(finite) < 10 else 0)
    return 4 + sign  # "0.25", "2.5"


def _values(traces: list[dict], axis_letter: str, axis_id: str) -> list[Any]:
    """Every x (or y) value of the traces drawn on one axis."""
    out: list[Any] = []
    for trace in traces:
        if trace.get(f"{axis_letter}axis", axis_letter) == axis_id and trace.get(axis_letter) is not None:
            out += list(np.asarray(trace[axis_letter], dtype=object).ravel())
    return out


def _tick_labels_px(axis: dict, traces: list[dict], letter: str, axis_id: str) -> tuple[float, float, int]:
    """(widest tick label in px, its font size, how many labels) of one axis; (0, size, 0) when hidden."""
    size = _font_size(axis.get("tickfont"), TICK_SIZE)
    if axis.get("showticklabels") is False or axis.get("visible") is False:
        return 0.0, size, 0
    values = _values(traces, letter, axis_id)
    if axis.get("ticktext") is not None:
        labels = [str(t) for t in axis["ticktext"]]
    elif axis.get("type") == "category" or any(isinstance(v, str) for v in values):
        labels = [str(v) for v in values]
    else:
        numbers = [float(v) for v in values + list(axis.get("range") or [])
                   if isinstance(v, (int, float, np.number)) and not isinstance(v, bool)]
        chars = _number_chars(numbers, axis.get("tickformat"), axis.get("type") == "log")
        return chars * EM * size, size, 6
    return max((text_width(t, size) for t in labels), default=0.0), size, len(set(labels))


def _edge_axes(layout: dict, letter: str, far_side: str) -> Iterable[tuple[str, dict]]:
    """(axis id, axis) of the `letter` axes on the figure's outer left or bottom edge, not between
    subplots and not moved to `far_side`."""
    other = "y" if letter == "x" else "x"
    for key, axis in layout.items():
        if not key.startswith(f"{letter}axis") or not isinstance(axis, dict) or axis.get("side") == far_side:
            continue
        anchor = axis.get("anchor") or other
        domain = layout.get(f"{anchor[0]}axis{anchor[1:]}", {}).get("domain") or [0, 1]
        if float(domain[0]) < 0.02:
            yield letter + key[5:], axis


def _title_px(axis: dict) -> float:
    """Room an axis title takes beside its tick labels (0 without one)."""
    if not _title(axis):
        return 0.0
    title = axis.get("title")
    return _font_size(title.get("font") if isinstance(title, dict) else None, TITLE_SIZE) * 1.2 + TITLE_GAP


def _left(layout: dict, traces: list[dict]) -> float:
    need = 0.0
    for axis_id, axis in _edge_axes(layout, "y", "right"):
        width, _, _ = _tick_labels_px(axis, traces, "y", axis_id)
        need = max(need, width + AXIS_PAD + _title_px(axis))
    return need


def _bottom(layout: dict, traces: list[dict]) -> float:
    need = 0.0
    for axis_id, axis in _edge_axes(layout, "x", "top"):
        width, size, count = _tick_labels_px(axis, traces, "x", axis_id)
        angle = axis.get("tickangle")
        # plotly first thins crowded labels where it picks the ticks; only long ones that still collide
        # are turned. Labels at given positions (token axes) are never thinned: crowded, they turn.
        thinned = axis.get("tickvals") is None
        crowded = (width > 2.5 * size or not thinned) and count * (width + size) > ASSUMED_PLOT_PX * 0.5
        turned = angle in (90, -90) or (angle in (None, "auto") and crowded)
        labels = max(width, size * 1.3) if turned else (size * 1.3 if count else 0.0)
        need = max(need, labels + AXIS_PAD + _title_px(axis))
    legend = layout.get("legend") or {}
    if legend.get("orientation") == "h" and float(legend.get("y", 1.0)) < 0:  # a legend under the plot
        size = _font_size(legend.get("font"), LEGEND_SIZE)
        names = [text_width(t["name"], size, LEGEND_EM) + LEGEND_SYMBOL for t in _named(traces)]
        need += LEGEND_UNDER + LEGEND_ROW * max(1, math.ceil(sum(names) / LEGEND_ROW_PX))
    return need


def _named(traces: list[dict]) -> list[dict]:
    """The traces a legend lists."""
    return [t for t in traces if t.get("showlegend") is not False and t.get("name")]


def _right(layout: dict, traces: list[dict]) -> float:
    """Colour bars and legends placed right of the plot (x >= 1)."""
    need = 0.0
    bars = [t for t in traces if t.get("type") in ("heatmap", "contour") and t.get("showscale") is not False
            and not t.get("coloraxis")]
    scales = [(t.get("colorbar") or {}, [t.get("zmin"), t.get("zmax")] if t.get("zmax") is not None else
               np.asarray(t.get("z") if t.get("z") is not None else [0.0], dtype=float).ravel())
              for t in bars]
    for key, axis in layout.items():
        if key.startswith("coloraxis") and isinstance(axis, dict) and axis.get("showscale") is not False:
            scales.append((axis.get("colorbar") or {}, [axis.get("cmin"), axis.get("cmax")]))
    for colorbar, values in scales:
        size = _font_size(colorbar.get("tickfont"), TICK_SIZE)
        labels = _number_chars([v for v in values if v is not None], colorbar.get("tickformat"), False) * EM * size
        title = colorbar.get("title")
        side = (title or {}).get("side") if isinstance(title, dict) else None
        title = (title or {}).get("text") if isinstance(title, dict) else title
        pad = 2 * colorbar.get("xpad", 10)
        # a title on the bar's right side is turned upright beside the labels: one line wide, not its length
        upright = TITLE_SIZE * 1.2 if side == "right" and title else 0.0
        width = max(colorbar.get("thickness", 30) + pad + labels + upright,
                    text_width(title, TITLE_SIZE) + pad if title and side != "right" else 0)
        need = max(need, CORNER * ASSUMED_PLOT_PX + width)
    legend = layout.get("legend") or {}
    named = _named(traces)
    shown = layout.get("showlegend", len(named) > 1)
    if shown and named and legend.get("orientation", "v") == "v" and float(legend.get("x", 1.02)) >= 1.0:
        size = _font_size(legend.get("font"), LEGEND_SIZE)
        width = max(text_width(t["name"], size, LEGEND_EM) for t in named) + LEGEND_SYMBOL
        need = max(need, CORNER * ASSUMED_PLOT_PX + width)
    return need


# What fit_margins reads of a trace (the labels on its axes, its legend entry, its colour bar).
TRACE_KEYS = ("type", "name", "showlegend", "x", "y", "xaxis", "yaxis", "z", "zmin", "zmax", "showscale",
              "coloraxis", "colorbar")


def trace_view(trace) -> dict[str, Any]:
    """The TRACE_KEYS a trace has set, read through plotly's public item access: its arrays as they are,
    where `trace.to_plotly_json()` deep-copies them (~50 ms for a 512 x 512 z held as lists)."""
    view: dict[str, Any] = {}
    for key in TRACE_KEYS:
        if key not in trace:  # not a property of this trace type
            continue
        value = trace[key]
        if hasattr(value, "to_plotly_json"):  # a compound property (colorbar): a small dict
            value = value.to_plotly_json()
        if value is not None and not (isinstance(value, dict) and not value):
            view[key] = value
    return view


# What fit_margins reads of the layout: its axes, colour axes and legend, and the margins asked for.
LAYOUT_PREFIXES = ("xaxis", "yaxis", "coloraxis", "legend", "showlegend", "margin")


def layout_view(layout) -> dict[str, Any]:
    """The layout properties named by LAYOUT_PREFIXES that are set, as plain dicts, through plotly's public
    API (iterating a layout names every property, numbered axes included). Not `layout.to_plotly_json()`:
    it deep-copies the whole template too, the most of a small figure's time here."""
    view: dict[str, Any] = {}
    for key in layout:
        if not key.startswith(LAYOUT_PREFIXES):
            continue
        value = layout[key]
        if hasattr(value, "to_plotly_json"):
            value = value.to_plotly_json()
        if value is not None and not (isinstance(value, dict) and not value):
            view[key] = value
    return view


def fitted_margin(layout: dict[str, Any], traces: list[dict[str, Any]]) -> dict[str, Any]:
    """The layout's margin with its left, right and bottom grown to what the labels need (never shrunk), from a
    plain layout dict and trace dicts (those `layout_view` and `trace_view` read, or a figure's own dicts)."""
    margin = layout.get("margin") or {}
    wanted = {"l": _left(layout, traces), "r": _right(layout, traces), "b": _bottom(layout, traces)}
    return {**margin, **{side: math.ceil(max(px, float(margin.get(side, 0) or 0))) for side, px in wanted.items()}}


def fit_margins(fig: go.Figure) -> go.Figure:
    """Grow the figure's left, right and bottom margins to what its labels need (never shrink them)."""
    layout = layout_view(fig.layout)
    margin, grown = layout.get("margin") or {}, fitted_margin(layout, [trace_view(trace) for trace in fig.data])
    if any(margin.get(side) != grown[side] for side in "lrb"):  # a figure fitted already is left as it is
        fig.update_layout(margin={side: grown[side] for side in "lrb"})
    return fig

