"""Stored versus extractable: for each dev person, did pretraining store the birthplace (the pretrained model
completes the person's own document with it, `core.lens.probe.evaluation.memorized`) and did finetuning reach it
(the finetuned model answers the question)? A 2x2 of people per model: an answer without the stored fact is
a guess from the name; a stored fact without the answer is knowledge finetuning did not reach."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from core.lens.probe.evaluation import BirthplaceResult
from core.lens.probe.questions import name_from_question

STORED = ("memorised", "not memorised")
ANSWERED = ("answered", "wrong")
# What each cell says about the people in it (rows: pretraining, columns: finetuning).
CELLS = {
    ("memorised", "answered"): "stored in pretraining and extracted by finetuning",
    ("memorised", "wrong"): "stored, but finetuning did not reach it",
    ("not memorised", "answered"): "answered without the stored fact: a guess from the name",
    ("not memorised", "wrong"): "neither stored nor answered",
}


@dataclass
class KnowledgeTable:
    """One model on one question file: one row per person, and the 2x2 of counts."""

    people: pd.DataFrame  # name, truth, prediction, stored (memorised / not memorised), answered, cell
    pretrained: bool  # False: the model was never pretrained, so no person's fact was stored

    @property
    def counts(self) -> pd.DataFrame:
        """Rows STORED, columns ANSWERED, every cell present (zeros too); the counts add up to the people."""
        table = pd.crosstab(self.people["stored"], self.people["answered"])
        return table.reindex(index=list(STORED), columns=list(ANSWERED), fill_value=0)

    def cell(self, stored: str, answered: str) -> pd.DataFrame:
        rows = self.people[(self.people["stored"] == stored) & (self.people["answered"] == answered)]
        return rows[["name", "truth", "prediction"]]


def knowledge_table(questions: Sequence[str], result: BirthplaceResult,
                    memorised: Sequence[bool | None] | None) -> KnowledgeTable:
    """`memorised`: per question, from the model's pretrained file (None for a person without a document
    naming the place: counted as not memorised); None for a model that was not pretrained."""
    flags = list(memorised) if memorised is not None else [False] * len(questions)
    if len(flags) != len(questions):
        raise ValueError(f"{len(flags)} memorisation flags for {len(questions)} questions.")
    stored = [STORED[0] if flag else STORED[1] for flag in flags]
    answered = [ANSWERED[0] if hit else ANSWERED[1] for hit in result.hits]
    people = pd.DataFrame({"name": [name_from_question(q) for q in questions], "truth": result.targets,
                           "prediction": result.predictions, "stored": stored, "answered": answered,
                           "cell": [CELLS[s, a] for s, a in zip(stored, answered, strict=True)]})
    return KnowledgeTable(people=people, pretrained=memorised is not None)
