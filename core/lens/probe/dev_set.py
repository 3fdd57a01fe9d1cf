"""The dev set, question by question: the assignment-exact evaluation (`core.lens.probe.evaluation.BirthplaceResult`,
the one home of accuracy and the baseline) joined with the answer's confidence and the corpus evidence; models
side by side; filters; reliability (calibration) and evidence categories.

Stored versus extractable: for each dev person, did pretraining store the birthplace (the pretrained model
completes the person's own document with it, `core.lens.probe.evaluation.memorized`) and did finetuning reach it
(the finetuned model answers the question)? A 2x2 of people per model (`knowledge_table`): an answer without the
stored fact is a guess from the name; a stored fact without the answer is knowledge finetuning did not reach."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import pandas as pd

from core.lens.errors.birthplace import score_birthplaces
from core.lens.errors.slices import expected_calibration_error, reliability_table
from core.lens.probe.corpus import CATEGORIES, CorpusIndex, categorise
from core.lens.probe.evaluation import BirthplaceResult, country_prior_answers
from core.lens.probe.questions import name_from_question
from core.lens.trace import Progress
from core.model.tokenizer import Tokenizer
from core.model.transformer import Transformer

ANALYSIS_COLUMNS = ("question", "name", "truth", "prediction", "correct", "confidence", "category",
                    "in_corpus", "truth_in_document", "prediction_in_document", "prediction_is_label")
OUTCOMES = ("all", "correct", "wrong")
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
class DevAnalysis:
    """One model on one question file: the evaluation itself (predictions, accuracy, baseline) and one
    row per question of what lies behind each answer."""

    result: BirthplaceResult
    frame: pd.DataFrame  # one row per question, ANALYSIS_COLUMNS, index = question number (0-based)


def analyse_result(questions: Sequence[str], result: BirthplaceResult, confidences: Sequence[float],
                   index: CorpusIndex, labels: Iterable[str]) -> DevAnalysis:
    """Join an evaluation with the corpus evidence, question by question; no model needed."""
    label_set = set(labels)
    rows = []
    for question, truth, prediction, correct, confidence in zip(
            questions, result.targets, result.predictions, result.hits, confidences, strict=True):
        name = name_from_question(question)
        evidence = index.evidence(name, truth)
        rows.append({"question": question, "name": name, "truth": truth, "prediction": prediction,
                     "correct": correct, "confidence": float(confidence),
                     "category": categorise(correct, evidence), "in_corpus": evidence.in_corpus,
                     "truth_in_document": bool(evidence.truth_mentioned),
                     "prediction_in_document": prediction in evidence.places,
                     "prediction_is_label": prediction in label_set})
    return DevAnalysis(result=result, frame=pd.DataFrame(rows, columns=list(ANALYSIS_COLUMNS)))


def analyse_predictions(pairs: Sequence[tuple[str, str]], predictions: Sequence[str],
                        confidences: Sequence[float], index: CorpusIndex, labels: Iterable[str],
                        baseline_place: str) -> DevAnalysis:
    """`analyse_result` for predictions made elsewhere (unit-testable on a hand-made corpus)."""
    result = BirthplaceResult(predictions=list(predictions), targets=[t for _, t in pairs],
                              baseline_place=baseline_place)
    return analyse_result([q for q, _ in pairs], result, confidences, index, labels)


def analyse_dev(model: Transformer, tokenizer: Tokenizer, pairs: Sequence[tuple[str, str]],
                index: CorpusIndex, labels: Sequence[str], baseline_place: str,
                progress: Progress | None = None) -> DevAnalysis:
    """Assignment-exact predictions (batched, cached) + confidence (the error-analysis core's birthplace
    evaluation, core.lens.errors.birthplace) + evidence category per question."""
    scored = score_birthplaces(model, tokenizer, pairs, baseline_place, progress)
    return analyse_result([q for q, _ in pairs], scored.result, scored.confidences, index, labels)


def pretraining_label(name: str, metadata: Mapping[str, object]) -> str:
    """What a checkpoint was finetuned from, as recorded in its metadata (`pretrained_from`)."""
    source = metadata.get("pretrained_from")
    if source:
        return f"pretrained ({source})"
    if source == "" or "scratch" in name.lower():
        return "not pretrained"
    return "not recorded"


def comparison_table(analyses: Mapping[str, DevAnalysis], pretraining: Mapping[str, str],
                     train_places: Sequence[str] = ()) -> pd.DataFrame:
    """One row per model (accuracy, evidence categories), then the baselines: the most frequent place, and
    (when the places are the world's cities) the name's country prior."""
    rows = []
    for model, analysis in analyses.items():
        result, frame = analysis.result, analysis.frame
        counts = Counter(frame["category"])
        rows.append({"model": model, "pretraining": pretraining.get(model, ""), "accuracy": result.accuracy,
                     "correct": result.correct, "questions": result.total,
                     "mean confidence": float(frame["confidence"].mean()) if result.total else float("nan"),
                     **{category: counts.get(category, 0) for category in CATEGORIES}})
    if analyses:
        first = next(iter(analyses.values())).result
        rows.append({"model": f"baseline: always '{first.baseline_place}'", "pretraining": "",
                     "accuracy": first.baseline_accuracy, "correct": first.baseline_correct,
                     "questions": first.total, "mean confidence": float("nan")})
        prior = country_prior_answers(train_places, first.targets)
        if any(prior):
            correct = sum(a == t for a, t in zip(prior, first.targets, strict=True))
            rows.append({"model": "baseline: the name's country's most frequent place", "pretraining": "",
                         "accuracy": correct / max(first.total, 1), "correct": correct, "questions": first.total,
                         "mean confidence": float("nan")})
    frame = pd.DataFrame(rows)
    # the numbers first: at 1024 px the long pretraining note would push accuracy out of view
    first = ["model", "accuracy", "correct", "questions", "pretraining"]
    frame = frame[first + [c for c in frame.columns if c not in first]]
    for category in CATEGORIES:  # counts stay integers; the baseline row has none
        if category in frame:
            frame[category] = frame[category].astype("Int64")
    return frame


def filter_analysis(frame: pd.DataFrame, outcome: str = "all", categories: Iterable[str] | None = None,
                    confidence: tuple[float, float] = (0.0, 1.0), place: str | None = None) -> pd.DataFrame:
    """Rows matching every filter; `place` matches the truth or the prediction."""
    keep = pd.Series(True, index=frame.index)
    if outcome == "correct":
        keep &= frame["correct"]
    elif outcome == "wrong":
        keep &= ~frame["correct"]
    if categories is not None:
        keep &= frame["category"].isin(list(categories))
    low, high = confidence
    if (low, high) != (0.0, 1.0):
        keep &= frame["confidence"].between(low, high)
    if place:
        keep &= (frame["truth"] == place) | (frame["prediction"] == place)
    return frame[keep]


def category_summary(frame: pd.DataFrame) -> pd.DataFrame:
    """Per evidence category: count, share of questions, mean and median confidence."""
    rows = []
    for category in CATEGORIES:
        members = frame[frame["category"] == category]
        rows.append({"category": category, "count": len(members),
                     "share": len(members) / len(frame) if len(frame) else 0.0,
                     "mean_confidence": float(members["confidence"].mean()) if len(members) else float("nan"),
                     "median_confidence": float(members["confidence"].median()) if len(members)
                     else float("nan")})
    return pd.DataFrame(rows)


@dataclass
class DevComparison:
    """Every model's analysis of one question file, side by side: what the Dev set tab shows."""

    table: pd.DataFrame  # comparison_table: one row per model, then the baseline
    categories: dict[str, pd.DataFrame]  # model -> category_summary
    reliability: dict[str, pd.DataFrame]  # model -> reliability_table
    calibration: dict[str, float]  # model -> expected_calibration_error


def compare(analyses: Mapping[str, DevAnalysis], metadata: Mapping[str, Mapping[str, object]],
            train_places: Sequence[str] = ()) -> DevComparison:
    """The comparison table (pretraining read from each model's metadata), categories and reliability."""
    pretraining = {m: pretraining_label(m, metadata.get(m, {})) for m in analyses}
    reliability = {m: reliability_table(a.frame["confidence"], a.frame["correct"]) for m, a in analyses.items()}
    return DevComparison(table=comparison_table(analyses, pretraining, train_places),
                         categories={m: category_summary(a.frame) for m, a in analyses.items()},
                         reliability=reliability,
                         calibration={m: expected_calibration_error(t) for m, t in reliability.items()})


def dev_finding(table: pd.DataFrame) -> str:
    """The Dev set tab's lead sentence, from `comparison_table`: each model's accuracy, best first, against
    always answering the most common place."""
    models = table[~table["model"].str.startswith("baseline:")].sort_values("accuracy", ascending=False, kind="stable")
    baseline = table[table["model"].str.startswith("baseline: always")]
    if models.empty:
        return ""
    total = int(models["questions"].iloc[0])
    parts = [f"{row.model} {row.accuracy:.0%}" for row in models.itertuples()]
    listed = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    line = f"Right answers on the {total} dev questions: {listed}"
    if not baseline.empty:
        line += (f"; always answering the most common birthplace would score "
                 f"{baseline['accuracy'].iloc[0]:.0%}")
    return line + "."


# --- stored in pretraining x answered after finetuning ------------------------------------------


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
