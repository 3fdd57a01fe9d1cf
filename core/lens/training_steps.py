"""The model across training: what the pages compute from a run's snapshots (core/io/snapshots.py).

`step_marks` places the kept steps on a loss curve, and `answers_by_step` asks a birthplace model one question
at every kept step (each step's weights from `core.io.snapshots.at_step`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from core.io.loaded import LoadedCheckpoint
from core.io.snapshots import Snapshot, SnapshotFile, at_step


@dataclass(frozen=True)
class StepMark:
    """A kept step on a loss curve: x in the curve's unit, y the training loss the trainer measured."""

    run: str
    step: int
    x: float
    y: float
    snapshot: bool = True  # False: the checkpoint's own weights, at a step no snapshot has (the slider's last)


X_OF = {"step": lambda s: s.step, "epoch": lambda s: s.epoch, "tokens": lambda s: s.tokens,
        "wall_time": lambda s: s.wall_time}


def step_marks(run: str, snapshots: Sequence[Snapshot], x: str, progress: dict | None = None,
               history: Sequence[dict] = ()) -> list[StepMark]:
    """Marks for the train-loss curve of `run` (the curves page's x axes: step, epoch, tokens, wall time): every
    snapshot, and the checkpoint's own step (`progress`: its saved step, epoch, tokens, wall time) when no snapshot
    has it, at the last train loss of `history` at or before it. These are the steps the Attention page's slider
    and the head roles panel offer (core.io.snapshots.slider_steps), so every page counts the same kept steps
    (issue 63: the curve marked 3 where the panel beside it said 4)."""
    if x not in X_OF:
        return []
    marks = [StepMark(run, s.step, float(X_OF[x](s)), s.loss) for s in snapshots if math.isfinite(s.loss)]
    step, where = (progress or {}).get("step"), (progress or {}).get(x)
    if isinstance(step, int) and isinstance(where, (int, float)) and all(s.step < step for s in snapshots):
        losses = [r for r in history if r.get("split") == "train" and r.get("metric") == "loss"
                  and isinstance(r.get("step"), (int, float)) and r["step"] <= step
                  and isinstance(r.get("value"), (int, float)) and math.isfinite(r["value"])]
        if losses:
            last = max(losses, key=lambda r: r["step"])
            marks.append(StepMark(run, step, float(where), float(last["value"]), snapshot=False))
    return marks


def kept_steps_line(marks: Sequence[StepMark]) -> str:
    """'the 4 training steps kept (induction: 3 snapshots and the checkpoint itself at step 1,500)': what the marks
    of one or more runs are, counted as the pages count them."""
    runs = list(dict.fromkeys(m.run for m in marks))
    parts = []
    for run in runs:
        mine = [m for m in marks if m.run == run]
        final = [m for m in mine if not m.snapshot]
        n = len(mine) - len(final)
        snaps = f"{n} snapshot{'s' if n != 1 else ''}"
        parts.append(f"{run}: {snaps} and the checkpoint itself at step {final[0].step:,}" if final else
                     f"{run}: {snaps}")
    word = "step" if len(marks) == 1 else "steps"
    return f"the {len(marks)} training {word} kept ({'; '.join(parts)})"


@dataclass
class StepAnswers:
    """One question at every kept step: a row per step, and the probability of a few places per step."""

    table: pd.DataFrame  # step, training loss, greedy answer, confidence, [correct, truth's rank], top, tokens
    probabilities: pd.DataFrame  # index: step; columns: the places worth following (normalised over candidates)


def answers_by_step(loaded: LoadedCheckpoint, snapshots: SnapshotFile, question: str, places: Sequence[str],
                    truth: str | None = None, top: int = 3, follow: int = 6) -> StepAnswers:
    """A birthplace model's greedy answer, its confidence, the truth's rank and the top candidates at
    every kept step: when did it stop saying the prior ("London")? `probabilities` follows the truth and
    the places that were the top candidate at some step (at most `follow`)."""
    from core.lens.probe.answers import ask

    rows, rankings = [], {}
    for snap in snapshots.snapshots:
        then = at_step(loaded, snapshots, snap.step)
        answer = ask(then.model, then.tokenizer, question, places)
        ranking, probs = answer.ranking, answer.ranking.probabilities
        rankings[snap.step] = dict(zip(ranking.places, probs))
        row = {"step": snap.step, "training loss": snap.loss, "greedy answer": answer.answer,
               "confidence": answer.confidence}
        if truth:
            rank = ranking.rank_of(truth)
            row["correct"] = answer.answer == truth
            row["truth's rank"] = f"{rank} of {len(ranking.places)}" if rank else "not a candidate"
        row["top candidates"] = ", ".join(f"{p} {q:.0%}" for p, q in zip(ranking.places[:top], probs[:top]))
        rows.append(row | {"tokens": snap.tokens})
    leaders = [max(r, key=r.get) for r in rankings.values() if r]
    followed = list(dict.fromkeys(([truth] if truth and any(truth in r for r in rankings.values()) else [])
                                  + leaders[::-1]))[:follow]
    probabilities = pd.DataFrame({p: [r.get(p, 0.0) for r in rankings.values()] for p in followed},
                                 index=pd.Index(list(rankings), name="step"))
    return StepAnswers(pd.DataFrame(rows), probabilities)


def first_step_answering(frame: pd.DataFrame, answer: str) -> int | None:
    """The first kept step from which the greedy answer is `answer` at every later kept step."""
    answers = list(frame["greedy answer"]) if len(frame) else []
    if not answers or answers[-1] != answer:
        return None
    i = len(answers) - 1
    while i > 0 and answers[i - 1] == answer:
        i -= 1
    return int(frame["step"].iloc[i])


def answer_story(frame: pd.DataFrame) -> str:
    """One sentence from the table of `answers_by_step`: since which kept step the model gives its final
    answer, and what it said at the kept step before."""
    if not len(frame):
        return "No kept step to ask."
    answers, steps = list(frame["greedy answer"]), [int(s) for s in frame["step"]]
    final = answers[-1]
    since = first_step_answering(frame, final)
    i = steps.index(since)
    if i == 0:
        return f"It answers {final!r} at every kept step, from step {steps[0]:,} to {steps[-1]:,}."
    return (f"It answers {final!r} from step {since:,} on ({len(steps) - i} of {len(steps)} kept steps); at step "
            f"{steps[i - 1]:,} it said {answers[i - 1]!r}.")
