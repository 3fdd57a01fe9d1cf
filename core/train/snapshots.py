"""Which steps a run keeps as snapshots, and how the trainer keeps them (the file: core/io/snapshots.py).

Steps are log-spaced, so the first ones are dense: most of what a head learns, it learns early. A run
with `TrainerConfig(snapshots=10)` over 640 steps keeps steps 0 (the initial weights), 1, 2, 5, 11, 25,
57, 127, 285 and 640. Snapshots wait in memory and are written with each checkpoint save (before the
checkpoint), so a resumed run finds exactly the ones taken up to the step it resumes from.
"""

from __future__ import annotations

import json
from pathlib import Path

from core.io import snapshots as files
from core.model.transformer import Transformer


def log_spaced_steps(count: int, total: int) -> list[int]:
    """Step 0, then `count - 1` steps evenly spaced in log(step) from 1 to `total`, the last step always
    among them; every step when the run is shorter than that."""
    if count <= 0 or total <= 0:
        return []
    k = count - 1
    if k >= total:
        return list(range(total + 1))
    if k == 0:
        return [total]
    steps: list[int] = []
    for i in range(k):
        raw = round(total ** (i / (k - 1))) if k > 1 else total
        steps.append(max(raw, steps[-1] + 1 if steps else 1))
    for i in range(k - 1, -1, -1):  # keep them distinct below `total`, which is the last
        steps[i] = min(steps[i], total - (k - 1 - i))
    return [0, *steps]


def linear_spaced_steps(count: int, total: int) -> list[int]:
    """`count` steps evenly spaced from step 0, the last one a spacing before `total`: the run's final weights are
    its checkpoint's, which the step slider shows last, so no snapshot repeats them. A run whose change comes in
    the middle (an induction head's phase change) is seen at the same resolution throughout."""
    if count <= 0 or total <= 0:
        return []
    if count >= total:
        return list(range(total))
    return sorted({round(total * i / count) for i in range(count)})


def _loss_driven_start(count: int, total: int) -> list[int]:
    """The loss-driven plan starts with step 0 only; the rest is decided as the loss falls (SnapshotKeeper)."""
    return [0] if count > 0 and total > 0 else []


SPACINGS = {"log": log_spaced_steps, "linear": linear_spaced_steps, "loss": _loss_driven_start}
LOSS_EMA = 0.05  # the loss-driven spacing follows an exponential average of the batch losses (about 20 steps)


class SnapshotKeeper:
    """The trainer's snapshots: the plan, the ones taken so far, and their file beside the checkpoint."""

    def __init__(self, count: int, dtype: str, total_steps: int, spacing: str = "log") -> None:
        if dtype not in files.DTYPES:
            raise ValueError(f"snapshot_dtype must be one of {', '.join(files.DTYPES)}, not {dtype!r}.")
        if spacing not in SPACINGS:
            raise ValueError(f"snapshot_spacing must be one of {', '.join(SPACINGS)}, not {spacing!r}.")
        self.dtype = dtype
        self.spacing, self.count = spacing, count
        self.plan = SPACINGS[spacing](count, total_steps)
        self.kept: list[tuple[files.Snapshot, dict]] = []
        self.levels: list[float] = []  # loss spacing: the averaged losses still to reach, highest first
        self.average: float | None = None

    @property
    def active(self) -> bool:
        return bool(self.plan)

    def wants(self, step: int, loss: float | None = None) -> bool:
        """Whether to keep the weights after `step`. The loss spacing ("loss") keeps step 0, then a step each time
        the averaged training loss first falls below one of `count - 1` levels evenly spaced between its first
        value and zero (two thirds and one third of it for 3 snapshots): dense where the loss falls fast, as in
        a phase change, and nothing while it stays flat. A resumed run sets its levels again from its first
        loss after resuming."""
        if self.spacing == "loss" and loss is not None and self.count > 0:
            first = self.average is None
            self.average = loss if first else (1 - LOSS_EMA) * self.average + LOSS_EMA * loss
            if first and not self.levels:
                self.levels = [loss * (1 - k / self.count) for k in range(1, self.count)]
            if self.levels and self.average <= self.levels[0] and step not in self.plan:
                while self.levels and self.average <= self.levels[0]:
                    self.levels.pop(0)
                self.plan = sorted({*self.plan, step})
        return step in self.plan and all(s.step != step for s, _ in self.kept)

    def take(self, model: Transformer, step: int, epoch: int, tokens: int, loss: float, wall_time: float) -> None:
        snap = files.Snapshot(step=step, epoch=epoch, tokens=tokens, loss=float(loss), wall_time=round(wall_time, 3))
        self.kept = [(s, w) for s, w in self.kept if s.step != step] + [(snap, files.capture(model, self.dtype))]

    def write(self, checkpoint: Path, config_json: str) -> None:
        """Write the file beside `checkpoint`; a run without snapshots removes a stale one (an earlier run's
        at the same path would otherwise show another run's weights)."""
        path = files.snapshots_path(checkpoint)
        if self.active:
            files.write(path, self.kept, config_json, self.plan)
        else:
            path.unlink(missing_ok=True)

    def resume(self, checkpoint: Path, step: int) -> None:
        """Carry on with the file's plan and the snapshots taken up to `step` (the checkpoint's)."""
        path = files.snapshots_path(checkpoint)
        if not path.is_file():
            return
        kept, raw = files.read_for_resume(path)
        self.kept = [(s, w) for s, w in kept if s.step <= step]
        self.plan = sorted(json.loads(raw.get("plan") or "[]")) or [s.step for s, _ in kept]
        dtypes = {str(t.dtype).removeprefix("torch.") for _, w in kept for t in w.values() if t.is_floating_point()}
        self.dtype = next(iter(dtypes & set(files.DTYPES)), self.dtype)
