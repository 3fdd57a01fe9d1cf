"""What the pretraining corpus says about a name: the documents about it, the known places they
mention, whether the true place is among them -> one evidence category per prediction. And the files of
one world folder (wiki.txt, the train and dev questions) the probe reads, loaded once into `ProbeData`.
"""

from __future__ import annotations

import functools
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
    # built at the first namesake search, once per corpus: name part -> the names holding it (corpus order), and
    # each name's places (a regex over its documents); a new name's search was a pass over every name
    _by_part: dict[str, list[str]] | None = field(default=None, init=False, repr=False, compare=False)
    _places_of: dict[str, tuple[str, ...]] = field(default_factory=dict, init=False, repr=False, compare=False)

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

    def names_sharing(self, parts: Iterable[str]) -> list[str]:
        """The names (document keys) holding any of `parts` (`name_parts`), in corpus order."""
        if self._by_part is None:
            by_part: dict[str, list[str]] = {}
            for other in self.by_name:
                for part in name_parts(other):
                    by_part.setdefault(part, []).append(other)
            self._by_part = by_part
        found = {other for part in parts for other in self._by_part.get(part, ())}
        return sorted(found, key=lambda other: self.by_name[other][0])  # by_name's own order: first document

    def places_of(self, name: str) -> tuple[str, ...]:
        """`evidence(name).places`, kept per name (a corpus index is read-only once built)."""
        kept = self._places_of.get(name)
        if kept is None:
            kept = self._places_of[name] = tuple(self.evidence(name).places)
        return kept

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
# The namesake rule, one for the verdict and its sentence: two people are namesakes when their names share a
# part (a whole word, as written) of at least NAME_PART_MIN characters that starts with a capital letter.
# Lowercase particles are not names on their own: "van" is a part of 15 names of the bundled corpus, and
# "Jan van Dijk" and "Eva van Rijn" share no name. Two characters: "Sá" and "Al" are whole surnames.
NAME_PART_MIN = 2
LISTED_NAMESAKES = 3  # a sentence names this many namesakes, then "and N more"
LISTED_PLACES = 4  # and this many of the places their documents name, then "and N more places"


def name_parts(name: str) -> set[str]:
    """The parts of a name that make namesakes (see NAME_PART_MIN)."""
    return {p for p in normalise_name(name).split() if len(p) >= NAME_PART_MIN and p[0].isupper()}


def names_word(texts: Iterable[str], word: str, blank: str = "") -> bool:
    """Does any text contain `word` as whole words, once `blank` (the person's own name: "Florence" is a first
    name as well as a city) is taken out?"""
    if not word:
        return False
    pattern = re.compile(r"(?<!\w)" + re.escape(word) + r"(?!\w)")
    return any(pattern.search(text.replace(blank, "\0" * len(blank)) if blank else text) for text in texts)


@dataclass(frozen=True)
class Namesake:
    """Someone the corpus has documents about who shares a name part (`name_parts`) with the asked name."""

    name: str
    shared: tuple[str, ...]  # the name parts in common
    documents: tuple[str, ...]  # the documents about them (their name leads the line)
    places: tuple[str, ...]  # known places those documents name, in order of first mention


def namesakes(index: CorpusIndex, name: str) -> list[Namesake]:
    """Everyone with a document whose name shares a part with `name` (the name itself excluded), in corpus
    order."""
    name = normalise_name(name)
    parts = name_parts(name)
    found = []
    for other in index.names_sharing(parts):
        shared = parts & name_parts(other)
        if other != name and shared:
            documents = tuple(index.documents[i] for i in index.by_name[other])
            found.append(Namesake(other, tuple(sorted(shared)), documents, index.places_of(other)))
    return found


@dataclass
class Verdict:
    """Where an answer can have come from, by the corpus alone: `label` is a key of VERDICTS; `source` the
    person whose document a borrowed answer comes from (the first of `sources`); `namesakes` everyone sharing
    a name part, whatever their documents name (the sentence says what they name)."""

    label: str
    source: str | None = None
    sources: tuple[str, ...] = field(default=(), compare=False)
    namesakes: tuple[Namesake, ...] = field(default=(), compare=False)


def verdict(index: CorpusIndex, name: str, answer: str) -> Verdict:
    """Retrieved, borrowed or made up: does a document about `name` name `answer` (whole words, the name
    itself blanked); if not, does a document about a namesake (`name_parts`) name it."""
    return verdicts(index, name, [answer])[answer]


def verdicts(index: CorpusIndex, name: str, answers: Iterable[str]) -> dict[str, Verdict]:
    """`verdict` of each distinct answer to one name (several models' answers), the name's own documents and its
    namesakes searched once for all of them (the namesake search reads every name of the corpus: ~2.4 ms on the
    bundled one, once per model before)."""
    name = normalise_name(name)
    own = [index.documents[i] for i in index.documents_about(name)]
    others: tuple[Namesake, ...] | None = None  # searched at the first answer the own documents do not name
    found: dict[str, Verdict] = {}
    for answer in dict.fromkeys(answers):
        if names_word(own, answer, name):
            found[answer] = Verdict("retrieved")
            continue
        if others is None:
            others = tuple(namesakes(index, name))
        sources = tuple(n.name for n in others if names_word(n.documents, answer, n.name))
        found[answer] = (Verdict("borrowed", sources[0], sources, others) if sources
                         else Verdict("made up", None, (), others))
    return found


def _and(items: list[str], more: int = 0, what: str = "") -> str:
    """'A', 'A and B', 'A, B and C', 'A, B, C and 5 more{what}'."""
    if more:
        return ", ".join(items) + f" and {more} more{what}"
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _possessive(name: str) -> str:
    return name + ("'" if name.endswith("s") else "'s")


def namesakes_clause(found: Verdict, answer: str) -> str:
    """What the namesakes' documents name: "Jan Klemt's and Jan Lindqvist's documents name Bari and Porto, not
    Faro" (the first LISTED_NAMESAKES people and LISTED_PLACES places, then how many more)."""
    people = list(found.namesakes)
    shown = [_possessive(n.name) for n in people[:LISTED_NAMESAKES]]
    more = len(people) - len(shown)
    whose = _and(shown, more, " people's")
    places = list(dict.fromkeys(p for n in people for p in n.places if p != answer))
    if not places:
        return f"{whose} documents name no known place, nor {answer}"
    listed = _and(places[:LISTED_PLACES], max(0, len(places) - LISTED_PLACES), " places")
    return f"{whose} documents name {listed}, not {answer}"


def verdict_sentence(model: str, name: str, answer: str, found: Verdict, in_corpus: bool) -> str:
    """Why the focus model's answer gets its verdict, in words (plain text; the page shows the label beside it).
    Every claim is one a search of the corpus confirms: tests/test_probe_claims.py searches wiki.txt for it."""
    if not answer:
        return f"{model} writes no answer (nothing between the two ⁇)."
    if found.label == "retrieved":
        return f"{model} answers {answer}, and a document about {name} names {answer}."
    own = (f"no document about {name} names {answer}" if in_corpus else f"no document mentions {name}")
    if found.label == "borrowed":
        sources = list(found.sources or ([found.source] if found.source else []))
        shown = sources[:LISTED_NAMESAKES]
        naming = sum(1 for n in found.namesakes if n.name in sources for d in n.documents
                     if names_word([d], answer, n.name))
        documents = "documents" if naming > 1 else "document"
        who = "who shares" if len(sources) == 1 else "who share"
        return (f"{model} answers {answer}, but {own}: {answer} comes from the {documents} about "
                f"{_and(shown, len(sources) - len(shown))}, {who} a part of the name.")
    if found.namesakes:
        return f"{model} answers {answer}, but {own}; {namesakes_clause(found, answer)}."
    return (f"{model} answers {answer}, but {own}, and no document is about anyone sharing a part of the "
            f"name.")


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
    """The corpus index and the question files of one world folder (read-only once loaded: what is derived from
    the files is derived once, at its first use)."""

    folder: Path
    index: CorpusIndex
    train_pairs: list[tuple[str, str]]
    dev_pairs: list[tuple[str, str]]

    @property
    def train_places(self) -> list[str]:
        return [place for _, place in self.train_pairs]

    @functools.cached_property
    def _labels(self) -> tuple[str, ...]:
        counts = Counter(self.train_places)
        return tuple(sorted(counts, key=lambda p: (-counts[p], p)))

    @property
    def labels(self) -> list[str]:
        """Distinct training labels, most frequent first (the candidate list)."""
        return list(self._labels)

    @functools.cached_property
    def _train_names(self) -> frozenset[str]:
        return frozenset(name_from_question(q) for q, _ in self.train_pairs)

    @property
    def train_names(self) -> set[str]:
        return set(self._train_names)

    @property
    def baseline_place(self) -> str:
        return most_frequent_place(self.train_places)

    @functools.cached_property
    def _truths(self) -> dict[str, tuple[str, str]]:
        """name -> (place, file), the dev file first, then the train file; a name's first question in each."""
        found: dict[str, tuple[str, str]] = {}
        for pairs, source in ((self.dev_pairs, DEV_FILE), (self.train_pairs, TRAIN_FILE)):
            for question, place in pairs:
                found.setdefault(name_from_question(question), (place, source))
        return found

    def truth(self, name: str) -> tuple[str, str] | None:
        """(place, file) when the name is a question of the train or dev file."""
        return self._truths.get(normalise_name(name))


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
