"""Attention maps: one head, every head (model view), one token."""

from __future__ import annotations

import html
import math
from typing import Any

import plotly.graph_objects as go

from core.figures.common import (
    DIVERGING,
    LEGEND_RIGHT,
    SEQUENTIAL,
    TITLE_WIDTH,
    TOKEN_FONT,
    built_fitted,
    category_axis,
    colorscale,
    finished,
    subplot_grid,
    token_axis,
    token_categories,
    unchecked_figure,
    wrap_title,
)
from core.text import visible_token

# Token axes are category axes of distinct labels (core.figures.common.category_axis): the browser
# thins and turns them so they never overlap. Masked cells are NaN drawn over a grey plot background:
# "not allowed to look" must never read as "looked with weight 0". Which position a row or column is
# stays in the trace's `meta["positions"]`.
# Figures are built from one layout dict, without a named template: `update_layout` and template
# validation cost 5-10 ms each per figure, more than this page's whole rerun budget (bench/), and
# Streamlit's chart theme (plotly's default template under streamlit) styles the figure anyway.

ATTENTION_MASKED_COLOR = "rgb(200, 200, 200)"  # MASKED_COLOR made opaque: distinct from weight 0's white
HOVER_TOKENS_MAX = 32  # up to this many tokens the hover also names positions (a text per cell is
# 2/3 of a 60-token map's JSON, 110 KB, which a projector laptop parses on every rerun); past it,
# the hover names the two tokens from the category axes
ROW_PX = 18  # a 13 px label's box is 17 px high: every row labelled up to (900 - margins) / 18 tokens
KEY_FONT = {**TOKEN_FONT, "size": 12}  # turned upright, a 12 px label's box is 16 px wide: 17 px a column
TITLE_PX = 9  # px per character of a bold 16 px title
PAGE_PX, COLORBAR_PX, COLUMN_PX = 565, 94, 17  # at 1024x768 (sidebar open): the page, a colour bar, a labelled key


def columns_that_fit(labels: list[str], colorbar: bool = True, query_labels: bool = True, room: int = PAGE_PX) -> int:
    """How many keys get every label at 1024x768 in `room` px, beside the query labels (~9 px a character, the
    longest up to 20, measured in Chromium) and the colour bar: 20 beside 'students', 18 beside
    'mathematician'. The attention page sizes its window of tokens by it."""
    longest = min(20, max((len(label) for label in labels), default=1))
    plot = room - (9 * longest + 40 if query_labels else 20) - (COLORBAR_PX if colorbar else 10)
    return max(plot // COLUMN_PX, 1)


def attention_height(n_tokens: int) -> int:
    return int(min(900, max(360, 170 + ROW_PX * n_tokens)))


def rows_have_room(height: int, labels: list[str]) -> bool:
    """Whether every query's label fits beside its row: the plot is the height less the title, the margins and
    the key labels under it (turned, ~7 px a character)."""
    plot = height - 100 - 7 * min(20, max((len(label) for label in labels), default=1))
    return plot / max(len(labels), 1) >= ROW_PX - 0.5


def attention_layout(title: str | None, height: int, title_chars: int = TITLE_WIDTH, **extra: Any) -> dict[str, Any]:
    """base_layout's settings as a dict (see the section comment for why not base_layout); `title_chars`: the
    title's line length (a full-width map holds about 60 characters at 1024x768, a half-width one 34)."""
    import html

    text = wrap_title(html.escape(title), title_chars) if title else None
    layout = dict(title=dict(text=text) if text else None, height=height,
                  margin=dict(l=10, r=10, t=20 + 22 * (text.count("<br>") + 1) if text else 10, b=10),
                  paper_bgcolor="white",
                  plot_bgcolor=ATTENTION_MASKED_COLOR, font=dict(color="#1F2328"))
    return {**layout, **extra}


def _labels(tokens: list[str], positions) -> list[str]:
    import html

    # quote=False: plotly.js reads &lt; &gt; &amp; but writes &quot; and &#x27; out literally
    return [html.escape(visible_token(tokens[int(p)]), quote=False) for p in positions]


@built_fitted  # unchecked_figure fits its margins
def attention_heatmap(weights, tokens: list[str], allowed=None, positions=None, title: str | None = None,
                      diverging: bool = False, zmax: float | None = None,
                      height: int | None = None, colorbar: bool = True, query_labels: bool = True,
                      hovers: list[str] | None = None, room: int = PAGE_PX) -> go.Figure:
    """One (T, T) map: query tokens as rows, key tokens as columns.

    `tokens` are display labels for positions 0..; `positions` (default 0..T-1) says which positions
    the rows/columns are (after hiding tokens); they are in `fig.data[0].meta["positions"]`, and x / y
    are the tokens as distinct categories. fig.data[0].z is `weights` with NaN where `allowed` is
    False; the hover shows the exact weight. `zmax` fixes the colour scale (e.g. shared by two maps);
    two maps side by side can share one colour bar (`colorbar=False` on the left one) and one set of query
    labels (`query_labels=False` on the right one), so both plots get the width those took. `hovers` (one per
    position, e.g. the pieces behind a joined word) name each row and column on hover. `room`: the px the map has at
    1024x768 (half for two maps side by side), which says whether every key can be labelled.
    """
    import html

    import numpy as np

    weights = np.asarray(weights)
    T = weights.shape[-1]
    positions = np.arange(T) if positions is None else np.asarray(positions)
    z = weights if allowed is None else np.where(allowed, weights, np.nan)
    labels = _labels(tokens, positions)
    finite = np.abs(z[np.isfinite(z)])
    top = float(zmax) if zmax is not None else (float(finite.max()) if finite.size else 1.0)
    top = max(top, 1e-9)
    scale = dict(colorscale=colorscale(DIVERGING), zmid=0.0, zmin=-top, zmax=top) if diverging else \
        dict(colorscale=colorscale(SEQUENTIAL), zmin=0.0, zmax=top)
    value = "difference" if diverging else "weight"
    if hovers is not None:
        names = [html.escape(hovers[int(p)], quote=False) for p in positions]
        text = [[f"query {names[i]} → key {names[j]}" for j in range(len(positions))] for i in range(len(positions))]
        hover = f"%{{text}}<br>{value} %{{z:.7g}}<extra></extra>"
    elif T <= HOVER_TOKENS_MAX:
        text = [[f"query {int(q)} {labels[i]} → key {int(k)} {labels[j]}" for j, k in enumerate(positions)]
                for i, q in enumerate(positions)]
        hover = f"%{{text}}<br>{value} %{{z:.7g}}<extra></extra>"
    else:
        text = None
        hover = f"query %{{y}} → key %{{x}}<br>{value} %{{z:.7g}}<extra></extra>"
    categories = token_categories(labels)
    height = height or attention_height(T)
    yaxis = category_axis(title=dict(text="query" if query_labels else ""), autorange="reversed",
                          showticklabels=query_labels)
    title_chars = max(TITLE_WIDTH, room // TITLE_PX)
    if rows_have_room(height, labels):  # every query labelled: plotly's own thinning dropped every other one
        yaxis.update(tickmode="linear", dtick=1)
    # a title of more lines (the model and the sentence: issue 63) makes the figure taller, 22 px a line, not the
    # plot shorter: squeezed, the rows' labels overlapped (tests/browser/test_projector.py)
    height += 22 * ((wrap_title(html.escape(title), title_chars).count("<br>") + 1 if title else 1) - 1)
    xaxis = category_axis(title=dict(text="key"))
    if T <= columns_that_fit(labels, colorbar, query_labels, room):  # every key labelled, upright (the page's window
        xaxis.update(tickmode="linear", dtick=1, tickangle=-90, tickfont=KEY_FONT)  # fits); else plotly thins them
    layout = attention_layout(title, height, title_chars, xaxis=xaxis, yaxis=yaxis)
    if layout["title"] is None:
        del layout["title"]
    trace = dict(type="heatmap", z=z, x=categories, y=categories, hovertemplate=hover, hoverongaps=False,
                 colorbar=dict(thickness=12, title=dict(text=value), tickfont=dict(TOKEN_FONT)),
                 meta={"positions": [int(p) for p in positions]}, showscale=colorbar, **scale,
                 **({} if text is None else {"text": text}))
    # one step, unchecked: this map is built for every new sentence on every page (tests/test_unchecked_figures.py)
    return unchecked_figure([trace], layout)


MODEL_VIEW_LABEL_PX = ROW_PX  # a query label's box in the model view's panels (13 px text, 17 px box: 12 let them
# touch in Chromium, tests/browser/test_projector.py)


def model_view_row_step(n_rows: int, panel_px: int) -> int:
    """Label every k-th row of a model-view panel: 1 where a label fits beside each row."""
    return max(1, math.ceil(MODEL_VIEW_LABEL_PX * n_rows / max(panel_px, 1)))


@finished
def attention_model_view(attention, allowed=None, focus: tuple[int, int] | None = None,
                         title: str | None = None, tokens: list[str] | None = None,
                         head_notes: dict[tuple[int, int], str] | None = None) -> go.Figure:
    """Small multiples: every layer (rows) x head (columns) on one shared colour scale (0 to the largest
    weight, one colour bar); tokens label the first column's rows and the last row's columns.

    The focused (layer, head) gets a frame. `head_notes`: a line per (layer, head) for its hover (its role on
    repeated random tokens, core.lens.heads). Trace order is layer-major: data[l * n_head + h]. The
    grid comes from make_subplots once, as a dict; per-axis `update_*` calls would cost ~0.2 s at 32 heads.
    """
    import numpy as np
    attention = np.asarray(attention)
    L, H, T, _ = attention.shape
    labels = _labels(tokens, range(T)) if tokens is not None else [str(i) for i in range(T)]
    categories = token_categories(labels)
    cell = max(90, min(170, 1100 // H))  # px per panel row
    # taller, so that each row has a label: up to twice, and always for the 20 tokens of a long input's window
    cell = max(cell, min(MODEL_VIEW_LABEL_PX * T, max(2 * cell, MODEL_VIEW_LABEL_PX * 20)))
    grid = subplot_grid(L, H, [f"L{l} H{h}" for l in range(L) for h in range(H)],
                        horizontal_spacing=min(0.02, 0.2 / H), vertical_spacing=min(0.08, 0.4 / L))
    every = model_view_row_step(T, cell)  # every row labelled where a label fits beside it (issue 63)
    for key in grid:
        if key.startswith(("xaxis", "yaxis")):
            n = int(key[5:] or 1) - 1
            l, h = divmod(n, H)
            shown = (l == L - 1) if key.startswith("x") else (h == 0)
            grid[key].update(category_axis(showticklabels=shown, ticks=""))
            if key.startswith("y"):  # a label every `every` rows (plotly's own thinning let 13 px labels touch)
                grid[key].update(autorange="reversed", tickmode="linear", tick0=0, dtick=every)
    # said where the picture is, so that an exported PNG says it too
    why = (f"Every {every} rows labelled: {T} queries in {cell} px panels leave {cell / T:.0f} px a row and a label "
           f"needs {MODEL_VIEW_LABEL_PX} (the single-head view labels each)." if every > 1 else None)
    for note in grid.get("annotations", []):
        note["font"] = dict(size=13, color="#1F2328")
    z_all = attention if allowed is None else np.where(allowed, attention, np.nan)
    top = float(np.nanmax(z_all)) if np.isfinite(z_all).any() else 1.0
    traces = []
    for l in range(L):
        for h in range(H):
            n = l * H + h + 1
            note = (head_notes or {}).get((l, h))
            role = f"<br>{html.escape(note)}" if note else ""
            traces.append(go.Heatmap(
                z=z_all[l, h], x=categories, y=categories, xaxis=f"x{n if n > 1 else ''}",
                yaxis=f"y{n if n > 1 else ''}", coloraxis="coloraxis", hoverongaps=False,
                hovertemplate=f"layer {l} head {h}{role}<br>query %{{y}} → key %{{x}}<br>weight %{{z:.7g}}"
                              "<extra></extra>"))
    shapes = []
    if focus is not None and 0 <= focus[0] < L and 0 <= focus[1] < H:
        n = focus[0] * H + focus[1] + 1
        suffix = "" if n == 1 else str(n)
        shapes.append(dict(type="rect", xref=f"x{suffix} domain", yref=f"y{suffix} domain", x0=-0.04,
                           x1=1.04, y0=-0.04, y1=1.04, line=dict(color="crimson", width=3)))
    coloraxis = dict(colorscale=SEQUENTIAL, cmin=0.0, cmax=max(top, 1e-9),
                     colorbar=dict(thickness=12, xpad=10, title=dict(text="weight"), tickfont=TOKEN_FONT))
    # xpad set: Streamlit's theme pads a coloraxis bar by 2 x 32 px, room fit_margins does not expect
    layout = {**grid, **attention_layout(title, 90 + L * (cell + 30), PAGE_PX // TITLE_PX, shapes=shapes,
                                         coloraxis=coloraxis)}
    lines = [layout["title"]["text"]] if layout.get("title") else []
    if why:
        lines += [f"<span style='font-size:12px;font-weight:400'>{part}</span>"
                  for part in wrap_title(html.escape(why), 110).split("<br>")]
    if lines:
        layout["title"] = dict(text="<br>".join(lines))
    else:
        layout.pop("title", None)
    rows = sum(line.count("<br>") + 1 for line in lines)
    layout["height"] += 22 * rows
    layout["margin"] = dict(l=10, r=10, t=30 + 22 * rows, b=10)
    return go.Figure(data=traces, layout=layout)


@finished
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
    labels = [html.escape(visible_token(t), quote=False) for t in tokens[:T]]
    traces = [go.Scatter(x=positions, y=weights[h] if allowed_row is None else
                         np.where(allowed_row, weights[h], np.nan),
                         mode="lines+markers", name=f"head {h}", marker=dict(size=5), connectgaps=False,
                         hovertemplate=f"head {h}<br>key %{{x}}<br>weight %{{y:.7g}}<extra></extra>")
               for h in range(H)]
    layout = attention_layout(
        title, 420, PAGE_PX // TITLE_PX, plot_bgcolor="white", hovermode="closest",
        legend=LEGEND_RIGHT,
        shapes=[dict(type="line", xref="x", yref="paper", x0=int(query), x1=int(query), y0=0, y1=1,
                     line=dict(color="crimson", dash="dot", width=1))],
        xaxis=dict(title=dict(text="key"), tickangle=-90, **token_axis(labels, positions)),
        yaxis=dict(title=dict(text="attention weight"), rangemode="tozero"))
    return go.Figure(data=traces, layout=layout)
