"""Metrics in display order and which way is best; each run's final and best values (`summarize_runs`)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

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
