"""Training curves: runs overlaid, smoothing, best-value markers."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from core.figures.common import LEGEND_RIGHT, base_layout, finished, log_axis, run_color, run_colors

SPLIT_DASH = {"train": "solid", "val": "dash"}  # any other split: dotted
RAW_OPACITY_UNDER_SMOOTHING = 0.25
BAND_OPACITY = 0.2  # a seed group's band under its mean


def family_run_colors(infos) -> dict[str, str]:
    """Checkpoints of a positional family (one model, several schemes: `core.lens.positional.
    positional_families`) wear their scheme's registry colour here as on the positional page; a scheme
    two members share fixes no colour (they would look alike). `infos`: the picker's CheckpointInfos."""
    from core.lens.positional import positional_families
    from core.model.positional import POSITIONAL

    colors = {}
    for family in positional_families(infos):
        schemes = [m.config.get("positional") for m in family.members]
        for member, scheme in zip(family.members, schemes):
            if schemes.count(scheme) == 1 and scheme in POSITIONAL:
                colors[member.name] = POSITIONAL[scheme].color
    return colors


@finished
def training_curves_figure(plot, title: str | None = None, height: int = 480,
                           fixed_colors: dict[str, str] | None = None, marks=(), saved=()) -> go.Figure:
    """Runs overlaid (one colour each), train solid / val dashed, the smoothed curve over a faint raw
    one, a star at each run's best validation value. `plot` is a `core.lens.history.curves.CurvePlot`.

    Every user string (run, split, metric names) is HTML-escaped: plotly renders tags in labels.
    `uirevision` is constant per (metric, x, scale), so a live refresh or a new smoothing keeps the
    user's zoom and legend clicks. `fixed_colors`: run -> colour decided elsewhere (family_run_colors).
    `marks`: kept training steps (core.lens.training_steps.StepMark), a white diamond each in the run's
    colour; their customdata is (run, step, 1 for a snapshot / 0 for the checkpoint's own step), for a click to
    open that step elsewhere. `saved`: the steps whose weights another tool saved (a Trainer's checkpoint-N/: the
    same StepMark), a white square each, customdata the same.
    """
    import html

    from core.lens.history.curves import METRIC_GOAL, X_AXES

    scatter = go.Scattergl if plot.webgl else go.Scatter
    colors = run_colors(plot.runs, fixed_colors)  # by name: a run has its colour on every page
    smoothed = plot.smoothing > 0
    fig = go.Figure()

    def xs(values):  # a clock (seconds since 1970) drawn as dates, as TensorBoard's wall-time axis
        if not plot.dates:
            return values
        import pandas as pd

        return pd.to_datetime(np.asarray(values, dtype=float), unit="s", errors="coerce").to_numpy()

    for curve in plot.curves:
        if curve.band_x is None:
            continue
        color = colors.get(curve.run, run_color(0))
        # one closed shape: the high edge forward, the low edge back (plotly's fill="toself")
        fig.add_trace(scatter(
            x=xs(np.r_[curve.band_x, curve.band_x[::-1]]), y=np.r_[curve.band_high, curve.band_low[::-1]],
            mode="lines", fill="toself", fillcolor=color, opacity=BAND_OPACITY, line=dict(width=0, color=color),
            name=html.escape(f"{curve.run} · {curve.split} band"), legendgroup=html.escape(curve.run),
            showlegend=False, hoverinfo="skip", uid=f"{curve.run}|{curve.split}|band",
            meta={"run": curve.run, "split": curve.split, "kind": "band", "runs": curve.n_runs}))
    for curve in plot.curves:
        color = colors.get(curve.run, run_color(0))
        dash = SPLIT_DASH.get(curve.split, "dot")
        label = html.escape(f"{curve.run} · {curve.split}")
        group = html.escape(curve.run)
        mode = "lines+markers" if curve.x.size == 1 else "lines"
        hover = "<b>%{fullData.name}</b><br>%{x}<br>%{y:.4g}<extra></extra>"
        fig.add_trace(scatter(
            x=xs(curve.x), y=curve.y, mode=mode, name=label + (" (raw)" if smoothed else ""),
            legendgroup=group, showlegend=not smoothed, connectgaps=False, hovertemplate=hover,
            line=dict(color=color, dash=dash, width=1 if smoothed else 2),
            opacity=RAW_OPACITY_UNDER_SMOOTHING if smoothed else 1.0,
            uid=f"{curve.run}|{curve.split}|raw",
            meta={"run": curve.run, "split": curve.split, "kind": "raw"}))
        if smoothed and curve.smooth_x is not None:
            fig.add_trace(scatter(
                x=xs(curve.smooth_x), y=curve.smooth_y, mode=mode, name=label, legendgroup=group,
                connectgaps=False, hovertemplate=hover, line=dict(color=color, dash=dash, width=2),
                uid=f"{curve.run}|{curve.split}|smooth",
                meta={"run": curve.run, "split": curve.split, "kind": "smoothed"}))
    if smoothed:
        # The smoothed line lags: each curve's last raw value as a dot, so smoothing never hides where a run ended
        for curve in plot.curves:
            finite = np.flatnonzero(np.isfinite(curve.y))
            if finite.size > 1:  # a single point is drawn as a marker already
                last = finite[-1]
                fig.add_trace(scatter(
                    x=xs([curve.x[last]]), y=[curve.y[last]], mode="markers", name="last value",
                    legendgroup=html.escape(curve.run), showlegend=False,
                    marker=dict(size=8, color=colors.get(curve.run, run_color(0)), line=dict(color="white", width=1)),
                    hovertemplate=f"<b>{html.escape(f'{curve.run} · {curve.split}')}</b> last value %{{y:.4g}}"
                                  "<extra></extra>",
                    uid=f"{curve.run}|{curve.split}|last", meta={"run": curve.run, "split": curve.split,
                                                                 "kind": "last"}))
    if plot.best:
        # One small star per run, in the run's legend group (hiding a run hides its star), drawn on top;
        # runs that peak at the same step no longer pile into one big marker of one colour.
        goal = "lowest" if METRIC_GOAL.get(plot.metric) == "min" else "highest"
        for b in plot.best:
            fig.add_trace(scatter(
                x=xs([b.x]), y=[b.y], mode="markers", name=f"best val ({goal})", legendgroup=html.escape(b.run),
                showlegend=False,
                marker=dict(symbol="star", size=11, color=colors.get(b.run, run_color(0)),
                            line=dict(color="black", width=1)),
                customdata=[[html.escape(b.run), b.epoch, b.step]],
                hovertemplate="<b>%{customdata[0]}</b> best val %{y:.4g}<br>epoch %{customdata[1]}, "
                              "step %{customdata[2]}<extra></extra>",
                uid=f"best|{b.run}", meta={"kind": "best", "run": b.run}))
    # clickable steps on the loss curve: our snapshots (diamonds), other tools' saved checkpoints (squares)
    for found, kind, name, symbol, size, said in (
            (marks, "snapshots", "snapshots", "diamond", 11, "kept step %{customdata[1]:,}<br>training loss "
             "%{y:.4g}<br>click: attention at this step"),
            (saved, "saved", "saved steps", "square", 12, "saved at step %{customdata[1]:,}<br>training loss %{y:.4g}"
             "<br>click: attention of this checkpoint")):
        for run in dict.fromkeys(m.run for m in found):
            mine = [m for m in found if m.run == run]
            fig.add_trace(scatter(
                x=xs([m.x for m in mine]), y=[m.y for m in mine], mode="markers", name=name,
                legendgroup=html.escape(run), showlegend=False,
                marker=dict(symbol=symbol, size=size, color="white",
                            line=dict(color=colors.get(run, run_color(0)), width=2.5)),
                customdata=[[html.escape(run), m.step, int(getattr(m, "snapshot", True))] for m in mine],
                hovertemplate=f"<b>%{{customdata[0]}}</b> {said}<extra></extra>",
                uid=f"{kind}|{run}", meta={"kind": kind, "run": run}))
    metric = html.escape(plot.metric)
    base_layout(fig, title=html.escape(title) if title else None, height=height)
    fig.update_layout(
        uirevision=plot.uirevision, hovermode="closest",
        legend=LEGEND_RIGHT,
        xaxis_title=X_AXES.get(plot.x, plot.x) + (" (s)" if plot.x == "wall_time" and not plot.dates else ""),
        yaxis_title=metric)
    fig.update_yaxes(**(log_axis(y for t in fig.data for y in t.y if y is not None) if plot.logy
                        else dict(type="linear")))
    return fig
