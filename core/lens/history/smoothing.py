"""Per-curve: TensorBoard's debiased moving average (`smooth_ema`) and spike-keeping downsampling."""

from __future__ import annotations

import math
from collections.abc import Sequence

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
