"""Files in and out of the probe: an uploaded `Where was NAME born?<TAB>PLACE` question file, read into
pairs or one sentence saying what is wrong; predictions in the assignment's format."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from core.data.datasets import DataError, parse_tsv_pairs
from core.model.tokenizer import MASK_CHAR, PAD_CHAR

MAX_UPLOAD_BYTES = 2 * 1024 * 1024
MAX_UPLOAD_QUESTIONS = 5000


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
