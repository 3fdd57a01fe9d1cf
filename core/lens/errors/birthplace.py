"""A birthplace model on a questions file, question by question: the assignment-exact evaluation
(`core.lens.probe.evaluation`: greedy decoding, exact match, the most-frequent-place baseline) with each answer's
confidence (the probability of the greedy answer). `score_birthplaces` is the computation the probe's Dev set tab
runs (`core.lens.probe.dev_set.analyse_dev` joins the corpus evidence to it); `BirthplaceErrors` is the same
result as the Errors page and the command read it: one row per question, a caption, the slices."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from core.lens.probe.answers import answer_probabilities
from core.lens.probe.evaluation import BirthplaceResult, evaluate_birthplaces
from core.lens.probe.questions import name_from_question
from core.lens.trace import Progress
from core.model.tokenizer import Tokenizer

COLUMNS = ("text", "name", "gold", "predicted", "right", "confidence", "pieces", "line")


@dataclass
class BirthplaceScores:
    result: BirthplaceResult
    confidences: np.ndarray  # (N,) probability of each greedy answer (NaN where it cannot be rescored)


def score_birthplaces(model, tokenizer: Tokenizer, pairs: Sequence[tuple[str, str]], baseline_place: str | None,
                      progress: Progress | None = None) -> BirthplaceScores:
    """Assignment-exact predictions (batched) and the probability of each answer."""
    result = evaluate_birthplaces(model, tokenizer, pairs, baseline_place=baseline_place, progress=progress)
    confidences = answer_probabilities(model, tokenizer, [q for q, _ in pairs], result.predictions)
    return BirthplaceScores(result=result, confidences=np.asarray(confidences, dtype=float))


@dataclass
class BirthplaceErrors:
    model: str
    source: str
    scores: BirthplaceScores
    frame: pd.DataFrame  # COLUMNS, one row per question

    @property
    def count(self) -> int:
        return self.scores.result.total

    @property
    def right(self) -> int:
        return self.scores.result.correct

    @property
    def accuracy(self) -> float:
        return self.scores.result.accuracy

    def mistakes(self) -> pd.DataFrame:
        wrong = self.frame[~self.frame["right"]]
        counted = wrong.groupby(["gold", "predicted"]).size().reset_index(name="count")
        return counted.sort_values(["count", "gold", "predicted"], ascending=[False, True, True],
                                   kind="stable").reset_index(drop=True)

    def caption(self) -> str:
        result = self.scores.result
        line = f"{self.model} gets {result.correct} of {result.total} right ({result.accuracy:.1%})"
        top = self.mistakes()
        if top.empty:
            line += "; it makes no mistake on this file"
        else:
            first = top.iloc[0]
            k = int(first["count"])
            shown = first["predicted"] or "an empty answer"
            line += f"; its most common mistake is {shown} for {first['gold']} ({k} time{'s' if k != 1 else ''})"
        return (line + f"; always answering {result.baseline_place} would get {result.baseline_correct} "
                f"({result.baseline_accuracy:.1%}).")

    def summary(self) -> str:
        """What `python -m core.train evaluate` prints for the same file."""
        return self.scores.result.summary()


def birthplace_errors(model, tokenizer: Tokenizer, pairs: Sequence[tuple[str, str]], baseline_place: str | None,
                      name: str = "the model", source: str = "the file", progress: Progress | None = None
                      ) -> BirthplaceErrors:
    scores = score_birthplaces(model, tokenizer, pairs, baseline_place, progress)
    result = scores.result
    frame = pd.DataFrame({"text": [q for q, _ in pairs], "name": [name_from_question(q) for q, _ in pairs],
                          "gold": result.targets, "predicted": result.predictions, "right": result.hits,
                          "confidence": scores.confidences, "pieces": [len(tokenizer.encode(q)) for q, _ in pairs],
                          "line": np.arange(1, len(pairs) + 1)}, columns=list(COLUMNS))
    return BirthplaceErrors(model=name, source=source, scores=scores, frame=frame)
