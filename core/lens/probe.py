"""Birthplace probe: what a finetuned model retrieves from pretraining, and what it makes up.

Looking only at an answer you cannot tell a retrieved birthplace from an invented one. This module
puts four instruments next to the assignment-exact evaluation of `core.lens.birthplace`:

- candidates: log P(place + ⁇ | question + ⁇) for every known place, teacher forced and batched,
  normalised over the list, next to the free greedy answer (which may be no place at all);
- evidence: does the pretraining corpus have a document about the name, which known places does it
  mention, is the true one among them -> an evidence category per dev prediction;
- fabricated names the model cannot have read about, to see its fallback strategy;
- confidence (the greedy answer's probability) for a reliability chart.

No streamlit here: the page (`pages/probe.py`) caches and draws what these functions return.
"""

from __future__ import annotations

import csv
import io
import math
import os
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from core.data.datasets import DataError, parse_tsv_pairs
from core.data.world import fabricate_names
from core.data.world_tables import COUNTRIES, LOCALES
from core.lens.birthplace import ANSWER_CHARS, Progress, evaluate_birthplaces, most_frequent_place, predict_birthplaces
from core.lens.trace import trace
from core.model.tokenizer import MASK_CHAR, PAD_CHAR, CharTokenizer
from core.model.transformer import Transformer
from core.text import MASK_LABEL, TYPED_QUESTION_MARKS  # noqa: F401  (MASK_LABEL: the page's badge)

# --- the data the probe reads ------------------------------------------------------------------

WORLD_ENV = "ATTENTION_LAB_WORLD"  # a folder with the CS224N files; default: the bundled demo world
DEFAULT_WORLD = Path(__file__).resolve().parents[2] / "data" / "world"
CORPUS_FILE = "wiki.txt"
TRAIN_FILE = "birth_places_train.tsv"
DEV_FILE = "birth_dev.tsv"

QUESTION_TEMPLATE = "Where was {name} born?"
# What people type to end a question: '?', the full-width '？', or the MASK itself ('⁇', or '??' for it).
QUESTION_MARKS = TYPED_QUESTION_MARKS + MASK_CHAR
QUESTION_PATTERN = re.compile(r"\s*Where\s+was\s+(.+?)\s+born\s*[?？⁇]*\s*", re.IGNORECASE)
# How the page shows the MASK (⁇, U+2047) it appends: a word, since many fonts draw ⁇ exactly like "??".
MAX_INPUT_CHARS = 300  # a name or question; the models read ~128 characters
MAX_UPLOAD_BYTES = 2 * 1024 * 1024
MAX_UPLOAD_QUESTIONS = 5000
MAX_FABRICATED = 500
MIN_NAME_CHARS = 3  # shorter "names" would match inside every document
# Real cities of the demo world (also real CS224N birthplaces): candidates besides the training labels.
WORLD_CITIES: tuple[str, ...] = tuple(city for country in COUNTRIES for city in country.city_names)


def world_dir() -> Path:
    return Path(os.environ.get(WORLD_ENV) or DEFAULT_WORLD)


def normalise_name(name: str) -> str:
    return " ".join(name.split())


def question_for(name: str) -> str:
    return QUESTION_TEMPLATE.format(name=normalise_name(name))


def name_from_question(question: str) -> str:
    """The NAME of 'Where was NAME born?'; any other text is taken as a name itself."""
    match = QUESTION_PATTERN.fullmatch(question)
    return normalise_name(match.group(1) if match else question)


@dataclass(frozen=True)
class ProbeInput:
    """What the user typed, read as a question and a name; `problem` is one sentence when unusable."""

    question: str = ""
    name: str = ""
    problem: str | None = None


def read_probe_input(text: str) -> ProbeInput:
    """A name ('Ada Lovelace') or a full question ('Where was Ada Lovelace born?'), ending with '?',
    '？', '⁇' or nothing: the MASK the model answers after is appended by the caller, never typed."""
    text = " ".join((text or "").split())
    if not text:
        return ProbeInput(problem="Type a name (e.g. Ada Lovelace) or a question 'Where was NAME born?'.")
    if len(text) > MAX_INPUT_CHARS:
        return ProbeInput(problem=f"That is {len(text)} characters; type a name or question of at most "
                                  f"{MAX_INPUT_CHARS} characters.")
    text = text.rstrip(QUESTION_MARKS + " ")
    reserved = [c for c in (MASK_CHAR, PAD_CHAR) if c in text]
    if reserved:
        return ProbeInput(problem=f"The text contains the reserved character {reserved[0]} "
                                  f"(U+{ord(reserved[0]):04X}) before its end; remove it, the page adds the "
                                  f"MASK after the question itself.")
    name = name_from_question(text)
    if not name:
        return ProbeInput(problem="Type a name (e.g. Ada Lovelace) or a question 'Where was NAME born?'.")
    return ProbeInput(question=question_for(name), name=name)


def unknown_characters(texts: Iterable[str], tokenizer: CharTokenizer) -> list[str]:
    """Characters outside the model's vocabulary (the model reads them as PAD), in order of appearance."""
    seen: dict[str, None] = {}
    for text in texts:
        for char in text:
            if char not in tokenizer.stoi:
                seen[char] = None
    return list(seen)


def _and(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _char(char: str) -> str:
    return f"{char!r} (U+{ord(char):04X})"


def unknown_summary(texts: Iterable[str], tokenizers: Mapping[str, CharTokenizer], limit: int = 12) -> str | None:
    """ONE sentence for every model at once: which characters of the text which models have never seen
    (they read them as PAD). None when every model knows every character."""
    texts = list(texts)
    missing = {model: unknown_characters(texts, tokenizer) for model, tokenizer in tokenizers.items()}
    chars = list(dict.fromkeys(c for unknown in missing.values() for c in unknown))
    if not chars:
        return None
    shown = chars[:limit]
    more = f" and {len(chars) - limit} more" if len(chars) > limit else ""
    lacking = {c: [m for m, unknown in missing.items() if c in unknown] for c in shown}
    if all(len(models) == len(tokenizers) for models in lacking.values()):
        listed = f"{_and([_char(c) for c in shown])}{more}"
        names = list(tokenizers)
        head = (f"{names[0]} has never seen {listed}" if len(names) == 1 else
                f"The {len(names)} models ({_and(names)}) have never seen {listed}")
    else:
        head = "Characters these models have never seen: " + "; ".join(
            f"{_char(c)} ({_and(models)})" for c, models in lacking.items()) + more
    reader, it = ("it reads" if len(tokenizers) == 1 else "they read"), ("it" if len(chars) == 1 else "them")
    return f"{head}; {reader} {it} as PAD, so answers for names with {it} are guesses about a different string."


# --- evidence from the pretraining corpus ---------------------------------------------------------

CATEGORIES: Mapping[str, str] = {
    "retrieved": "correct, and the name's document mentions the true place",
    "wrong despite evidence": "wrong, although the name's document mentions the true place",
    "correct by prior": "correct without evidence (no document, or one not naming the place): a popular "
                        "place or a lucky guess",
    "unseen name": "wrong, and no document mentions the name",
    "wrong, no evidence": "wrong; the name's document does not mention the true place",
}


def _word_pattern(phrases: Iterable[str]) -> re.Pattern[str] | None:
    """Whole-word alternation, longest first so 'Newcastle upon Tyne' wins over a shorter prefix."""
    ordered = sorted({p for p in phrases if p}, key=lambda p: (-len(p), p))
    if not ordered:
        return None
    return re.compile(r"(?<!\w)(" + "|".join(re.escape(p) for p in ordered) + r")(?!\w)")


@dataclass
class Evidence:
    """What the corpus says about one name."""

    name: str
    documents: list[str]  # the documents that mention the name
    places: list[str]  # known places those documents mention, in order of first mention
    truth: str | None = None
    truth_mentioned: bool | None = None  # None: no truth to check

    @property
    def in_corpus(self) -> bool:
        return bool(self.documents)


@dataclass
class CorpusIndex:
    """name -> documents of a CS224N wiki.txt, built once; and the known places to look for."""

    documents: list[str]
    places: tuple[str, ...]
    by_name: dict[str, list[int]] = field(default_factory=dict)
    _pattern: re.Pattern[str] | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self._pattern = _word_pattern(self.places)

    @classmethod
    def build(cls, corpus: str, places: Iterable[str]) -> CorpusIndex:
        """CS224N lines start with 'NAME. '; the text before the first '. ' is the key."""
        documents = [line.strip() for line in corpus.split("\n") if line.strip()]
        by_name: dict[str, list[int]] = {}
        for i, document in enumerate(documents):
            head, dot, _ = document.partition(". ")
            if dot and head:
                by_name.setdefault(normalise_name(head), []).append(i)
        return cls(documents=documents, places=tuple(dict.fromkeys(places)), by_name=by_name)

    @property
    def names(self) -> set[str]:
        return set(self.by_name)

    def documents_about(self, name: str) -> list[int]:
        """Indices of the documents about `name`: the leading-name key, else any document containing
        the name as whole words (names with '. ' inside, or people mentioned in others' lines)."""
        name = normalise_name(name)
        if name in self.by_name:
            return list(self.by_name[name])
        if len(name) < MIN_NAME_CHARS:
            return []
        pattern = re.compile(r"(?<!\w)" + re.escape(name) + r"(?!\w)")
        return [i for i, doc in enumerate(self.documents) if name in doc and pattern.search(doc)]

    def evidence(self, name: str, truth: str | None = None) -> Evidence:
        name = normalise_name(name)
        texts = [self.documents[i] for i in self.documents_about(name)]
        # Blank the name first: "Florence" is a first name as well as a city.
        blanked = [t.replace(name, "\0" * len(name)) if name else t for t in texts]
        places: dict[str, None] = {}
        if self._pattern is not None:
            for text in blanked:
                for match in self._pattern.finditer(text):
                    places[match.group(1)] = None
        mentioned = None
        if truth is not None:
            mentioned = truth in places or (bool(truth) and _word_pattern([truth]).search("\n".join(blanked))
                                            is not None)
        return Evidence(name=name, documents=texts, places=list(places), truth=truth,
                        truth_mentioned=mentioned)


def categorise(correct: bool, evidence: Evidence) -> str:
    if evidence.truth_mentioned:
        return "retrieved" if correct else "wrong despite evidence"
    if correct:
        return "correct by prior"
    return "unseen name" if not evidence.in_corpus else "wrong, no evidence"


@dataclass
class ProbeData:
    """The corpus index and the question files of one world folder."""

    folder: Path
    index: CorpusIndex
    train_pairs: list[tuple[str, str]]
    dev_pairs: list[tuple[str, str]]

    @property
    def train_places(self) -> list[str]:
        return [place for _, place in self.train_pairs]

    @property
    def labels(self) -> list[str]:
        """Distinct training labels, most frequent first (the candidate list)."""
        counts = Counter(self.train_places)
        return sorted(counts, key=lambda p: (-counts[p], p))

    @property
    def train_names(self) -> set[str]:
        return {name_from_question(q) for q, _ in self.train_pairs}

    @property
    def baseline_place(self) -> str:
        return most_frequent_place(self.train_places)

    def truth(self, name: str) -> tuple[str, str] | None:
        """(place, file) when the name is a question of the train or dev file."""
        name = normalise_name(name)
        for pairs, source in ((self.dev_pairs, DEV_FILE), (self.train_pairs, TRAIN_FILE)):
            for question, place in pairs:
                if name_from_question(question) == name:
                    return place, source
        return None


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DataError(f"{path} is missing; the probe needs {CORPUS_FILE} and {TRAIN_FILE} "
                        f"(set {WORLD_ENV} to a folder with them).") from None
    except UnicodeDecodeError:
        raise DataError(f"{path} is not UTF-8 text.") from None


def load_probe_data(folder: str | Path | None = None) -> ProbeData:
    """wiki.txt + the train file (+ the dev file when present) of a folder; DataError names what is wrong."""
    folder = Path(folder) if folder is not None else world_dir()
    corpus = _read(folder / CORPUS_FILE)
    train = parse_tsv_pairs(_read(folder / TRAIN_FILE), TRAIN_FILE)
    dev = parse_tsv_pairs(_read(folder / DEV_FILE), DEV_FILE) if (folder / DEV_FILE).is_file() else []
    places = [p for _, p in train] + [p for _, p in dev] + list(WORLD_CITIES)
    return ProbeData(folder=folder, index=CorpusIndex.build(corpus, places), train_pairs=train, dev_pairs=dev)


# --- the model's view: candidates, confidence, attention ------------------------------------------


def _context(model: Transformer) -> int:
    """Longest sequence one forward pass covers exactly as generation does (which crops past it)."""
    return model.max_length or model.config.block_size


def _check_generator(model: Transformer) -> None:
    if not model.config.causal or model.config.head != "lm":
        raise ValueError("Only causal language models (birthplace checkpoints) answer questions.")


@torch.no_grad()
def continuation_log_probs(model: Transformer, tokenizer: CharTokenizer, prompts: Sequence[str],
                           continuations: Sequence[str], batch_size: int = 256) -> np.ndarray:
    """log P(continuation | prompt), summed over the continuation's characters, teacher forced.

    Rows are right-padded to equal length (causal: padding after a position never changes it) and
    scored in a few forward passes; the log-probabilities of the continuation's characters are
    gathered. NaN where prompt + continuation is longer than one pass of the model covers.
    """
    _check_generator(model)
    model.eval()
    device = next(model.parameters()).device
    rows = [(tokenizer.encode(p), tokenizer.encode(c)) for p, c in zip(prompts, continuations, strict=True)]
    out = np.full(len(rows), np.nan)
    out[[i for i, (p, c) in enumerate(rows) if p and not c]] = 0.0  # an empty continuation is certain
    limit = _context(model)
    fitting = [i for i, (p, c) in enumerate(rows) if p and c and len(p) + len(c) - 1 <= limit]
    fitting.sort(key=lambda i: len(rows[i][0]) + len(rows[i][1]))  # similar lengths share a batch
    for start in range(0, len(fitting), batch_size):
        chunk = fitting[start: start + batch_size]
        width = max(len(rows[i][0]) + len(rows[i][1]) - 1 for i in chunk)
        idx = torch.full((len(chunk), width), tokenizer.pad_id, dtype=torch.long)
        targets = torch.zeros((len(chunk), width), dtype=torch.long)
        scored = torch.zeros((len(chunk), width), dtype=torch.bool)
        for r, i in enumerate(chunk):
            p, c = rows[i]
            sequence = (p + c)[:-1]
            idx[r, :len(sequence)] = torch.tensor(sequence)
            # the logits at position t predict token t + 1: the continuation starts at len(p)
            targets[r, len(p) - 1: len(p) - 1 + len(c)] = torch.tensor(c, dtype=torch.long)
            scored[r, len(p) - 1: len(p) - 1 + len(c)] = True
        logits, _ = model(idx.to(device))
        log_probs = torch.log_softmax(logits.float(), dim=-1)  # (B, T, V)
        picked = log_probs.gather(-1, targets.to(device).unsqueeze(-1)).squeeze(-1)  # (B, T)
        sums = (picked * scored.to(device)).sum(dim=1).cpu().numpy()
        out[chunk] = sums
    return out


@dataclass
class CandidateRanking:
    """Every known place scored as the answer to one question, best first."""

    question: str
    places: list[str]
    log_probs: np.ndarray  # log P(place + ⁇ | question + ⁇)
    skipped: list[str] = field(default_factory=list)  # too long for the model's context

    @property
    def probabilities(self) -> np.ndarray:
        """Normalised over the candidates: sums to 1 (a softmax of the log-probabilities)."""
        if not len(self.log_probs):
            return np.zeros(0)
        shifted = np.exp(self.log_probs - self.log_probs.max())
        return shifted / shifted.sum()

    @property
    def mass(self) -> float:
        """Total probability the model puts on the whole candidate list (the rest: other strings)."""
        if not len(self.log_probs):
            return 0.0
        top = float(self.log_probs.max())
        return float(math.exp(top) * np.exp(self.log_probs - top).sum())

    def rank_of(self, place: str) -> int | None:
        return self.places.index(place) + 1 if place in self.places else None

    def top(self, k: int = 10) -> pd.DataFrame:
        probs = self.probabilities
        return pd.DataFrame({"rank": range(1, min(k, len(self.places)) + 1), "place": self.places[:k],
                             "probability": probs[:k], "log_prob": self.log_probs[:k]})


def rank_candidates(model: Transformer, tokenizer: CharTokenizer, question: str, places: Sequence[str],
                    batch_size: int = 256) -> CandidateRanking:
    """All candidates of one question in one or a few forward passes (`place⁇` after `question⁇`)."""
    places = list(dict.fromkeys(places))
    prompt = question + MASK_CHAR
    scores = continuation_log_probs(model, tokenizer, [prompt] * len(places), [p + MASK_CHAR for p in places],
                                    batch_size)
    keep = np.isfinite(scores)
    order = sorted(np.flatnonzero(keep), key=lambda i: (-scores[i], places[i]))
    return CandidateRanking(question=question, places=[places[i] for i in order],
                            log_probs=np.array([scores[i] for i in order], dtype=float),
                            skipped=[places[i] for i in np.flatnonzero(~keep)])


def answer_probabilities(model: Transformer, tokenizer: CharTokenizer, questions: Sequence[str],
                         answers: Sequence[str]) -> np.ndarray:
    """The greedy answer's probability: the product of its characters' probabilities and of the closing
    ⁇ (when the answer closed within the 32 generated characters). NaN where it cannot be rescored."""
    continuations = [a + MASK_CHAR if len(a) < ANSWER_CHARS else a for a in answers]
    prompts = [q + MASK_CHAR for q in questions]
    log_probs = continuation_log_probs(model, tokenizer, prompts, continuations)
    unsure = np.array([MASK_CHAR in q for q in questions], dtype=bool)  # the answer split differently
    log_probs[unsure] = np.nan
    return np.exp(log_probs)


@dataclass
class AnswerAttention:
    """Where the model looks when it writes the answer's first character: the last row of the attention
    over question + ⁇ (the ⁇ position predicts the first answer character)."""

    tokens: list[str]  # the prompt as read (cut from the front to the model's context)
    weights: np.ndarray  # (n_layer, n_head, T)
    cut: int = 0  # characters dropped from the front

    @property
    def layer_means(self) -> np.ndarray:
        return self.weights.mean(axis=1)  # (n_layer, T)


def answer_attention(model: Transformer, tokenizer: CharTokenizer, question: str) -> AnswerAttention:
    _check_generator(model)
    ids = tokenizer.encode(question + MASK_CHAR)
    limit = _context(model)
    cut = max(0, len(ids) - limit)  # generation reads the last `limit` tokens, so does this
    ids = ids[cut:]
    record = trace(model, ids, [tokenizer.decode([i]) for i in ids])
    return AnswerAttention(tokens=record.tokens, weights=record.attention[:, :, -1, :], cut=cut)


@dataclass
class ProbeAnswer:
    """One model's answer to one question, with its candidates and confidence."""

    question: str
    answer: str
    confidence: float
    ranking: CandidateRanking

    @property
    def answer_is_candidate(self) -> bool:
        """The answer is one of the places (scored, or too long to score with this question)."""
        return self.answer in self.ranking.places or self.answer in self.ranking.skipped


def ask(model: Transformer, tokenizer: CharTokenizer, question: str, places: Sequence[str]) -> ProbeAnswer:
    answer = predict_birthplaces(model, tokenizer, [question])[0]
    confidence = float(answer_probabilities(model, tokenizer, [question], [answer])[0])
    return ProbeAnswer(question=question, answer=answer, confidence=confidence,
                       ranking=rank_candidates(model, tokenizer, question, places))


def answers_frame(answers: Mapping[str, ProbeAnswer], truth: str | None = None) -> pd.DataFrame:
    """One row per model: its greedy answer, confidence, and where the truth ranks among the candidates."""
    return pd.DataFrame([{"model": model, "greedy answer": a.answer, "confidence": a.confidence,
                          "correct": (a.answer == truth) if truth else None,
                          "answer is a training label": a.answer_is_candidate,
                          "rank of the truth": a.ranking.rank_of(truth) if truth else None,
                          "probability on the candidate list": a.ranking.mass}
                         for model, a in answers.items()])


# --- dev-set error analysis -------------------------------------------------------------------------

ANALYSIS_COLUMNS = ("question", "name", "truth", "prediction", "correct", "confidence", "category",
                    "in_corpus", "truth_in_document", "prediction_in_document", "prediction_is_label")


@dataclass
class DevAnalysis:
    frame: pd.DataFrame  # one row per question, ANALYSIS_COLUMNS, index = question number (0-based)
    baseline_place: str

    @property
    def total(self) -> int:
        return len(self.frame)

    @property
    def accuracy(self) -> float:
        return float(self.frame["correct"].mean()) if self.total else 0.0

    @property
    def baseline_accuracy(self) -> float:
        return float((self.frame["truth"] == self.baseline_place).mean()) if self.total else 0.0

    @property
    def predictions(self) -> list[str]:
        return list(self.frame["prediction"])


def analyse_predictions(pairs: Sequence[tuple[str, str]], predictions: Sequence[str],
                        confidences: Sequence[float], index: CorpusIndex, labels: Iterable[str],
                        baseline_place: str) -> DevAnalysis:
    """Join predictions with the corpus evidence; no model needed (unit-testable on a hand-made corpus)."""
    label_set = set(labels)
    rows = []
    for (question, truth), prediction, confidence in zip(pairs, predictions, confidences, strict=True):
        name = name_from_question(question)
        evidence = index.evidence(name, truth)
        correct = prediction == truth
        rows.append({"question": question, "name": name, "truth": truth, "prediction": prediction,
                     "correct": correct, "confidence": float(confidence),
                     "category": categorise(correct, evidence), "in_corpus": evidence.in_corpus,
                     "truth_in_document": bool(evidence.truth_mentioned),
                     "prediction_in_document": prediction in evidence.places,
                     "prediction_is_label": prediction in label_set})
    frame = pd.DataFrame(rows, columns=list(ANALYSIS_COLUMNS))
    return DevAnalysis(frame=frame, baseline_place=baseline_place)


def analyse_dev(model: Transformer, tokenizer: CharTokenizer, pairs: Sequence[tuple[str, str]],
                index: CorpusIndex, labels: Sequence[str], baseline_place: str,
                progress: Progress | None = None) -> DevAnalysis:
    """Assignment-exact predictions (batched, cached) + confidence + evidence category per question."""
    result = evaluate_birthplaces(model, tokenizer, pairs, baseline_place=baseline_place, progress=progress)
    confidences = answer_probabilities(model, tokenizer, [q for q, _ in pairs], result.predictions)
    return analyse_predictions(pairs, result.predictions, confidences, index, labels, baseline_place)


def pretraining_label(name: str, metadata: Mapping[str, object]) -> str:
    """What a checkpoint was finetuned from, as recorded in its metadata (`pretrained_from`)."""
    source = metadata.get("pretrained_from")
    if source:
        return f"pretrained ({source})"
    if source == "" or "scratch" in name.lower():
        return "not pretrained"
    return "not recorded"


def comparison_table(analyses: Mapping[str, DevAnalysis], pretraining: Mapping[str, str]) -> pd.DataFrame:
    """One row per model (accuracy, evidence categories), then the most-frequent-place baseline."""
    rows = []
    for model, analysis in analyses.items():
        counts = Counter(analysis.frame["category"])
        rows.append({"model": model, "pretraining": pretraining.get(model, ""), "accuracy": analysis.accuracy,
                     "correct": int(analysis.frame["correct"].sum()), "questions": analysis.total,
                     "mean confidence": float(analysis.frame["confidence"].mean()) if analysis.total
                     else float("nan"),
                     **{category: counts.get(category, 0) for category in CATEGORIES}})
    if analyses:
        first = next(iter(analyses.values()))
        correct = int((first.frame["truth"] == first.baseline_place).sum())
        rows.append({"model": f"baseline: always '{first.baseline_place}'", "pretraining": "",
                     "accuracy": first.baseline_accuracy, "correct": correct, "questions": first.total,
                     "mean confidence": float("nan")})
    frame = pd.DataFrame(rows)
    for category in CATEGORIES:  # counts stay integers; the baseline row has none
        if category in frame:
            frame[category] = frame[category].astype("Int64")
    return frame


OUTCOMES = ("all", "correct", "wrong")


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


def reliability_table(confidence: Sequence[float], correct: Sequence[bool], n_bins: int = 10) -> pd.DataFrame:
    """Accuracy per equal-width confidence bin, with counts (empty bins: accuracy NaN)."""
    conf = np.asarray(confidence, dtype=float)
    right = np.asarray(correct, dtype=bool)
    known = np.isfinite(conf)
    conf, right = conf[known], right[known]
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    which = np.clip(np.digitize(conf, edges[1:-1], right=True), 0, n_bins - 1)
    rows = []
    for b in range(n_bins):
        members = which == b
        count = int(members.sum())
        rows.append({"bin": b, "low": edges[b], "high": edges[b + 1], "count": count,
                     "accuracy": float(right[members].mean()) if count else float("nan"),
                     "mean_confidence": float(conf[members].mean()) if count else float("nan")})
    return pd.DataFrame(rows)


def expected_calibration_error(table: pd.DataFrame) -> float:
    """Count-weighted mean |accuracy - confidence| over the bins of `reliability_table`."""
    used = table[table["count"] > 0]
    total = used["count"].sum()
    if not total:
        return float("nan")
    return float((used["count"] * (used["accuracy"] - used["mean_confidence"]).abs()).sum() / total)


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


# --- uploads and export -------------------------------------------------------------------------------


@dataclass(frozen=True)
class QuestionFile:
    pairs: list[tuple[str, str]] = field(default_factory=list)
    problem: str | None = None  # one sentence: why the file cannot be used


def read_question_file(data: bytes, source: str = "the file") -> QuestionFile:
    """An uploaded `Where was NAME born?<TAB>PLACE` file -> pairs, or one sentence saying what is wrong."""
    if not data:
        return QuestionFile(problem=f"{source} is empty.")
    if len(data) > MAX_UPLOAD_BYTES:
        return QuestionFile(problem=f"{source} is {len(data) / 1e6:.1f} MB; question files up to "
                                    f"{MAX_UPLOAD_BYTES // (1024 * 1024)} MB are accepted.")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        return QuestionFile(problem=f"{source} is not UTF-8 text (byte {exc.start} cannot be decoded).")
    if "\0" in text:
        return QuestionFile(problem=f"{source} contains NUL bytes; it is not a text file.")
    for char, label in ((MASK_CHAR, "MASK"), (PAD_CHAR, "PAD")):
        if char in text:
            line = text[: text.index(char)].count("\n") + 1
            return QuestionFile(problem=f"Line {line} of {source} contains the reserved {label} character "
                                        f"{char} (U+{ord(char):04X}).")
    try:
        pairs = parse_tsv_pairs(text, source)
    except DataError as exc:
        hint = " (a questions-only file has no answers to score)" if "no tab" in str(exc) else ""
        return QuestionFile(problem=str(exc).rstrip(".") + hint + ".")
    if len(pairs) > MAX_UPLOAD_QUESTIONS:
        return QuestionFile(problem=f"{source} has {len(pairs)} questions; up to {MAX_UPLOAD_QUESTIONS} are "
                                    f"evaluated at once.")
    empty = next((n for n, (q, a) in enumerate(pairs, 1) if not q.strip() or not a.strip()), None)
    if empty is not None:
        return QuestionFile(problem=f"Question {empty} of {source} has an empty question or answer.")
    return QuestionFile(pairs=[(q.strip(), a.strip()) for q, a in pairs])


def predictions_text(predictions: Sequence[str]) -> str:
    """The assignment's predictions file: one prediction per line, in question order."""
    return "".join(p.replace("\n", " ") + "\n" for p in predictions)


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")  # spreadsheet formula injection (OWASP)


def table_csv(frame: pd.DataFrame) -> str:
    """CSV of a table; text cells that a spreadsheet would run as a formula get a leading quote."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow([str(c) for c in frame.columns])
    for row in frame.itertuples(index=False):
        writer.writerow(["'" + v if isinstance(v, str) and v.startswith(FORMULA_STARTS) else v for v in row])
    return buffer.getvalue()


# --- fabricated names ----------------------------------------------------------------------------------


def fabricated_people(n: int, locales: Sequence[str], seed: int, index: CorpusIndex,
                      train_names: Iterable[str]) -> list[tuple[str, str]]:
    """n (name, locale) pairs of people no document and no training question is about."""
    if not 0 < n <= MAX_FABRICATED:
        raise ValueError(f"Choose between 1 and {MAX_FABRICATED} names.")
    unknown = [loc for loc in locales if loc not in LOCALES]
    if not locales or unknown:
        raise ValueError("Choose at least one locale of the world: " + ", ".join(LOCALES) + ".")
    exclude = index.names | set(train_names)
    for _ in range(5):
        people = fabricate_names(n, list(locales), seed, exclude=exclude)
        # The leading-name keys miss names mentioned inside other documents; the full search does not.
        found = {name for name, _ in people if index.documents_about(name)}
        if not found:
            return people
        exclude |= found
    raise ValueError("Could not find enough names absent from the corpus; try another seed.")


def fabricated_frame(people: Sequence[tuple[str, str]],
                     predictions: Mapping[str, Sequence[str]]) -> pd.DataFrame:
    """One row per fabricated person: name, locale, country, then one prediction column per model."""
    frame = pd.DataFrame({"name": [n for n, _ in people], "locale": [loc for _, loc in people],
                          "country": [LOCALES[loc].label if loc in LOCALES else "" for _, loc in people]})
    for model, answers in predictions.items():
        frame[model] = list(answers)
    return frame


def home_country_share(locales: Sequence[str], predictions: Sequence[str]) -> float:
    """Share of predictions that are a city of the country whose names the name was drawn from."""
    if not predictions:
        return float("nan")
    hits = [p in LOCALES[loc].city_names if loc in LOCALES else False for loc, p in zip(locales, predictions)]
    return float(np.mean(hits))


def expected_home_share(locales: Sequence[str], train_places: Sequence[str]) -> float:
    """The home-country share of a model that ignored the name and drew from the training labels."""
    counts = Counter(train_places)
    total = sum(counts.values())
    if not locales or not total:
        return float("nan")
    shares = [sum(counts[c] for c in LOCALES[loc].city_names) / total if loc in LOCALES else 0.0
              for loc in locales]
    return float(np.mean(shares))


def place_shares(predictions: Mapping[str, Sequence[str]], train_places: Sequence[str],
                 top: int = 20) -> pd.DataFrame:
    """Share of each place among the training labels and among each model's predictions.

    Rows: the `top` places most predicted or most frequent in training, training order first.
    """
    columns = {"training labels": Counter(train_places)} | {m: Counter(p) for m, p in predictions.items()}
    totals = {c: sum(counts.values()) or 1 for c, counts in columns.items()}
    places = list(dict.fromkeys([p for counts in columns.values() for p, _ in counts.most_common(top)]))
    ranked = sorted(places, key=lambda p: -max(columns[c][p] / totals[c] for c in columns))[:top]
    return pd.DataFrame({c: [columns[c][p] / totals[c] for p in ranked] for c in columns}, index=ranked)


def locale_place_counts(locales: Sequence[str], predictions: Sequence[str], top: int = 20) -> pd.DataFrame:
    """Counts of predicted places (columns, most common first) per name locale (rows)."""
    frame = pd.crosstab(pd.Series(list(locales), name="locale"), pd.Series(list(predictions), name="place"))
    order = frame.sum(axis=0).sort_values(ascending=False, kind="stable").index[:top]
    return frame[order]


def strategy_summary(locales: Sequence[str], predictions: Mapping[str, Sequence[str]],
                     train_places: Sequence[str]) -> pd.DataFrame:
    """Per model: distinct answers, the most common answer and its share, share in the name's country,
    share that are training labels."""
    labels = set(train_places)
    rows = []
    for model, answers in predictions.items():
        counts = Counter(answers)
        top_place, top_count = counts.most_common(1)[0] if counts else ("", 0)
        rows.append({"model": model, "distinct answers": len(counts), "most common answer": top_place,
                     "its share": top_count / max(len(answers), 1),
                     "share in the name's country": home_country_share(locales, answers),
                     "share that are training labels": float(np.mean([a in labels for a in answers]))
                     if answers else float("nan")})
    return pd.DataFrame(rows)
