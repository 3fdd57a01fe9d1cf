"""Runs that differ only by seed, drawn as one curve: their mean with a band, as W&B's run grouping draws them.

`seed_groups` finds the groups by name (`lm-seed0`, `lm_seed_1`, `lm-s2`, `run/seed=3`); `band_table` computes
per split and x value the mean, the min and max and the standard deviation over the group's runs, and how many
runs had a value there. `grouped_frame` turns a group into one run of the tidy table (its mean), so every
other part of the page (smoothing, best value, summary, CSV) treats it as a run.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

SEED = re.compile(r"(?:[-_ ./]|^)(?:seed[-_=]?|s)(\d+)$", re.IGNORECASE)
BAND_KINDS = {"minmax": "min to max", "std": "mean ± 1 standard deviation"}


def seed_of(run: str) -> tuple[str, int] | None:
    """(the name without its seed, the seed) for `lm-seed0`, `lm_s1`, `runs/lm/seed=2`; None for other names."""
    match = SEED.search(run)
    if not match or match.start() == 0:
        return None
    return run[: match.start()], int(match.group(1))


def seed_groups(runs: Iterable[str]) -> dict[str, list[str]]:
    """Groups of at least two runs whose names differ only by seed: "<name> (seeds)" -> the runs, by seed."""
    groups: dict[str, list[tuple[int, str]]] = {}
    for run in runs:
        found = seed_of(run)
        if found:
            groups.setdefault(found[0], []).append((found[1], run))
    return {f"{base} (seeds)": [r for _, r in sorted(members)] for base, members in groups.items()
            if len(members) > 1}


def band_table(frame: pd.DataFrame, runs: Sequence[str], metric: str, x: str) -> pd.DataFrame:
    """Per split and x value over `runs`: mean, std (sample, ddof=1; 0 for a single run), min, max, runs (how many
    had a finite value there). Each run's value at an x is its last one there (a resumed run logs a step twice)."""
    part = frame[(frame["metric"] == metric) & frame["run"].isin(list(runs))]
    part = part[np.isfinite(part[x].to_numpy(float)) & np.isfinite(part["value"].to_numpy(float))]
    columns = ["split", x, "mean", "std", "min", "max", "runs"]
    if part.empty:
        return pd.DataFrame(columns=columns)
    last = part.groupby(["split", x, "run"], sort=True)["value"].last().reset_index()
    table = last.groupby(["split", x], sort=True)["value"].agg(["mean", "std", "min", "max", "count"]).reset_index()
    table["std"] = table["std"].fillna(0.0)
    return table.rename(columns={"count": "runs"})[columns]


def grouped_frame(frame: pd.DataFrame, groups: dict[str, Sequence[str]], x: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the tidy table with each group's runs replaced by one run: the group's mean per split, metric and x;
    the band rows: group, metric, split, x, mean, std, min, max, runs). The mean's other x columns are the
    means of the runs' (a step's epoch is the same in every seed)."""
    keep = frame[~frame["run"].isin([r for members in groups.values() for r in members])]
    parts, bands = [keep], []
    for name, members in groups.items():
        for metric in frame.loc[frame["run"].isin(list(members)), "metric"].unique():
            table = band_table(frame, members, metric, x)
            if table.empty:
                continue
            table.insert(0, "metric", metric)
            table.insert(0, "group", name)
            bands.append(table)
            part = frame[(frame["metric"] == metric) & frame["run"].isin(list(members))]
            others = [c for c in ("step", "epoch", "tokens", "wall_time") if c != x]
            extra = part.groupby(["split", x])[others].mean().reset_index()
            mean = table.merge(extra, on=["split", x], how="left")
            parts.append(pd.DataFrame({"run": name, "step": mean.get("step"), "epoch": mean.get("epoch"),
                                       "tokens": mean.get("tokens"), "wall_time": mean.get("wall_time"),
                                       "split": mean["split"], "metric": metric, "value": mean["mean"]}))
    out = pd.concat([p for p in parts if not p.empty], ignore_index=True) if any(not p.empty for p in parts) \
        else frame.iloc[:0]
    band = pd.concat(bands, ignore_index=True) if bands else pd.DataFrame(
        columns=["group", "metric", "split", x, "mean", "std", "min", "max", "runs"])
    return out[frame.columns], band
