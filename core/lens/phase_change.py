"""The phase change of a training run: where its loss falls fastest, and which heads' roles rose there.

`roles_over_steps(loaded, snapshots)` scores every kept step of a run (core.lens.heads on the weights of that
step); `phase_change(steps, losses)` finds the step where the loss falls fastest (the steepest drop of the loss,
smoothed over a few records so that one noisy batch cannot win); `phase_sentence` says both in one sentence:
the step, the loss before and after, and the heads whose scores rose most between the kept steps around it.
For the bundled `induction` run the loss is the repeated-token loss (Olsson et al. 2022's phase change).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from core.lens.heads import DEFAULT_SAMPLES, HeadRoles, head_roles

ROSE = 0.2  # a head "rose" when its score grew at least this much across the change


@dataclass(frozen=True)
class PhaseChange:
    step: int  # where the smoothed loss falls fastest (the middle of the steepest stretch)
    start: int  # the stretch of the run where the loss falls: from `start` ...
    end: int  # ... to `end` (the smoothed loss leaves its starting level and reaches its final level)
    loss_before: float  # the smoothed loss at `start`
    loss_after: float  # ... and at `end`


def _smooth(values: np.ndarray, width: int) -> np.ndarray:
    if width <= 1 or len(values) < width:
        return values
    kernel = np.ones(width) / width
    padded = np.concatenate([np.full(width // 2, values[0]), values, np.full(width - 1 - width // 2, values[-1])])
    return np.convolve(padded, kernel, mode="valid")


def phase_change(steps, losses, width: int = 5) -> PhaseChange | None:
    """The steepest fall of the loss (None: fewer than three records, or a loss that never falls). `start` and
    `end` bracket the fall: the last step before it still within 10% of the fall from the starting level, and
    the first step after it within 10% of the final level."""
    steps, losses = np.asarray(steps, dtype=float), np.asarray(losses, dtype=float)
    keep = np.isfinite(losses)
    steps, losses = steps[keep], losses[keep]
    if len(steps) < 3:
        return None
    order = np.argsort(steps)
    steps, smooth = steps[order], _smooth(losses[order], width)
    slopes = np.diff(smooth) / np.maximum(np.diff(steps), 1e-12)
    k = int(np.argmin(slopes))
    if slopes[k] >= 0:
        return None
    high, low = float(smooth[: k + 1].max()), float(smooth[k + 1:].min())
    fall = high - low
    before = [i for i in range(k + 1) if smooth[i] >= high - 0.1 * fall]
    after = [i for i in range(k + 1, len(steps)) if smooth[i] <= low + 0.1 * fall]
    start, end = before[-1], after[0]
    return PhaseChange(step=int(round((steps[k] + steps[k + 1]) / 2)), start=int(steps[start]),
                       end=int(steps[end]), loss_before=float(smooth[start]), loss_after=float(smooth[end]))


def roles_over_steps(loaded, found, length: int = 20, samples: int = DEFAULT_SAMPLES,
                     seed: int = 0) -> list[tuple[int, HeadRoles]]:
    """(step, HeadRoles) at every kept step of a run (`found`: its core.io.snapshots.SnapshotFile)."""
    from core.io import snapshots

    out = []
    for step in snapshots.slider_steps(loaded, found):
        model = snapshots.at_step(loaded, found, step).model
        out.append((step, head_roles(model, loaded.tokenizer, length, samples, seed)))
    return out


def risen_heads(history: list[tuple[int, HeadRoles]], change: PhaseChange,
                rose: float = ROSE) -> list[tuple[str, int, int, float, float]]:
    """(role, layer, head, score before, score after) for the heads whose score grew by at least `rose` between
    the last kept step at or before the fall's start and the first at or after its end; largest rise first."""
    if not history:
        return []
    steps = [s for s, _ in history]
    before = max((i for i, s in enumerate(steps) if s <= change.start), default=0)
    after = min((i for i, s in enumerate(steps) if s >= change.end), default=len(steps) - 1)
    a, b = history[before][1], history[after][1]
    out = []
    for role in b.scores:
        if role not in a.scores:
            continue
        rise = b.scores[role] - a.scores[role]
        for layer, head in zip(*np.nonzero(rise >= rose)):
            out.append((role, int(layer), int(head), float(a.scores[role][layer, head]),
                        float(b.scores[role][layer, head])))
    return sorted(out, key=lambda r: r[4] - r[3], reverse=True)


def phase_sentence(change: PhaseChange | None, risen: list[tuple[str, int, int, float, float]],
                   history_steps: list[int] | None = None) -> str:
    """One sentence: where the loss falls fastest, from what to what, and per role and layer the head that rose
    most across the fall (with how many others of that layer rose too)."""
    if change is None:
        return "The loss never falls in this run, so there is no phase change to locate."
    text = (f"The loss falls fastest at step {change.step:,}: from {change.loss_before:.2f} at step "
            f"{change.start:,} to {change.loss_after:.2f} at step {change.end:,}")
    if history_steps is not None and len(history_steps) < 2:
        return text + "; this run keeps too few snapshots to say which heads changed."
    if not risen:
        return text + f"; no head's role score rose by {ROSE:.1f} or more across it."
    groups: dict[tuple[str, int], list[tuple[str, int, int, float, float]]] = {}
    for row in risen:  # largest rise first, so each group's first row is its strongest head
        groups.setdefault((row[0], row[1]), []).append(row)
    named = []
    for (role, layer), rows in groups.items():
        _, _, head, a, b = rows[0]
        others = f" (and {len(rows) - 1} more head{'s' if len(rows) > 2 else ''} of layer {layer})" \
            if len(rows) > 1 else ""
        named.append(f"{role} L{layer}H{head} {a:.2f} -> {b:.2f}{others}")
    return text + "; across it the heads that rose are " + ", ".join(named) + "."
