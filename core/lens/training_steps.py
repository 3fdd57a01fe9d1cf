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


X_OF = {"step": lambda s: s.step, "epoch": lambda s: s.epoch, "tokens": lambda s: s.tokens,
        "wall_time": lambda s: s.wall_time}


def step_marks(run: str, snapshots: Sequence[Snapshot], x: str) -> list[StepMark]:
    """Marks for the train-loss curve of `run` (the curves page's x axes: step, epoch, tokens, wall time)."""
    return [StepMark(run, s.step, float(X_OF[x](s)), s.loss) for s in snapshots
            if x in X_OF and math.isfinite(s.loss)]


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
