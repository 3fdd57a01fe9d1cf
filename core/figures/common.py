"""What every figure shares: palettes, layouts, token axes.

Figures are pure functions, data in (tensors, arrays, frames), plotly Figure out; no streamlit, so
every chart is unit-tested by inspecting `fig.data` / `fig.layout`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

import plotly.graph_objects as go
import plotly.io as pio

from core.figures.margins import fit_margins, fitted_margin

SEQUENTIAL = "Blues"  # attention weights and other [0, 1] quantities
DIVERGING = "RdBu"  # differences and signed values, centred on 0
ALLOWED_COLOR = "#2E6DB4"  # "may attend", bars
MASKED_COLOR = "rgba(200, 200, 200, 0.35)"  # masked cells: visibly not the same as weight 0
TICK_LABELS_MAX = 64  # more tokens than this: label every k-th one
# Legends sit right of the plot, where plotly makes room for them: under the plot (y=-0.18) they
# landed on the x axis title, above it on the figure's title.
LEGEND_RIGHT = dict(orientation="v", yanchor="top", y=1.0, xanchor="left", x=1.02)


TITLE_WIDTH = 34  # characters per title line: a half-width column at 1024 px holds about this many (bold 14 px)


def figure_title(what: str, model: str | None = None, text: str | None = None, limit: int = 60) -> str:
    """'lm-learned · Layer 0, head 1 · “The students in the back…”': a chart's title that says which model and
    which input it shows, so that an exported PNG or SVG (the toolbar's camera), seen without the page around it,
    still says so (issue 63). Plain text: the figure functions escape their titles."""
    parts = [p for p in (model, what) if p]
    flat = " ".join((text or "").split())
    if flat:
        parts.append(f"“{flat[: limit - 1] + '…' if len(flat) > limit else flat}”")
    return " · ".join(parts)


def wrap_title(title: str, width: int = TITLE_WIDTH) -> str:
    """Break a long (already escaped) title at spaces with <br>: plotly cuts a title at the chart's edge."""
    import textwrap

    return "<br>".join(textwrap.wrap(title, width, break_long_words=False, break_on_hyphens=False)) or title


# Streamlit's light chart theme (Streamlit 1.67, read from a drawn chart's template), laid over
# plotly_white. Streamlit added it in the browser; charts are now shown with theme=None (one draw per
# change, core/figures/browser.py), so the look is ours: the same on the page, in exports and in tests.
_GREY, _LINE, _FONT = "#808495", "#e6eaf1", '"Source Sans", sans-serif'
# A numeric axis's tick labels: plotly.js's default ("hide past div") hides a label that passes the figure's edge, and
# finds such labels by measuring every label again after each one is placed (n² measurements per axis: ~40 ms of
# the browser's ~250 ms for the probe's six charts per new name, bench/README.md issue 45). Our margins are fitted
# to the labels (`fit_margins`, and plotly's automargin), so no label passes the edge and none would be hidden.
LABELS_FIT = "allow"
APP_LOOK: dict[str, Any] = dict(
    font=dict(color=_GREY, family=_FONT, size=12, weight=400),
    title=dict(font=dict(family=_FONT, size=16, color="#2F2D2B", weight=700), pad=dict(l=4), xanchor="left", x=0),
    legend=dict(title=dict(font=dict(size=12, color=_GREY), side="top"), valign="top",
                bordercolor="rgba(0,0,0,0)", borderwidth=0, font=dict(size=12, color="#262730")),
    margin=dict(pad=8, r=0, l=0),
    hoverlabel=dict(bgcolor="#FFFFFF", bordercolor="#DCD8D4", font=dict(color=_GREY, family=_FONT, size=12)),
    coloraxis=dict(colorbar=dict(thickness=16, xpad=24, ticklabelposition="outside", ticklabeloverflow=LABELS_FIT,
                                 outlinecolor="rgba(0,0,0,0)",
                                 outlinewidth=8, len=0.75, y=0.5745, title=dict(font=dict(color=_GREY, size=14)),
                                 tickfont=dict(color=_GREY, size=12))),
    xaxis=dict(zerolinecolor=_LINE, gridcolor=_LINE, showgrid=False, tickfont=dict(color=_GREY, size=12),
               tickcolor=_LINE, title=dict(font=dict(color=_GREY, size=14), standoff=20),
               minor=dict(gridcolor=_LINE), zeroline=False, automargin=True, ticklabeloverflow=LABELS_FIT),
    yaxis=dict(ticklabelposition="outside", zerolinecolor=_LINE, gridcolor=_LINE, tickfont=dict(color=_GREY, size=12),
               tickcolor=_LINE, title=dict(font=dict(color=_GREY, size=14), standoff=24),
               minor=dict(gridcolor=_LINE), automargin=True, ticklabeloverflow=LABELS_FIT),
)


APP_TEMPLATE = "attention_lab"  # app_template()'s name among plotly's registered templates


@functools.lru_cache(maxsize=1)
def app_template() -> go.layout.Template:
    """plotly_white with APP_LOOK over its layout; built (and validated) once, registered as APP_TEMPLATE."""
    template = go.layout.Template(pio.templates["plotly_white"])
    template.layout.update(APP_LOOK)
    for heatmap in template.data.heatmap:  # a heatmap's own colour bar (a shared coloraxis's bar takes APP_LOOK's)
        heatmap.colorbar.ticklabeloverflow = LABELS_FIT
    pio.templates[APP_TEMPLATE] = template
    return template


def use_app_template() -> None:
    """Make `app_template()` plotly's default template (plotly.io.templates.default), so that every figure
    built from now on wears it. plotly gives a new figure its default template as it is, already valid,
    where `fig.layout.template = ...` validates and deep-copies it (~30 ms a figure, several per rerun on the
    positional and probe pages; bench/browser_latency.py). Set before each figure is built, not once at
    import: Streamlit sets the default to its own when it is imported, so import order would decide."""
    app_template()
    if pio.templates.default != APP_TEMPLATE:
        pio.templates.default = APP_TEMPLATE


def finished(make: Callable[..., go.Figure]) -> Callable[..., go.Figure]:
    """Decorate every figure function: its figure leaves in plotly_white, with margins fitted to its labels."""
    @functools.wraps(make)
    def wrapper(*args, **kwargs) -> go.Figure:
        use_app_template()
        return fit_margins(make(*args, **kwargs))
    return wrapper


def built_fitted(make: Callable[..., go.Figure]) -> Callable[..., go.Figure]:
    """`finished` for a function that returns `unchecked_figure(...)` as it is: that call fitted the margins to the
    labels from the same dicts, so `fit_margins` reading every label again found nothing to grow (~0.5 ms of a new
    attention map's ~2.6 ms; bench/README.md, issue 45, session 15). A function that changes its figure after
    `unchecked_figure` uses `finished`. tests/test_rerun_elements.py checks that fit_margins leaves such figures as
    they are."""
    @functools.wraps(make)
    def wrapper(*args, **kwargs) -> go.Figure:
        use_app_template()
        return make(*args, **kwargs)
    return wrapper


@functools.lru_cache(maxsize=64)
def _grid_json(rows: int, cols: int, titles: tuple[str, ...], options: tuple[tuple[str, Any], ...]) -> str:
    import json

    from plotly.subplots import make_subplots

    layout = make_subplots(rows=rows, cols=cols, subplot_titles=list(titles) or None,
                           **dict(options)).layout.to_plotly_json()
    layout.pop("template", None)  # the figure built from this layout gets the default template: ours
    return json.dumps(layout)


def subplot_grid(rows: int, cols: int, titles=(), **options: Any) -> dict[str, Any]:
    """make_subplots' layout (axes, domains, panel titles) as a fresh plain dict, for figures built from
    one layout dict. Built once per shape and titles: make_subplots costs ~20 ms a call."""
    import json

    return json.loads(_grid_json(rows, cols, tuple(titles), tuple(sorted(options.items()))))


def base_layout(fig: go.Figure, title: str | None = None, height: int | None = None) -> go.Figure:
    fig.update_layout(**layout_base(title, height))
    return fig


def layout_base(title: str | None = None, height: int | None = None) -> dict[str, Any]:
    """What `base_layout` sets, as a plain layout dict (for `unchecked_figure`): the title wrapped, the height,
    margins with room for the title's lines, dark text."""
    title = wrap_title(title) if title else None
    lines = title.count("<br>") + 1 if title else 0
    layout = dict(margin=dict(l=10, r=10, t=20 + 22 * lines if title else 10, b=10), font=dict(color="#1F2328"))
    return {**({"title": dict(text=title)} if title else {}), **({"height": height} if height else {}), **layout}


def unchecked_figure(data: list[dict[str, Any]], layout: dict[str, Any]) -> go.Figure:
    """A Figure made in one step from plain trace dicts and a layout dict, which plotly does not check property by
    property. Checking them (`go.Heatmap(...)`, `fig.update_xaxes(...)`: each property validated, each magic
    underscore path parsed) was most of the cost of the figures a new probe name draws: ~10 ms a figure against
    ~1 ms (bench/README.md, issue 45). So the dicts must be as plotly would have made them: titles as
    dict(text=...), colour scales as lists (`colorscale`); tests/test_unchecked_figures.py builds each such figure
    checked too and compares the two."""
    layout = {**layout, "margin": fitted_margin(layout, data)}  # fitted here: `finished` then finds nothing to grow
    return go.Figure({"data": data, "layout": layout}, _validate=False)


@functools.lru_cache(maxsize=16)
def _scale(name: str) -> tuple[tuple[float, str], ...]:
    return tuple(tuple(stop) for stop in go.Heatmap(colorscale=name).colorscale)  # as plotly's check makes it


def colorscale(name: str) -> list[list]:
    """A named plotly colour scale as the [[position, colour], ...] list plotly's checks turn the name into."""
    return [list(stop) for stop in _scale(name)]


RUN_COLORS = (
    "#636EFA", "#EF553B", "#00CC96", "#AB63FA", "#FFA15A", "#19D3F3", "#FF6692", "#B6E880", "#FF97FF",
    "#FECB52", "#2E91E5", "#E15F99", "#1CA71C", "#FB0D0D", "#DA16FF", "#222A2A", "#B68100", "#750D86",
)  # plotly's qualitative palette, then Dark24's most distinct; repeats past 18 runs


def run_color(index: int) -> str:
    return RUN_COLORS[index % len(RUN_COLORS)]


def run_colors(names, fixed: Mapping[str, str] | None = None) -> dict[str, str]:
    """One colour per run NAME, the same on every chart and page: the palette slot is a hash of the
    name (crc32, stable across processes); two names of one chart that land on the same slot take the
    next free one (the later name moves), so a chart never shows two runs in one colour (up to 18).
    `fixed`: runs whose colour is decided elsewhere (a positional variant wears its scheme's colour,
    as on the positional page); every other run keeps clear of those colours, on this chart or not, so
    no other run wears a scheme's colour anywhere."""
    import zlib

    names = list(dict.fromkeys(str(n) for n in names))
    fixed = dict(fixed or {})
    colors: dict[str, str] = {name: fixed[name] for name in names if name in fixed}
    taken: set[int] = {RUN_COLORS.index(c) for c in fixed.values() if c in RUN_COLORS}
    for name in names:
        if name in fixed:
            continue
        slot = zlib.crc32(name.encode("utf-8")) % len(RUN_COLORS)
        for step in range(len(RUN_COLORS)):
            if (slot + step) % len(RUN_COLORS) not in taken:
                slot = (slot + step) % len(RUN_COLORS)
                break
        taken.add(slot)
        colors[name] = RUN_COLORS[slot]
        if len(taken) == len(RUN_COLORS):
            taken.clear()
    return colors


def index_axis(labels: list[str]) -> dict[str, Any]:
    """Numeric positions with text ticks: category axes would merge two equal labels into one."""
    import html

    return dict(tickmode="array", tickvals=list(range(len(labels))),
                ticktext=[html.escape(str(label)) for label in labels])


LOG_MANTISSAS = ((1, 1.5, 2, 3, 4, 5, 6, 7, 8), (1, 1.5, 2, 3, 5, 7), (1, 2, 3, 5), (1, 2, 5), (1, 3), (1,))


def log_axis(values, most: int = 8) -> dict[str, Any]:
    """A log axis whose tick labels are whole numbers ("20", "3"): left alone, plotly labels the ticks
    between decades by their first digit only ("2" for 20). 2 to `most` ticks from the finest 1-2-5 style
    series that fits the data's range (with plotly's padding); plotly's own ticks when none fits."""
    import math

    finite = [float(v) for v in values if v is not None and math.isfinite(float(v)) and float(v) > 0]
    if not finite:
        return dict(type="log")
    lo, hi = math.log10(min(finite)), math.log10(max(finite))
    pad = max(0.05 * (hi - lo), 0.02)  # a tick just outside the data still shows inside the padded range
    decades = range(math.floor(lo) - 1, math.ceil(hi) + 1)
    for mantissas in LOG_MANTISSAS:
        ticks = sorted({round(m * 10.0 ** k, 12) for k in decades for m in mantissas})
        shown = [t for t in ticks if lo - pad <= math.log10(t) <= hi + pad]
        if 2 <= len(shown) <= most:
            return dict(type="log", tickmode="array", tickvals=shown, ticktext=[f"{t:g}" for t in shown])
        if len(shown) < 2:  # a coarser series has fewer still
            break
    return dict(type="log")


def token_axis(labels: list[str], positions) -> dict[str, Any]:
    """Numeric positions labelled with (escaped) tokens, every k-th past TICK_LABELS_MAX; 12 px, dark.
    For charts whose x must stay numeric (lines over positions); heatmaps use `category_axis`."""
    import math

    n = len(positions)
    step = max(1, math.ceil(n / TICK_LABELS_MAX))
    shown = range(0, n, step)
    return dict(tickmode="array", tickvals=[int(positions[i]) for i in shown],
                ticktext=[labels[i] for i in shown], tickfont=TOKEN_FONT, showgrid=False, zeroline=False)


# Token axes of heatmaps are category axes: plotly then spaces the labels by their font size in the
# browser, drops every k-th label when they would overlap and turns x labels 90 degrees when they do
# not fit flat (measured at 1024x768 in tests/browser). Categories must be distinct, so a repeated
# token gets zero-width spaces appended: it looks the same and stays its own row.
TOKEN_FONT = dict(size=13, color="#1F2328")  # >= 12 px and dark: readable on a projector
ZERO_WIDTH = "\u200b"


def token_categories(labels: list[str]) -> list[str]:
    seen: dict[str, int] = {}
    out = []
    for label in labels:
        count = seen.get(label, 0)
        seen[label] = count + 1
        out.append(label + ZERO_WIDTH * count)
    return out


def category_axis(**extra: Any) -> dict[str, Any]:
    return dict(type="category", tickmode="auto", tickfont=TOKEN_FONT, showgrid=False, zeroline=False,
                automargin=True, **extra)
