"""How a model's training text was cut into pieces where a typed piece never occurred on its own.

A subword model "never saw" a piece when no training line was cut into it, not when no training line has its
letters: 'ble' never occurred alone, while "Grenoble" is in 46 lines of the knowledge corpus, read as 'Gren' +
'oble'. `corpus_cuts` finds, for each such piece, the training word most often containing its text and how the
tokenizer cut that word there (the pre-tokenizer isolates words, so a word is cut the same way in every line),
or says that no training text has the text at all. `training_lines` reads a model's training files (its
metadata's data paths, only inside this project's data/ folder).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from core.model.tokenizer import Tokenizer

PROJECT_DATA = Path(__file__).resolve().parents[2] / "data"
WORDS = re.compile(r"\w+|[^\w\s]+")  # the subword tokenizer's pre-tokenizer units, less whitespace
MAX_TRAINING_BYTES = 64 * 1024 * 1024  # a training file larger than this is not read for the explanation
# A checkpoint's data files include the held-out ones it was evaluated on (birth_dev.tsv, names_test.tsv): they
# are not training text, so their lines are not counted ("'Grenoble' (46 lines)" is a grep of what it read).
HELD_OUT = re.compile(r"(^|[_.-])(dev|test|val|valid|validation)([_.-]|$)", re.IGNORECASE)


@dataclass(frozen=True)
class CorpusCut:
    """A piece never read on its own, and how the training text was cut where its text occurs."""

    piece: str  # as typed ('ble')
    word: str | None  # the training word most often containing it ('Grenoble'); None: no training text has it
    pieces: tuple[str, ...] = ()  # how training read that word ('Gren', 'oble')
    lines: int = 0  # training lines with that word

    def sentence(self, quoted: bool = False) -> str:
        """In training, 'Grenoble' was read as 'Gren' + 'oble'; 'ble' alone never occurred. `quoted`: the
        piece is already shown quoted (several pieces joined)."""
        piece = self.piece if quoted else repr(self.piece)
        if self.word is None:
            return f"no training text has {piece}"
        where = f" ({self.lines} line{'s' if self.lines != 1 else ''})"
        cut = ("as one piece" if len(self.pieces) == 1 else "as " + " + ".join(repr(p) for p in self.pieces))
        return f"in training, {self.word!r}{where} was read {cut}; {piece} alone never occurred"


@dataclass(frozen=True)
class TrainingWords:
    """The words of a training text, with how many lines each is in (built once per text)."""

    lines_with: Mapping[str, int]

    @classmethod
    def of(cls, lines: Iterable[str]) -> TrainingWords:
        counts: Counter[str] = Counter()
        for line in lines:
            counts.update(set(WORDS.findall(line)))
        return cls(dict(counts))


def cuts_sentence(cuts: Sequence[CorpusCut]) -> str:
    """The cuts in one clause each, pieces cut from the same word together: "in training, 'Grenoble' (50
    lines) was read as one piece; 'ble' and 'Greno' alone never occurred"."""
    groups: dict[tuple[str | None, tuple[str, ...], int], list[str]] = {}
    for cut in cuts:
        groups.setdefault((cut.word, cut.pieces, cut.lines), []).append(cut.piece)
    return "; ".join(CorpusCut(" and ".join(repr(p) for p in pieces), word, cut, lines).sentence(quoted=True)
                     for (word, cut, lines), pieces in groups.items())


def corpus_cuts(tokenizer: Tokenizer, pieces: Sequence[str], words: TrainingWords) -> list[CorpusCut]:
    """For each piece: the training word containing its text in the most lines (ties: the shorter, then
    alphabetical), and that word's pieces as the tokenizer reads it."""
    cuts = []
    for piece in pieces:
        text = piece.strip()
        best = None
        if text:
            holding = [(n, w) for w, n in words.lines_with.items() if text in w]
            if holding:
                best = min(holding, key=lambda nw: (-nw[0], len(nw[1]), nw[1]))
        if best is None:
            cuts.append(CorpusCut(piece, None))
            continue
        lines, word = best
        cuts.append(CorpusCut(piece, word, tuple(tokenizer.tokenize(word).tokens), lines))
    return cuts


def training_lines(data_files: Iterable[object]) -> list[str]:
    """The lines of a model's training files (metadata 'data' entries: dicts with a 'path' relative to the
    project), read only when they lie inside this project's data/ folder: a checkpoint never opens another
    server path. Held-out files (HELD_OUT), missing, unreadable or oversized ones are skipped."""
    root = PROJECT_DATA.resolve()
    lines: list[str] = []
    for entry in data_files:
        path = entry.get("path") if isinstance(entry, dict) else None
        if not isinstance(path, str) or not path:
            continue
        candidate = (PROJECT_DATA.parent / path).resolve()
        if HELD_OUT.search(Path(path).name) or not candidate.is_relative_to(root) or not candidate.is_file():
            continue
        if candidate.stat().st_size > MAX_TRAINING_BYTES:
            continue
        try:
            lines += [line for line in candidate.read_text(encoding="utf-8").splitlines() if line.strip()]
        except (OSError, UnicodeDecodeError):
            continue
    return lines
