"""Metrics per slice of an evaluation table, each with its count and a 95% interval, and calibration.

A slice is a set of rows: one value of a column (the gold label, a length bucket) or the rows whose text
matches a word or regular expression the user types. Its accuracy comes with the Wilson score interval
(Wilson 1927), which stays inside [0, 1] and is sensible for the small counts slices have (a slice of 3 names
right 3 times is not "100%"). Calibration: accuracy per equal-width confidence bin and the expected calibration
error (Guo et al. 2017), the one home of both (the probe's Dev set tab reads them from here too).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import numpy as np
import pandas as pd

Z95 = 1.959963984540054  # the standard normal's 97.5% quantile
MAX_PATTERN_CHARS = 200
SLICE_COLUMNS = ("slice", "count", "right", "accuracy", "low", "high", "mean loss")
LENGTH_EDGES = (1, 3, 5, 9, 17, 33, 65, 129)  # pieces: 1-2, 3-4, 5-8, ... (a name is a few pieces, a speech ~30)


class SliceError(ValueError):
    """A slice the user asked for that cannot be made (a bad regular expression); str() is one sentence."""


def wilson_interval(right: int, count: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a proportion right/count ((nan, nan) for an empty slice)."""
    if count <= 0:
        return float("nan"), float("nan")
    p = right / count
    denominator = 1 + z * z / count
    centre = (p + z * z / (2 * count)) / denominator
    half = z * math.sqrt(p * (1 - p) / count + z * z / (4 * count * count)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def slice_row(name: str, members: pd.DataFrame) -> dict:
    count = len(members)
    right = int(members["right"].sum()) if count else 0
    low, high = wilson_interval(right, count)
    loss = float(members["loss"].mean()) if count and "loss" in members else float("nan")
    return {"slice": name, "count": count, "right": right, "accuracy": right / count if count else float("nan"),
            "low": low, "high": high, "mean loss": loss}


def by_column(frame: pd.DataFrame, column: str, order: Sequence | None = None) -> pd.DataFrame:
    """One slice per value of `column` (in `order` when given, values absent from the table included as empty
    slices: a label nobody has still shows, with count 0)."""
    values = list(order) if order is not None else sorted(frame[column].dropna().unique().tolist(), key=str)
    rows = [slice_row(str(v), frame[frame[column] == v]) for v in values]
    return pd.DataFrame(rows, columns=list(SLICE_COLUMNS))


def length_bucket(pieces: int) -> str:
    """'1-2', '3-4', '5-8', ... pieces; beyond the last edge, '129+'."""
    for low, high in zip(LENGTH_EDGES, LENGTH_EDGES[1:]):
        if pieces < high:
            return f"{low}-{high - 1}" if high - 1 > low else str(low)
    return f"{LENGTH_EDGES[-1]}+"


def length_order() -> list[str]:
    return [length_bucket(low) for low in LENGTH_EDGES]


def by_length(frame: pd.DataFrame, column: str = "pieces") -> pd.DataFrame:
    """One slice per length bucket present in the table, shortest first."""
    buckets = frame[column].map(length_bucket)
    present = [b for b in length_order() if (buckets == b).any()]
    rows = [slice_row(f"{b} pieces", frame[buckets == b]) for b in present]
    return pd.DataFrame(rows, columns=list(SLICE_COLUMNS))


def compile_pattern(pattern: str, regex: bool) -> re.Pattern:
    """A typed word (matched as a whole word, any case) or regular expression; a bad one is one sentence."""
    pattern = pattern.strip()
    if not pattern:
        raise SliceError("Type a word or a regular expression to make a slice.")
    if len(pattern) > MAX_PATTERN_CHARS:
        raise SliceError(f"A slice's pattern is at most {MAX_PATTERN_CHARS} characters.")
    if not regex:
        return re.compile(rf"(?<!\w){re.escape(pattern)}(?!\w)", re.IGNORECASE)
    try:
        return re.compile(pattern, re.IGNORECASE)
    except re.error as exc:
        raise SliceError(f"{pattern!r} is not a valid regular expression ({exc.msg} at position {exc.pos}).") from None


def matches(frame: pd.DataFrame, pattern: str, regex: bool = False, column: str = "text") -> pd.Series:
    """Which rows' text the typed word or regular expression finds (a boolean Series on the frame's index)."""
    compiled = compile_pattern(pattern, regex)
    return frame[column].astype(str).map(lambda text: compiled.search(text) is not None)


def by_pattern(frame: pd.DataFrame, pattern: str, regex: bool = False, column: str = "text") -> pd.DataFrame:
    """Two slices: the rows whose text matches, and the rest (so the difference reads off two intervals)."""
    hit = matches(frame, pattern, regex, column)
    shown = pattern.strip()[:40]
    return pd.DataFrame([slice_row(f"matches {shown!r}", frame[hit]), slice_row(f"does not match {shown!r}",
                                                                                 frame[~hit])],
                        columns=list(SLICE_COLUMNS))


# --- calibration ------------------------------------------------------------------------------------------

def reliability_table(confidence: Sequence[float], correct: Sequence[bool], n_bins: int = 10) -> pd.DataFrame:
    """Accuracy per equal-width confidence bin, with counts (empty bins: accuracy NaN)."""
    conf = np.asarray(confidence, dtype=float)
    right = np.asarray(correct, dtype=bool)
    known = np.isfinite(conf)
    conf, right = conf[known], right[known]
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    which = np.clip(np.digitize(conf, edges[1:-1], right=True), 0, n_bins - 1)
    rows = []
    for b in range(n_bins):
        members = which == b
        count = int(members.sum())
        rows.append({"bin": b, "low": edges[b], "high": edges[b + 1], "count": count,
                     "accuracy": float(right[members].mean()) if count else float("nan"),
                     "mean_confidence": float(conf[members].mean()) if count else float("nan")})
    return pd.DataFrame(rows)


def expected_calibration_error(table: pd.DataFrame) -> float:
    """Count-weighted mean |accuracy - confidence| over the bins of `reliability_table`."""
    used = table[table["count"] > 0]
    total = used["count"].sum()
    if not total:
        return float("nan")
    return float((used["count"] * (used["accuracy"] - used["mean_confidence"]).abs()).sum() / total)
