"""Ready-made comparisons as data (`COMPARISONS`), the runs each picks, and the caption from their final values."""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Iterable
from dataclasses import dataclass

import pandas as pd

from core.lens.history.curves import METRIC_GOAL, last_finite


@dataclass(frozen=True)
class ComparisonPreset:
    patterns: tuple[str, ...]  # fnmatch patterns against checkpoint names
    metric: str  # the metric that tells the story
    story: str  # what is compared: a description, never a result (results come from `comparison_verdicts`)
    pairs: tuple[tuple[str, str], ...] = ()  # (with, without) runs whose final values the caption compares


COMPARISONS: dict[str, ComparisonPreset] = {
    # one pair per preset: the classifier's 6 epochs and the birthplace scratch run's 60 on one epoch axis hid
    # the first pair, and the page opens on this preset's runs (the same runs when it is picked again)
    "pretrained vs from scratch": ComparisonPreset(
        ("names-pretrained", "names-scratch"),
        "accuracy", "The same classifier finetuned from a pretrained model and from scratch.",
        pairs=(("names-pretrained", "names-scratch"),)),
    "pretrained vs from scratch (birthplace)": ComparisonPreset(
        ("birth-vanilla-pretrained", "birth-vanilla-scratch"),
        "accuracy", "The same birthplace finetuning from a pretrained model and from scratch.",
        pairs=(("birth-vanilla-pretrained", "birth-vanilla-scratch"),)),
    "positional encodings": ComparisonPreset(
        ("lm-learned", "lm-sinusoidal", "lm-alibi", "lm-rope"),
        "loss", "Same model and data; only the positional scheme differs."),
    "vanilla vs synthesizer": ComparisonPreset(
        ("birth-vanilla-pretrained", "birth-synthesizer-pretrained"),
        "accuracy", "Synthesizer attention learns weights without query-key dot products."),
    # the bundled recipe run at three seeds (its histories: checkpoints/induction.seed-histories.json), one band
    "induction over 3 seeds": ComparisonPreset(
        ("induction-seed*",),
        "loss", "The induction recipe at three seeds, drawn as their mean with a band: where the phase change falls "
                "from seed to seed."),
    # the names pair at three seeds (checkpoints/names-*.seed-histories.json): pretraining's gain beside the seeds'
    "pretrained vs from scratch over 3 seeds": ComparisonPreset(  # spread, two bands
        ("names-pretrained-seed*", "names-scratch-seed*"),
        "accuracy", "The same classifier with and without pretraining, each at three seeds, drawn as its mean with a "
                    "band: is the gap larger than the spread between seeds?"),
}


def preset_runs(preset: ComparisonPreset, names: Iterable[str]) -> list[str]:
    """Names matching the preset's patterns, in the preset's order."""
    names = list(names)
    out: list[str] = []
    for pattern in preset.patterns:
        out += [n for n in names if fnmatch.fnmatchcase(n, pattern) and n not in out]
    return out


def comparison_verdicts(preset: ComparisonPreset | None, frame: pd.DataFrame, min_points: float = 2.0
                        ) -> list[str]:
    """One sentence per (with, without) pair whose final validation values are in `frame`: both values,
    the difference, and whether it reaches `min_points` percentage points (accuracy; 2 points is about one
    standard error of an accuracy near 50% on 600 questions) or 1% (other metrics)."""
    if preset is None:
        return []
    subset = frame[(frame["metric"] == preset.metric) & (frame["split"] == "val")]
    lines = []
    for with_, without in preset.pairs:
        a, b = (last_finite(subset[subset["run"] == run]) for run in (with_, without))
        if not (math.isfinite(a) and math.isfinite(b)):
            continue
        if preset.metric == "accuracy":
            # the difference of the numbers as shown, so the sentence adds up for a reader
            diff, shown = round(100 * a, 1) - round(100 * b, 1), (f"{100 * a:.1f}%", f"{100 * b:.1f}%")
            size, unit, clear = f"{diff:+.1f}", " points", abs(diff) >= min_points
        else:
            diff, shown = a - b, (f"{a:.4g}", f"{b:.4g}")
            size, unit, clear = f"{diff:+.3g}", "", abs(diff) >= 0.01 * abs(b)
        goal = METRIC_GOAL.get(preset.metric)
        better = (diff > 0) == (goal == "max")
        verdict = ("better with it" if better else "worse with it") if clear else \
            f"under {min_points:g}{unit or '%'}: no clear difference in these runs"
        lines.append(f"{with_} ends at {shown[0]} validation {preset.metric}, {without} at {shown[1]}: "
                     f"{size}{unit} ({verdict}).")
    return lines


def first_epoch_gaps(preset: ComparisonPreset | None, frame: pd.DataFrame) -> list[str]:
    """One sentence per (with, without) pair: both runs' validation values at the first epoch they were both
    evaluated at, and the difference (pretraining's head start, before finetuning catches up or not);
    `comparison_verdicts` says where they end."""
    if preset is None:
        return []
    subset = frame[(frame["metric"] == preset.metric) & (frame["split"] == "val")].dropna(subset=["epoch", "value"])
    lines = []
    for with_, without in preset.pairs:
        a, b = (subset[subset["run"] == run].groupby("epoch")["value"].last() for run in (with_, without))
        common = sorted(set(a.index) & set(b.index))
        if not common:
            continue
        epoch = common[0]
        if preset.metric == "accuracy":
            diff = round(100 * a[epoch], 1) - round(100 * b[epoch], 1)
            shown, size = (f"{100 * a[epoch]:.1f}%", f"{100 * b[epoch]:.1f}%"), f"{diff:+.1f} points"
        else:
            shown, size = (f"{a[epoch]:.4g}", f"{b[epoch]:.4g}"), f"{a[epoch] - b[epoch]:+.3g}"
        lines.append(f"After epoch {epoch:g}, {with_} has {shown[0]} validation {preset.metric} and {without} "
                     f"{shown[1]}: {size}.")
    return lines
