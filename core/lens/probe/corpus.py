"""What the pretraining corpus says about a name: the documents about it, the known places they
mention, whether the true place is among them -> one evidence category per prediction. And the files of
one world folder (wiki.txt, the train and dev questions) the probe reads, loaded once into `ProbeData`.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from core.data.datasets import DataError, parse_tsv_pairs
from core.data.world_tables import COUNTRIES
from core.lens.probe.evaluation import most_frequent_place
from core.lens.probe.questions import name_from_question, normalise_name

WORLD_ENV = "ATTENTION_LAB_WORLD"  # a folder with the CS224N files; default: the bundled demo world
PROJECT_DATA = Path(__file__).resolve().parents[3] / "data"
DEFAULT_WORLD = PROJECT_DATA / "world"
CORPUS_FILE = "wiki.txt"
TRAIN_FILE = "birth_places_train.tsv"
DEV_FILE = "birth_dev.tsv"
MIN_NAME_CHARS = 3  # shorter "names" would match inside every document
# Real cities of the demo world (also real CS224N birthplaces): candidates besides the training labels.
WORLD_CITIES: tuple[str, ...] = tuple(city for country in COUNTRIES for city in country.city_names)

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


VERDICTS: Mapping[str, str] = {
    "retrieved": "a document about this person names this place",
    "borrowed": "no document about this person names it, but a document about someone who shares a part of the "
                "name does",
    "made up": "no document about this person names this place (or none mentions the person at all)",
}


@dataclass
class Verdict:
    """Where an answer can have come from, by the corpus alone: `label` is a key of VERDICTS; `source` the
    person whose document a borrowed answer comes from."""

    label: str
    source: str | None = None


def verdict(index: CorpusIndex, name: str, answer: str) -> Verdict:
    """Retrieved, borrowed or made up: does a document about `name` name `answer`; if not, does a document
    about someone sharing a name part (first name or surname, 3+ characters) name it."""
    name = normalise_name(name)
    if answer in index.evidence(name).places:
        return Verdict("retrieved")
    parts = {p for p in name.split() if len(p) >= MIN_NAME_CHARS}
    for other in index.by_name:
        if other != name and parts & set(other.split()):
            if answer in index.evidence(other).places:
                return Verdict("borrowed", other)
    return Verdict("made up")


def verdict_sentence(model: str, name: str, answer: str, found: Verdict, in_corpus: bool) -> str:
    """Why the focus model's answer gets its verdict, in words (plain text; the page shows the label beside it)."""
    if found.label == "retrieved":
        return f"{model} answers {answer}, and a document about {name} names {answer}."
    own = (f"no document about {name} names {answer}" if in_corpus else f"no document mentions {name}")
    if found.label == "borrowed":
        return (f"{model} answers {answer}, but {own}: {answer} comes from the document about {found.source}, "
                f"who shares a part of the name.")
    return f"{model} answers {answer}, but {own}, nor one about anyone sharing a part of the name."


def categorise(correct: bool, evidence: Evidence) -> str:
    """The `CATEGORIES` key of one prediction, from its correctness and its name's evidence."""
    if evidence.truth_mentioned:
        return "retrieved" if correct else "wrong despite evidence"
    if correct:
        return "correct by prior"
    return "unseen name" if not evidence.in_corpus else "wrong, no evidence"


# --- the files of one world folder ------------------------------------------------------------------


def world_dir(trained_on: Iterable[str] = ()) -> Path:
    """The folder the probe reads: ATTENTION_LAB_WORLD when set; else the folder of the first wiki.txt the
    chosen models were trained on (their metadata's data files), only when it lies inside this project's
    data/ folder, so a checkpoint never opens another server path; else the demo world."""
    if os.environ.get(WORLD_ENV):
        return Path(os.environ[WORLD_ENV])
    root = PROJECT_DATA.resolve()
    for path in trained_on:
        candidate = (PROJECT_DATA.parent / str(path)).resolve()
        if candidate.name == CORPUS_FILE and candidate.is_relative_to(root) and candidate.is_file():
            return candidate.parent
    return DEFAULT_WORLD


def world_stamp(folder: Path) -> tuple[float, ...]:
    """Modification times of the corpus and question files (0.0 when absent): a cache key."""
    return tuple(f.stat().st_mtime if f.is_file() else 0.0
                 for f in (folder / CORPUS_FILE, folder / TRAIN_FILE, folder / DEV_FILE))


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
