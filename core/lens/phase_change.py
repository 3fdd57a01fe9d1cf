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


def compared_steps(kept: list[int], change: PhaseChange) -> tuple[int, int] | None:
    """The two kept steps whose head scores say what changed across the fall: the last kept at or before the fall's
    start, and the last kept at or before its end (the first kept after it where none is inside). A score that
    rises only after the fall is then not said to rise across it (issue 63: the previous-token head of the bundled
    run rose between steps 338 and 1,500, after the fall ended at ~525). None with fewer than two kept steps."""
    kept = sorted(kept)
    if len(kept) < 2:
        return None
    first = max((s for s in kept if s <= change.start), default=kept[0])
    inside = [s for s in kept if first < s <= change.end]
    last = inside[-1] if inside else next((s for s in kept if s > first), None)
    return None if last is None else (first, last)


def _rises(history: list[tuple[int, HeadRoles]], first: int, last: int,
           rose: float) -> list[tuple[str, int, int, float, float]]:
    scores = dict(history)
    a, b = scores[first], scores[last]
    out = []
    for role in b.scores:
        if role not in a.scores:
            continue
        rise = b.scores[role] - a.scores[role]
        for layer, head in zip(*np.nonzero(rise >= rose)):
            out.append((role, int(layer), int(head), float(a.scores[role][layer, head]),
                        float(b.scores[role][layer, head])))
    return sorted(out, key=lambda r: r[4] - r[3], reverse=True)


def risen_heads(history: list[tuple[int, HeadRoles]], change: PhaseChange,
                rose: float = ROSE) -> list[tuple[str, int, int, float, float]]:
    """(role, layer, head, score before, score after) for the heads whose score grew by at least `rose` between
    the two kept steps `compared_steps` picks around the fall; largest rise first."""
    steps = compared_steps([s for s, _ in history], change)
    return _rises(history, *steps, rose) if steps else []


def risen_later(history: list[tuple[int, HeadRoles]], change: PhaseChange,
                rose: float = ROSE) -> list[tuple[str, int, int, float, float]]:
    """The heads whose score grew by at least `rose` after the fall: from the last step `compared_steps` compares
    to the last kept step (none when that is the last)."""
    steps = compared_steps([s for s, _ in history], change)
    final = max((s for s, _ in history), default=None)
    return _rises(history, steps[1], final, rose) if steps and final > steps[1] else []


def _named(rows: list[tuple[str, int, int, float, float]]) -> str:
    groups: dict[tuple[str, int], list[tuple[str, int, int, float, float]]] = {}
    for row in rows:  # largest rise first, so each group's first row is its strongest head
        groups.setdefault((row[0], row[1]), []).append(row)
    named = []
    for (role, layer), group in groups.items():
        _, _, head, a, b = group[0]
        others = f" (and {len(group) - 1} more head{'s' if len(group) > 2 else ''} of layer {layer})" \
            if len(group) > 1 else ""
        named.append(f"{role} L{layer}H{head} {a:.2f} -> {b:.2f}{others}")
    return ", ".join(named)


def phase_sentence(change: PhaseChange | None, risen: list[tuple[str, int, int, float, float]],
                   history_steps: list[int] | None = None,
                   later: list[tuple[str, int, int, float, float]] = ()) -> str:
    """One sentence: where the loss falls fastest, from what to what, and per role and layer the head that rose
    most across the fall (with how many others of that layer rose too), between which kept steps; then the heads
    that rose only later (`later`, from `risen_later`)."""
    if change is None:
        return "The loss never falls in this run, so there is no phase change to locate."
    text = (f"The loss falls fastest at step {change.step:,}: from {change.loss_before:.2f} at step "
            f"{change.start:,} to {change.loss_after:.2f} at step {change.end:,}")
    if history_steps is not None and len(history_steps) < 2:
        return text + "; this run keeps too few snapshots to say which heads changed."
    steps = compared_steps(history_steps, change) if history_steps is not None else None
    between = f"between the kept steps {steps[0]:,} and {steps[1]:,}" if steps else "across it"
    if not risen:
        text += f"; no head's role score rose by {ROSE:.1f} or more {between}"
    else:
        text += f"; {between} the heads that rose are " + _named(risen)
    if later and steps:
        text += f"; later (steps {steps[1]:,} to {max(history_steps):,}) " + _named(later) + " rose"
    return text + "."
