"""How long the curves figure takes for long histories, with min/max bucketing versus without.

    python -m bench.curves [--points 200000] [--runs 2] [--repeats 5]

A synthetic history per run (train loss with noise and rare spikes, val every 100 steps) goes
through what the page does on every rerun: `build_curves` (sort, smooth, bucket), the figure, and
`fig.to_json()` (what Streamlit sends to the browser). Both variants run interleaved so they see
the same machine load; medians and their ratio are printed, plus the number of points drawn.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import pandas as pd

from core.figures.curves import training_curves_figure
from core.lens.history.curves import N_BUCKETS, build_curves
from core.lens.history.records import COLUMNS

NO_BUCKETING = 10**12  # more buckets than points: build_curves then draws every point


def synthetic_history(points: int, runs: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    frames = []
    for r in range(runs):
        step = np.arange(1, points + 1, dtype=float)
        loss = 3.0 * np.exp(-step / (points / 5)) + 0.5 + rng.normal(scale=0.05, size=points)
        loss[rng.integers(0, points, 20)] += 2.0  # spikes bucketing must keep
        val_step = step[::100]
        val = 3.0 * np.exp(-val_step / (points / 5)) + 0.6
        for split, s, v in (("train", step, loss), ("val", val_step, val)):
            frames.append(pd.DataFrame({"run": f"run-{r}", "step": s, "epoch": s // 1000, "tokens": s * 512,
                                        "wall_time": s * 0.01, "split": split, "metric": "loss", "value": v}))
    return pd.concat(frames, ignore_index=True)[COLUMNS]


def time_figure(frame: pd.DataFrame, runs: list[str], n_buckets: int) -> tuple[float, int, int]:
    """(seconds, points drawn, bytes sent to the browser)."""
    start = time.perf_counter()
    plot = build_curves(frame, runs, "loss", "step", smoothing=0.9, n_buckets=n_buckets)
    fig = training_curves_figure(plot)
    payload = fig.to_json()
    elapsed = time.perf_counter() - start
    drawn = sum(len(t.x) for t in fig.data if t.x is not None)
    return elapsed, drawn, len(payload)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=200_000, help="train points per run")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    frame = synthetic_history(args.points, args.runs)
    runs = sorted(frame["run"].unique())
    timings: dict[str, list[float]] = {"bucketed": [], "every point": []}
    drawn: dict[str, int] = {}
    sent: dict[str, int] = {}
    time_figure(frame, runs, N_BUCKETS)  # warm-up: imports, plotly validators
    for _ in range(args.repeats):
        for label, buckets in (("bucketed", N_BUCKETS), ("every point", NO_BUCKETING)):
            seconds, drawn[label], sent[label] = time_figure(frame, runs, buckets)
            timings[label].append(seconds)
    bucketed, full = (statistics.median(timings[k]) for k in ("bucketed", "every point"))
    print(f"{args.runs} run(s) x {args.points:,} train points, smoothing 0.9, median of {args.repeats}:")
    for label, seconds in ((f"bucketed ({N_BUCKETS} buckets)", bucketed), ("every point", full)):
        key = "bucketed" if label.startswith("bucketed") else label
        print(f"  {label:<26} {seconds * 1000:8.1f} ms, {drawn[key]:>9,} points drawn, "
              f"{sent[key] / 1e6:6.2f} MB figure JSON")
    print(f"  ratio (every point / bucketed): {full / bucketed:.1f}x time, "
          f"{sent['every point'] / sent['bucketed']:.1f}x bytes")


if __name__ == "__main__":
    main()
