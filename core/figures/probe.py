"""Birthplace probe: candidates, attention at the answer, dev-set error analysis."""

from __future__ import annotations

import math
from typing import Any

import plotly.graph_objects as go

from core.figures.common import (
    ALLOWED_COLOR,
    LEGEND_RIGHT,
    SEQUENTIAL,
    TOKEN_FONT,
    base_layout,
    built_fitted,
    colorscale,
    finished,
    index_axis,
    layout_base,
    run_colors,
    subplot_grid,
    unchecked_figure,
)
from core.lens.probe.answers import AMONG_CANDIDATES
from core.text import visible_token

PROBE_CATEGORY_COLORS = {
    "retrieved": "#1CA71C", "wrong despite evidence": "#EF553B", "correct by prior": "#FFA15A",
    "unseen name": "#AB63FA", "wrong, no evidence": "#7F7F7F",
}  # keys: core.lens.probe.corpus.CATEGORIES
PROBE_GREEDY_COLOR = "#EF553B"
PROBE_TRUTH_COLOR = "#1CA71C"
PROBE_TRAINING_COLOR = "#7F7F7F"


@built_fitted  # unchecked_figure fits its margins
def candidate_bars(places: list[str], probabilities, greedy: str | None = None, truth: str | None = None,
                   title: str | None = None) -> go.Figure:
    """Top candidates as horizontal bars (best on top), probability normalised over the candidate list.
    The greedy answer is red, the true place green (also when it is the greedy answer), the rest blue; bar
    text is the percentage."""
    import html

    probabilities = [float(p) for p in probabilities]
    colors = [PROBE_TRUTH_COLOR if p == truth else PROBE_GREEDY_COLOR if p == greedy else ALLOWED_COLOR
              for p in places]
    # one mark a bar: a correct greedy answer is simply the true place (the answers table says it was greedy);
    # "X (true) (greedy)" left the bars ~60 px at 1024 px and pushed the axis title out of the chart
    marks = [" (true)" if p == truth else " (greedy)" if p == greedy else "" for p in places]
    labels = [p + m for p, m in zip(places, marks)]
    bars = dict(
        type="bar", x=probabilities, y=list(range(len(places))), orientation="h", marker=dict(color=colors),
        # beside the bar in the axis font: inside, plotly shrinks the label to the bar (~8 px on a projector)
        text=[f"{100 * p:.1f}%" for p in probabilities], textposition="outside", textfont=dict(TOKEN_FONT),
        cliponaxis=False, customdata=[html.escape(label) for label in labels],
        hovertemplate="%{customdata}: %{x:.2%}<extra></extra>")
    layout = layout_base(html.escape(title) if title else None, 90 + 26 * max(len(places), 1))
    layout.update(yaxis=dict(autorange="reversed", **index_axis(labels)),  # index_axis escapes
                  # room right of 100 % for a label; two title lines: one ran past the half column at 1024 px
                  # ("share among the candida")
                  xaxis=dict(title=dict(text=AMONG_CANDIDATES.replace(" the ", "<br>the ")), range=[0, 1.25],
                             tickvals=[0, 0.5, 1], tickformat=".0%"))
    return unchecked_figure([bars], layout)


STRIP_LABELS = 22  # key labels the answer's attention strip names at most (~400 px of plot at 1024x768)


@built_fitted  # unchecked_figure fits its margins
def answer_attention_heatmap(weights, tokens: list[str], row_labels: list[str],
                             title: str | None = None, unit: str = "character") -> go.Figure:
    """(rows, T): where the last prompt position (⁇, which predicts the answer's first `unit`: a character,
    or a piece of a subword vocabulary) looks, one row per layer (mean over heads) or per head.
    fig.data[0].z is `weights`."""
    import html

    import numpy as np

    weights = np.asarray(weights, dtype=float)
    labels = [html.escape(visible_token(t)) for t in tokens]
    rows = [html.escape(r) for r in row_labels]
    text = [[f"{row}: key {j} '{label}'" for j, label in enumerate(labels)] for row in rows]
    strip = dict(
        type="heatmap", z=weights, x=list(range(weights.shape[1])), y=list(range(weights.shape[0])),
        colorscale=colorscale(SEQUENTIAL), zmin=0.0, zmax=max(float(weights.max()) if weights.size else 1.0, 1e-9),
        text=text, hovertemplate="%{text}<br>weight %{z:.4f}<extra></extra>", colorbar=dict(thickness=12))
    # every k-th key labelled, upright: at 1024x768 the strip's plot is ~400 px, 16 px a 12 px label turned upright;
    # all of a long name's 38 labels, turned by the browser, ran into each other (issue 41)
    step = max(1, math.ceil(len(labels) / STRIP_LABELS))
    shown = [*range(len(labels) - 1, -1, -step)][::-1]  # from the last key (the MASK) back: it is always named
    # At least four rows' height: with a 2-layer model's two rows the colour bar had 57 px for its ticks.
    layout = layout_base(html.escape(title) if title else None, 140 + 28 * max(weights.shape[0], 4))
    axis_title = f"prompt {unit} (key)" + (f", one in {step} labelled" if step > 1 else "")
    layout.update(xaxis=dict(title=dict(text=axis_title),
                             tickmode="array", tickvals=shown, ticktext=[labels[i] for i in shown], tickangle=-90,
                             tickfont={**TOKEN_FONT, "size": 12}, showgrid=False, zeroline=False),
                  yaxis=dict(autorange="reversed", **index_axis(row_labels)))
    return unchecked_figure([strip], layout)


@finished
def home_share_bars(models: list[str], shares: list[float], chance: float, title: str | None = None) -> go.Figure:
    """One bar per model: the share of its answers for names nobody wrote about that are a city of the name's
    country; a dashed line at `chance` (a model ignoring the name, drawing from the training labels)."""
    import html

    colors = run_colors(models)
    fig = go.Figure(go.Bar(
        x=shares, y=list(range(len(models))), orientation="h", marker_color=[colors[m] for m in models],
        text=[f"{s:.0%}" for s in shares], textposition="outside", cliponaxis=False,
        customdata=[html.escape(m) for m in models], meta={"kind": "home share"},
        hovertemplate="%{customdata}: %{x:.1%} in the name's country<extra></extra>"))
    fig.add_vline(x=chance, line=dict(color="black", dash="dash", width=2))
    fig.add_annotation(x=chance, y=1, yref="paper", yanchor="bottom", text=f"chance {chance:.0%}",
                       showarrow=False, font=dict(size=12))
    fig.update_yaxes(autorange="reversed", **index_axis(models))
    top = max([chance, *shares]) if shares else 1
    fig.update_xaxes(title="answers that are a city of the name's country", range=[0, min(1.0, top * 1.25 + 0.05)],
                     tickformat=".0%")
    fig = base_layout(fig, html.escape(title) if title else None, 150 + 40 * max(len(models), 1))
    fig.update_layout(showlegend=False, margin=dict(t=fig.layout.margin.t + 20))
    return fig


@finished
def place_share_bars(shares, title: str | None = None) -> go.Figure:
    """Grouped bars: share of each place (rows of `shares`) per column (training labels, then one per
    model). `shares` is `core.lens.probe.fabricated.place_shares`' frame."""
    import html

    fig = go.Figure()
    places = [html.escape(str(p)) for p in shares.index]
    for i, column in enumerate(shares.columns):
        name = html.escape(str(column))
        color = PROBE_TRAINING_COLOR if i == 0 else run_colors(shares.columns[1:])[str(column)]
        fig.add_trace(go.Bar(x=list(range(len(places))), y=shares[column].tolist(), name=name,
                             marker_color=color, customdata=places, meta={"column": str(column)},
                             hovertemplate=f"{name}<br>%{{customdata}}: %{{y:.1%}}<extra></extra>"))
    fig.update_xaxes(tickangle=-90, **index_axis(list(shares.index)))  # at -45 neighbours overlapped at 1024 px
    fig.update_yaxes(title="share of answers", tickformat=".0%")
    base_layout(fig, html.escape(title) if title else None, 420)
    fig.update_layout(barmode="group", legend=LEGEND_RIGHT)
    return fig


@finished
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
    fig.update_xaxes(title="predicted place", tickangle=-45, **index_axis(cols))
    fig.update_yaxes(title="locale of the name", autorange="reversed", **index_axis(rows))
    return base_layout(fig, html.escape(title) if title else None, 160 + 26 * max(len(rows), 1))


@finished
def reliability_figure(tables: dict[str, Any], title: str | None = None,
                       confidence: str = "confidence (probability of the greedy answer)") -> go.Figure:
    """Accuracy per confidence bin, one bar group per model (bar text = questions in the bin), over a
    dotted diagonal (perfect calibration). `tables`: model -> `core.lens.probe.dev_set.reliability_table` frame."""
    import html

    fig = go.Figure()
    for model, table in tables.items():
        name = html.escape(model)
        middle = ((table["low"] + table["high"]) / 2).tolist()
        fig.add_trace(go.Bar(
            x=middle, y=table["accuracy"].tolist(), name=name, marker_color=run_colors(tables)[model],
            text=[f"n={c}" for c in table["count"]], textposition="outside", meta={"model": model},
            customdata=table["count"].tolist(),
            hovertemplate=f"{name}<br>confidence %{{x:.2f}}<br>accuracy %{{y:.1%}}<br>%{{customdata}} "
                          "questions<extra></extra>"))
    fig.add_trace(go.Scatter(x=[0, 1], y=[0, 1], mode="lines", name="perfect calibration",
                             line=dict(color="grey", dash="dot", width=1), hoverinfo="skip"))
    base_layout(fig, html.escape(title) if title else None, 420)
    fig.update_xaxes(title=confidence, range=[0, 1])
    fig.update_yaxes(title="accuracy", range=[0, 1.1], tickformat=".0%")
    fig.update_layout(barmode="group", legend=LEGEND_RIGHT)
    return fig


PLAIN_CATEGORIES = {  # the legend in plain words (keys: core.lens.probe.corpus.CATEGORIES)
    "retrieved": "right, as documented",
    "wrong despite evidence": "wrong, though documented",
    "correct by prior": "right by a guess",
    "unseen name": "wrong, nobody wrote about them",
    "wrong, no evidence": "wrong, place not documented",
}


@finished
def category_share_bars(summaries: dict[str, Any], title: str | None = None) -> go.Figure:
    """Stacked horizontal bars: each model's questions split by evidence category (one trace per
    category, in `core.lens.probe.corpus.CATEGORIES` order). `summaries`: model -> `category_summary` frame."""
    import html

    models = list(summaries)
    categories = list(next(iter(summaries.values()))["category"]) if summaries else []
    fig = go.Figure()
    for category in categories:
        shares = [float(summaries[m].set_index("category").loc[category, "share"]) for m in models]
        counts = [int(summaries[m].set_index("category").loc[category, "count"]) for m in models]
        fig.add_trace(go.Bar(
            x=shares, y=list(range(len(models))), orientation="h", name=PLAIN_CATEGORIES.get(category, category),
            marker_color=PROBE_CATEGORY_COLORS.get(category, "#636EFA"), customdata=counts,
            text=[f"{s:.0%}" if s >= 0.04 else "" for s in shares], textposition="inside",
            meta={"category": category},
            hovertemplate=f"{PLAIN_CATEGORIES.get(category, category)}: %{{x:.1%}} (%{{customdata}} questions)"
                          "<extra></extra>"))
    # each model's name above its bar, not beside it: with the names left and the five categories' legend right,
    # the bars had ~60 px at 1024x768
    fig.update_yaxes(autorange="reversed", showticklabels=False, range=[len(models) - 0.5, -0.9])
    fig.update_xaxes(title="share of questions", range=[0, 1], tickformat=".0%")
    base_layout(fig, html.escape(title) if title else None, 150 + 56 * max(len(models), 1))
    fig.update_layout(barmode="stack", bargap=0.45, legend=LEGEND_RIGHT, annotations=[
        dict(x=0, y=i - 0.32, xref="x", yref="y", text=html.escape(m), showarrow=False, xanchor="left",
             yanchor="bottom", font=dict(size=13, color="#1F2328")) for i, m in enumerate(models)])
    return fig


@finished
def confidence_by_category(frame, title: str | None = None) -> go.Figure:
    """Box plot of the greedy answer's confidence per evidence category: can confidence tell
    retrieval from invention? `frame` is `core.lens.probe.dev_set.DevAnalysis.frame`."""
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


@finished
def knowledge_grids(counts: dict[str, Any], title: str | None = None) -> go.Figure:
    """One 2x2 per model (core.lens.probe.dev_set.KnowledgeTable.counts): rows memorised in pretraining
    or not, columns answered after finetuning or not; each cell shows its count and its share."""
    import html
    import textwrap

    import numpy as np

    models = list(counts)
    # names break at their hyphens: three panels side by side leave ~150 px a title at 1024 px
    titles = ["<br>".join(textwrap.wrap(html.escape(m), 18, break_on_hyphens=True)) for m in models]
    grid = subplot_grid(1, max(len(models), 1), titles, horizontal_spacing=0.08)
    traces = []
    for n, model in enumerate(models, start=1):
        table = counts[model]
        z = np.asarray(table.values, dtype=float)
        total = max(z.sum(), 1.0)
        text = [[f"{int(v)}<br>{v / total:.0%}" for v in row] for row in z]
        suffix = str(n) if n > 1 else ""
        traces.append(go.Heatmap(
            z=z, x=[str(c) for c in table.columns], y=[str(r) for r in table.index], text=text,
            texttemplate="%{text}", textfont=dict(size=15), coloraxis="coloraxis", xaxis=f"x{suffix}",
            yaxis=f"y{suffix}", hovertemplate=f"{html.escape(model)}<br>pretraining: %{{y}}<br>after "
                                              "finetuning: %{x}<br>people: %{z:.0f}<extra></extra>"))
        grid[f"xaxis{suffix}"].update(type="category", side="bottom", title="after finetuning" if n == 1 else None)
        grid[f"yaxis{suffix}"].update(type="category", autorange="reversed", showticklabels=n == 1,
                                      title="in pretraining" if n == 1 else None)
    fig = go.Figure(traces, layout=grid)
    fig.update_layout(coloraxis=dict(colorscale=SEQUENTIAL, cmin=0, showscale=False))
    fig = base_layout(fig, html.escape(title) if title else None, 290)
    # room for the panel titles under the chart's title: 30 px let a three-line title run into two-line panel
    # titles at 1024x768 (issue 41)
    panel_lines = max((t.count("<br>") + 1 for t in titles), default=1)
    height = 290 + 20 * panel_lines - 22
    fig.update_layout(margin=dict(t=fig.layout.margin.t + 20 * panel_lines + 8), height=height,
                      # the title at the top (inside the chart), not in the middle of the now taller margin
                      title=dict(yref="container", y=1 - 24 / height, yanchor="top"))
    return fig
