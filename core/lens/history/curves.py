"""What the curves chart draws, and the numbers beside it.

Per curve: TensorBoard's debiased moving average (`smooth_ema`) and spike-keeping downsampling; metrics in
display order and which way is best, each run's final and best values (`summarize_runs`); per run and split,
points in x order, smoothed, bucketed, best validation marked (`build_curves`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

DEFAULT_SMOOTHING = 0.6  # TensorBoard's default
MAX_SMOOTHING = 0.999
SHORT_RUN = 50  # points: fewer, and a moving average mostly shows where the run was, not where it ended


def default_smoothing(n_points: int) -> float:
    """The smoothing a chart opens with: none for a short curve (9 points smoothed at 0.6 end far above the
    last value), TensorBoard's default for long noisy ones."""
    return DEFAULT_SMOOTHING if n_points >= SHORT_RUN else 0.0


def smooth_ema(y: Sequence[float] | np.ndarray, weight: float) -> np.ndarray:
    """TensorBoard's debiased exponential moving average: pandas' `ewm(alpha=1 - weight)`.

    Equivalent to: last = 0; n = 0; for each finite y: last = last*w + (1-w)*y; n += 1;
    out = last / (1 - w**n); non-finite y -> NaN without touching the state. So the first point
    equals y0 (no pull towards 0) and a gap never disturbs what follows. Feed points in x order.
    pandas' adjusted mean (sum w^i y_(t-i) / sum w^i) is that debiased average; `ignore_na` skips a gap
    without counting it, and ewm fills a gap with the value before it, so the gaps are put back after.
    """
    y = np.asarray(y, dtype=float)
    if y.ndim != 1:
        raise ValueError("smooth_ema expects a 1-D series.")
    if not (0.0 <= weight < 1.0) or not math.isfinite(weight):
        raise ValueError(f"Smoothing weight must be in [0, 1); got {weight!r}.")
    finite = np.isfinite(y)
    gaps = pd.Series(np.where(finite, y, np.nan))  # +-inf is a gap too, as in TensorBoard
    out = gaps.ewm(alpha=1.0 - weight, adjust=True, ignore_na=True).mean().to_numpy(copy=True)
    out[~finite] = np.nan
    return out


def bucket_minmax(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray,
                  n_buckets: int) -> tuple[np.ndarray, np.ndarray]:
    """Downsample for drawing without hiding spikes: per equal-width x-bucket keep the points with
    the smallest and the largest y, plus the first and last point overall; order by x (stable).

    Output size <= 2*n_buckets + 2 for finite y. Where a bucket holds non-finite y, its first such
    point is kept too (as NaN), so a gap stays a gap. Points with non-finite x cannot be placed and
    are dropped. Series already small enough come back sorted and otherwise untouched.
    """
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError("bucket_minmax expects two 1-D arrays of the same length.")
    if n_buckets < 1:
        raise ValueError("n_buckets must be at least 1.")
    placeable = np.isfinite(x)
    x, y = x[placeable], y[placeable]
    if x.size > 1 and not np.all(x[1:] >= x[:-1]):  # callers usually pass sorted x: skip the sort
        order = np.argsort(x, kind="stable")
        x, y = x[order], y[order]
    n = x.size
    if n <= 2 * n_buckets + 2:
        return x, y
    lo, hi = x[0], x[-1]
    span = hi - lo
    bucket = np.zeros(n, dtype=np.int64) if span <= 0 else np.minimum(
        ((x - lo) / span * n_buckets).astype(np.int64), n_buckets - 1)
    # x is sorted, so each bucket is one contiguous segment: per-segment extremes in O(n)
    new_segment = np.r_[True, bucket[1:] != bucket[:-1]]
    starts = np.flatnonzero(new_segment)
    segment = np.cumsum(new_segment) - 1
    finite = np.isfinite(y)
    low = np.minimum.reduceat(np.where(finite, y, np.inf), starts)
    high = np.maximum.reduceat(np.where(finite, y, -np.inf), starts)
    keep = [np.array([0, n - 1]),
            _first_per_segment(finite & (y == low[segment]), segment),
            _first_per_segment(finite & (y == high[segment]), segment),
            _first_per_segment(~finite, segment)]  # one NaN per bucket with a gap keeps the gap
    kept = np.unique(np.concatenate(keep))
    return x[kept], y[kept]


def _first_per_segment(mask: np.ndarray, segment: np.ndarray) -> np.ndarray:
    """Index of the first True of each segment that has one (segment ids are non-decreasing)."""
    idx = np.flatnonzero(mask)
    if idx.size == 0:
        return idx
    ids = segment[idx]
    return idx[np.r_[True, ids[1:] != ids[:-1]]]


METRIC_ORDER = ("loss", "accuracy", "perplexity", "lr")
# Which direction is "best" on the validation curve; metrics not listed (lr) have no best.
METRIC_GOAL = {"loss": "min", "perplexity": "min", "accuracy": "max"}


def ordered_metrics(metrics: Iterable[str]) -> list[str]:
    metrics = set(metrics)
    return [m for m in METRIC_ORDER if m in metrics] + sorted(metrics - set(METRIC_ORDER))


def best_index(values: np.ndarray, goal: str | None) -> int | None:
    finite = np.isfinite(values)
    if goal is None or not finite.any():
        return None
    masked = np.where(finite, values, np.inf if goal == "min" else -np.inf)
    return int(np.argmin(masked) if goal == "min" else np.argmax(masked))


def last_finite(part: pd.DataFrame) -> float:
    values = part.sort_values("step", kind="stable")["value"].to_numpy(float)
    values = values[np.isfinite(values)]
    return float(values[-1]) if values.size else math.nan


def summarize_runs(frame: pd.DataFrame, runs: Sequence[str], metric: str) -> pd.DataFrame:
    """Final train/val, best val (min or max by metric) with its epoch and step, train - val gap."""
    goal = METRIC_GOAL.get(metric)
    rows = []
    subset = frame[frame["metric"] == metric]
    for run in runs:
        rows_run = subset[subset["run"] == run]
        train, val = rows_run[rows_run["split"] == "train"], rows_run[rows_run["split"] == "val"]
        final_train, final_val = last_finite(train), last_finite(val)
        row = {"run": run, "points": len(rows_run), "final train": final_train, "final val": final_val,
               "best val": math.nan, "best at epoch": math.nan, "best at step": math.nan,
               "train - val gap": final_train - final_val}
        best = best_index(val["value"].to_numpy(float), goal) if not val.empty else None
        if best is not None:
            record = val.iloc[best]
            row.update({"best val": float(record["value"]), "best at epoch": float(record["epoch"]),
                        "best at step": float(record["step"])})
        rows.append(row)
    return pd.DataFrame(rows, columns=["run", "points", "final train", "final val", "best val",
                                       "best at epoch", "best at step", "train - val gap"])


MAX_EPOCH_ROWS = 100  # a table by epoch longer than this is a curve's job (the CSV has every point)


def by_epoch(frame: pd.DataFrame, runs: Sequence[str], metric: str) -> pd.DataFrame:
    """The metric at the end of each epoch, one row per epoch and one column per run and split ("names-pretrained
    val"): the last record of each (run, split, epoch), as a course report tabulates accuracy by epoch. Empty when
    no selected run records whole epochs or there are more than MAX_EPOCH_ROWS of them."""
    subset = frame[(frame["metric"] == metric) & frame["run"].isin(list(runs)) & frame["epoch"].notna()]
    subset = subset[np.isclose(subset["epoch"], subset["epoch"].round())]  # whole epochs (logged within one)
    if subset.empty:
        return pd.DataFrame()
    epochs = subset["epoch"].round().astype(int)
    if epochs.nunique() > MAX_EPOCH_ROWS:
        return pd.DataFrame()
    subset = subset.assign(epoch=epochs).sort_values(["step", "wall_time"], kind="stable")
    last = subset.groupby(["run", "split", "epoch"])["value"].last()
    splits = [s for s in SPLITS if s in set(subset["split"])] + sorted(set(subset["split"]) - set(SPLITS))
    columns = {f"{run} {split}": last[(run, split)] for run in runs for split in splits if (run, split) in last.index}
    table = pd.DataFrame(columns).sort_index()
    table.index.name = "epoch"
    return table.reset_index()


SPLITS = ("train", "val")  # drawing order; other split names (if a trainer logs them) come after
X_AXES = {"step": "Step", "epoch": "Epoch", "tokens": "Tokens seen", "relative": "Relative time (s)",
          "wall_time": "Wall time"}
ABSOLUTE_TIME = 1e9  # seconds since 1970 (2001 on): a clock other tools wrote, drawn as dates; ours count from 0
LAST_DATE = 1e11  # beyond the year 5000 a "clock" is not one: drawn as seconds
N_BUCKETS = 2000  # per curve: at most ~4002 drawn points, finer than a chart is wide in pixels
# drawn points (after bucketing): below this SVG traces are crisper, export as true vectors and, in a browser
# without a GPU (headless Chromium's software GL), draw faster: a 100,000-point run bucketed to ~8,000 drawn
# points redrew in 0.57-0.69 s as SVG against 1.5-2.0 s as WebGL (bench.browser_latency --only tensorboard)
WEBGL_MIN_POINTS = 10_000


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
    band_x: np.ndarray | None = None  # a seed group's band: its x, low (min or mean - std) and high edges
    band_low: np.ndarray | None = None  # None for a single run
    band_high: np.ndarray | None = None
    n_runs: int = 1  # runs averaged into this curve: the most at any x
    n_runs_min: int = 1  # the fewest at any x


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
    dates: bool = False  # x is a clock (seconds since 1970): drawn as dates


def with_relative_time(frame: pd.DataFrame) -> pd.DataFrame:
    """The table with a `relative` column: seconds since each run's first wall time (TensorBoard's Relative)."""
    frame = frame.copy()
    start = frame.groupby("run", sort=False)["wall_time"].transform("min")
    frame["relative"] = frame["wall_time"].astype(float) - start.astype(float)
    return frame


BAND_LABELS = {"minmax": "their lowest to their highest value",
               "std": "one standard deviation below their mean to one above"}


def _attach_band(curve: Curve, band_rows: pd.DataFrame, group: str, metric: str, split: str, x: str, band: str,
                 n_buckets: int, smoothing: float = 0.0) -> None:
    """The group's band under its mean curve: min/max, or mean -+ std, at the band's x values (each edge smoothed
    as the curve is, then bucketed by its extremes when long, like the curve)."""
    rows = band_rows[(band_rows["group"] == group) & (band_rows["metric"] == metric) & (band_rows["split"] == split)]
    if rows.empty:
        return
    rows = rows.sort_values(x, kind="stable")
    bx = rows[x].to_numpy(float)
    low = rows["min"].to_numpy(float) if band == "minmax" else (rows["mean"] - rows["std"]).to_numpy(float)
    high = rows["max"].to_numpy(float) if band == "minmax" else (rows["mean"] + rows["std"]).to_numpy(float)
    if smoothing > 0:
        low, high = smooth_ema(low, smoothing), smooth_ema(high, smoothing)
    if bx.size > 2 * n_buckets + 2:  # keep each slice's lowest low and highest high
        lx, low = bucket_minmax(bx, low, n_buckets)
        hx, high = bucket_minmax(bx, high, n_buckets)
        common = np.union1d(lx, hx)
        low, high = np.interp(common, lx, low), np.interp(common, hx, high)
        bx = common
    curve.band_low, curve.band_high = low, high
    curve.band_x = bx
    curve.n_runs, curve.n_runs_min = int(rows["runs"].max()), int(rows["runs"].min())


def _ordered_splits(splits: Iterable[str]) -> list[str]:
    splits = set(splits)
    return [s for s in SPLITS if s in splits] + sorted(splits - set(SPLITS))


def build_curves(frame: pd.DataFrame, runs: Sequence[str], metric: str, x: str = "step",
                 smoothing: float = 0.0, logy: bool = False, n_buckets: int = N_BUCKETS,
                 groups: dict[str, Sequence[str]] | None = None, band: str = "minmax") -> CurvePlot:
    """Per run and split: points sorted by x, smoothed (on all points), then bucketed for drawing.

    `groups`: name -> runs drawn as one curve, their mean, with a band (`band`: "minmax" or "std", bands.py);
    `runs` then names the groups in place of their members."""
    if x not in X_AXES:
        raise ValueError(f"Unknown x axis {x!r}; choose one of {', '.join(X_AXES)}.")
    if x == "relative" and "relative" not in frame:
        frame = with_relative_time(frame)
    band_rows = None
    seeds = {g: list(m) for g, m in (groups or {}).items() if g in runs}
    if seeds:
        from core.lens.history.bands import grouped_frame

        frame, band_rows = grouped_frame(frame, seeds, x)
    goal = METRIC_GOAL.get(metric)
    plot = CurvePlot([], [], list(runs), metric, x, smoothing, logy, webgl=False,
                     uirevision=f"curves|{metric}|{x}|{'log' if logy else 'linear'}")
    subset = frame[frame["metric"] == metric]
    groups = subset.groupby(["run", "split"], sort=False).indices if not subset.empty else {}
    columns = {c: subset[c].to_numpy(float) for c in dict.fromkeys((x, "value", "step", "epoch"))}
    drawn = 0
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
            reduced = n > 2 * n_buckets + 2
            if reduced:
                dx, dy = bucket_minmax(xs, ys, n_buckets)
                sx, sy = bucket_minmax(xs, smooth, n_buckets) if smooth is not None else (None, None)
            else:
                dx, dy, sx, sy = xs, ys, (xs if smooth is not None else None), smooth
            drawn += dx.size + (sx.size if sx is not None else 0)
            curve = Curve(run, split, dx, dy, sx, sy, n, reduced)
            if band_rows is not None and run in seeds:
                _attach_band(curve, band_rows, run, metric, split, x, band, n_buckets, smoothing)
            plot.curves.append(curve)
            if split == "val":
                best = best_index(ys, goal)
                if best is not None:
                    plot.best.append(BestPoint(run, float(xs[best]), float(ys[best]), float(steps[best]),
                                               float(epochs[best])))
            if n == 1:
                single.append(f"{run} {split}")
    plot.webgl = drawn >= WEBGL_MIN_POINTS
    if x == "wall_time":
        drawn = np.concatenate([c.x for c in plot.curves]) if plot.curves else np.array([])
        finite = drawn[np.isfinite(drawn)]
        plot.dates = bool(finite.size) and ABSOLUTE_TIME <= float(finite.min()) and float(finite.max()) < LAST_DATE
    for name in [r for r in runs if r in seeds]:
        counts = [c.n_runs_min for c in plot.curves if c.run == name and c.band_x is not None]
        if counts:
            n = len(seeds[name])
            where = (f"all {n} have a value at every x" if min(counts) == n else
                     f"some x values have only {min(counts)} of them (the band there is over those)")
            plot.info.append(f"{name}: the mean over {n} runs ({', '.join(seeds[name])}), with a band from "
                             f"{BAND_LABELS[band]}; {where}.")
    if single:
        plot.info.append(f"A single point each, drawn as a marker: {', '.join(single)}.")
    if any(c.reduced for c in plot.curves):
        plot.info.append(f"Long curves are drawn with the lowest and highest value of each of {n_buckets:,} "
                         "x-slices, so every spike stays visible; zoomed in, slices are coarser than "
                         "the data. The CSV has every point.")
    return plot
