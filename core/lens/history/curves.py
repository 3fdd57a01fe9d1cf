"""What the curves chart draws: per run and split, points in x order, smoothed, bucketed, best validation marked."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from core.lens.history.smoothing import bucket_minmax, smooth_ema
from core.lens.history.summary import METRIC_GOAL, best_index

SPLITS = ("train", "val")  # drawing order; other split names (if a trainer logs them) come after
X_AXES = {"step": "Step", "epoch": "Epoch", "tokens": "Tokens seen", "wall_time": "Wall time (s)"}
N_BUCKETS = 2000  # per curve: at most ~4002 drawn points, finer than a chart is wide in pixels
WEBGL_MIN_POINTS = 10_000  # below this SVG traces are crisper and export as true vectors


@dataclass
class Curve:
    run: str
    split: str
    x: np.ndarray  # drawn raw points (bucketed when the series is long), sorted by x
    y: np.ndarray  # non-finite values are NaN: plotly draws them as gaps
    smooth_x: np.ndarray | None  # None when smoothing is off
    smooth_y: np.ndarray | None
    n_points: int  # before bucketing
    reduced: bool


@dataclass
class BestPoint:
    run: str
    x: float
    y: float
    step: float
    epoch: float


@dataclass
class CurvePlot:
    curves: list[Curve]
    best: list[BestPoint]
    runs: list[str]  # the colour order
    metric: str
    x: str
    smoothing: float
    logy: bool
    webgl: bool
    uirevision: str
    notes: list[str] = field(default_factory=list)  # problems worth a warning
    info: list[str] = field(default_factory=list)  # how the data was drawn


def _ordered_splits(splits: Iterable[str]) -> list[str]:
    splits = set(splits)
    return [s for s in SPLITS if s in splits] + sorted(splits - set(SPLITS))


def build_curves(frame: pd.DataFrame, runs: Sequence[str], metric: str, x: str = "step",
                 smoothing: float = 0.0, logy: bool = False, n_buckets: int = N_BUCKETS) -> CurvePlot:
    """Per run and split: points sorted by x, smoothed (on all points), then bucketed for drawing."""
    if x not in X_AXES:
        raise ValueError(f"Unknown x axis {x!r}; choose one of {', '.join(X_AXES)}.")
    goal = METRIC_GOAL.get(metric)
    plot = CurvePlot([], [], list(runs), metric, x, smoothing, logy, webgl=False,
                     uirevision=f"curves|{metric}|{x}|{'log' if logy else 'linear'}")
    subset = frame[frame["metric"] == metric]
    groups = subset.groupby(["run", "split"], sort=False).indices if not subset.empty else {}
    columns = {c: subset[c].to_numpy(float) for c in dict.fromkeys((x, "value", "step", "epoch"))}
    total = 0
    single: list[str] = []
    for run in runs:
        splits = [s for (r, s) in groups if r == run]
        if not splits:
            plot.notes.append(f"{run} has no '{metric}' records.")
            continue
        for split in _ordered_splits(splits):
            rows = groups[(run, split)]
            xs = columns[x][rows]
            placeable = np.isfinite(xs)
            if not placeable.all():
                plot.notes.append(f"{run} {split}: {int((~placeable).sum())} point(s) have no "
                                  f"{X_AXES[x].lower()} and are left out.")
            rows = rows[placeable]
            xs = xs[placeable]
            if xs.size > 1 and not np.all(xs[1:] >= xs[:-1]):  # smoothing needs x order; logs usually have it
                order = np.argsort(xs, kind="stable")
                rows, xs = rows[order], xs[order]
            ys, steps, epochs = columns["value"][rows], columns["step"][rows], columns["epoch"][rows]
            bad = int((~np.isfinite(ys)).sum())
            if bad:
                plot.notes.append(f"{run} {split}: {bad} NaN/inf value(s), drawn as gaps.")
            if logy and (np.isfinite(ys) & (ys <= 0)).any():
                plot.notes.append(f"{run} {split}: values at or below 0 cannot be drawn on a log scale.")
            ys = np.where(np.isfinite(ys), ys, np.nan)
            smooth = smooth_ema(ys, smoothing) if smoothing > 0 else None
            n = xs.size
            total += n
            reduced = n > 2 * n_buckets + 2
            if reduced:
                dx, dy = bucket_minmax(xs, ys, n_buckets)
                sx, sy = bucket_minmax(xs, smooth, n_buckets) if smooth is not None else (None, None)
            else:
                dx, dy, sx, sy = xs, ys, (xs if smooth is not None else None), smooth
            plot.curves.append(Curve(run, split, dx, dy, sx, sy, n, reduced))
            if split == "val":
                best = best_index(ys, goal)
                if best is not None:
                    plot.best.append(BestPoint(run, float(xs[best]), float(ys[best]), float(steps[best]),
                                               float(epochs[best])))
            if n == 1:
                single.append(f"{run} {split}")
    plot.webgl = total >= WEBGL_MIN_POINTS
    if single:
        plot.info.append(f"A single point each, drawn as a marker: {', '.join(single)}.")
    if any(c.reduced for c in plot.curves):
        plot.info.append(f"Long curves are drawn with the lowest and highest value of each of {n_buckets:,} "
                         "x-slices, so every spike stays visible; zoomed in, slices are coarser than "
                         "the data. The CSV has every point.")
    return plot
