"""The probe's questions, in and out: what a user types (a name or a question, read into 'Where was NAME
born?' and NAME; the characters of it that a model has never seen, named in one sentence for every model at
once), an uploaded `Where was NAME born?<TAB>PLACE` question file (read into pairs, or one sentence saying
what is wrong), and predictions in the assignment's format."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from core.data.datasets import DataError, parse_tsv_pairs
from core.io.formats import refusal, sniff
from core.lens.training_pieces import TrainingWords, corpus_cuts, cuts_sentence
from core.model.tokenizer import MASK_CHAR, PAD_CHAR, Tokenizer
from core.text import TYPED_QUESTION_MARKS

QUESTION_TEMPLATE = "Where was {name} born?"
# What people type to end a question: '?', the full-width '？', or the MASK itself ('⁇', or '??' for it).
QUESTION_MARKS = TYPED_QUESTION_MARKS + MASK_CHAR
QUESTION_PATTERN = re.compile(r"\s*Where\s+was\s+(.+?)\s+born\s*[?？⁇]*\s*", re.IGNORECASE)
MAX_INPUT_CHARS = 300  # a name or question; the models read ~128 characters
MAX_UPLOAD_BYTES = 2 * 1024 * 1024
MAX_UPLOAD_QUESTIONS = 5000
QUESTIONS_EXPECTED = "a questions file with answers ('Where was NAME born?<TAB>PLACE' per line)"


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


@dataclass(frozen=True)
class FittedName:
    """A name cut so that its question fits every model (`note` says how, in one sentence), or the name as typed
    (`note` None); `problem` when not even a one-character name fits."""

    name: str
    note: str | None = None
    problem: str | None = None


def _room(tokenizer: Tokenizer, name: str, answer: str) -> int:
    """Tokens the question about `name` + ⁇ + `answer` + ⁇ takes in one pass (the answer's last ⁇ is only a
    target, never read)."""
    return len(tokenizer.encode(question_for(name) + MASK_CHAR)) + len(tokenizer.encode(answer + MASK_CHAR)) - 1


def fit_name(name: str, readers: Mapping[str, tuple[Tokenizer, int]], answers: Sequence[str],
             usual: int = 0) -> FittedName:
    """The longest start of `name` (at a word end when the cut falls inside a word) whose question, its ⁇ and the
    longest of `answers` (the candidate places) fit every model's context (`readers`: model -> (tokenizer, the
    tokens one pass reads)). A longer question is cut from the front by the model: it would lose 'Where was'
    and answer something else ("idtolome"), with no confidence to show. A model too small for names of `usual`
    characters (the longest name of the question files) does not cut: it cannot score ordinary names either,
    and the page says so beside its candidates."""
    name = normalise_name(name)
    longest = max(answers, key=len, default="")
    fits = {model: len(name) for model in readers}
    for model, (tokenizer, limit) in readers.items():
        if _room(tokenizer, name, longest) <= limit:
            continue
        low, high = 0, len(name)  # the longest prefix that fits: low fits, high does not
        while high - low > 1:
            middle = (low + high) // 2
            low, high = (middle, high) if _room(tokenizer, name[:middle].strip(), longest) <= limit else (low, middle)
        fits[model] = low if low >= usual else len(name)
    keep = min(fits.values(), default=len(name))
    if keep == len(name):
        return FittedName(name)
    binding = min(fits, key=fits.get)
    tokenizer, limit = readers[binding]
    unit = getattr(tokenizer, "unit", "piece")
    cut = name[:keep]
    if " " in cut.strip() and name[keep:keep + 1] not in ("", " "):
        cut = cut.rsplit(" ", 1)[0]  # not inside a word
    cut = cut.strip()
    if not cut:
        return FittedName("", problem=f"{binding} reads {limit} {unit}s at once; the question 'Where was … born?' "
                                      f"with the longest place, {longest}, leaves no room for a name.")
    return FittedName(cut, note=f"The name is {len(name)} characters; {binding} reads {limit} {unit}s at once, and "
                                f"the question, the MASK after it and the longest candidate place ({longest}) must "
                                f"fit, so the page asks about its first {len(cut)} characters: {cut}")


def unknown_characters(texts: Iterable[str], tokenizer: Tokenizer) -> list[str]:
    """Pieces the model never read, in order of appearance: characters outside a character vocabulary
    (the model reads them as PAD), or subword pieces its pretraining corpus never produced."""
    seen: dict[str, None] = {}
    for text in texts:
        tokenized = tokenizer.tokenize(text)
        seen.update(dict.fromkeys(tokenized.unknown + tokenized.untrained))
    return list(seen)


def _and(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _char(char: str) -> str:
    return f"{char!r} (U+{ord(char):04X})" if len(char) == 1 else repr(char)


def unknown_summary(texts: Iterable[str], tokenizers: Mapping[str, Tokenizer], limit: int = 12,
                    words: Mapping[str, TrainingWords | None] | None = None) -> str | None:
    """ONE sentence for every model at once: which characters (or subword pieces) of the text which models
    have never seen. None when every model knows every piece. A subword piece "never seen" is one no training
    line was cut into, though its letters may be there: with `words` (a model's training words) the sentence
    says how training cut them ("in training, 'Grenoble' was read as 'Gren' + 'oble'; 'ble' alone never
    occurred")."""
    texts = list(texts)
    missing = {model: unknown_characters(texts, tokenizer) for model, tokenizer in tokenizers.items()}
    chars = list(dict.fromkeys(c for unknown in missing.values() for c in unknown))
    if not chars:
        return None
    shown = chars[:limit]
    more = f" and {len(chars) - limit} more" if len(chars) > limit else ""
    lacking = {c: [m for m, unknown in missing.items() if c in unknown] for c in shown}
    kinds = {getattr(t, "kind", "char") for m, t in tokenizers.items() if missing[m]}
    subword = kinds != {"char"}
    own = (" as a piece of its own" if len(chars) == 1 else " as pieces of their own") if subword else ""
    if all(len(models) == len(tokenizers) for models in lacking.values()):
        listed = f"{_and([_char(c) for c in shown])}{more}"
        names = list(tokenizers)
        verb = "never read" if subword else "never seen"
        head = (f"{names[0]} has {verb} {listed}{own}" if len(names) == 1 else
                f"The {len(names)} models ({_and(names)}) have {verb} {listed}{own}")
    else:
        head = ("Pieces these models never read on their own: " if subword else
                "Characters these models have never seen: ") + "; ".join(
            f"{_char(c)} ({_and(models)})" for c, models in lacking.items()) + more
    reader, it = ("it reads" if len(tokenizers) == 1 else "they read"), ("it" if len(chars) == 1 else "them")
    if kinds == {"char"}:
        return f"{head}; {reader} {it} as PAD, so answers for names with {it} are guesses about a different string."
    cuts = []
    for model, tokenizer in tokenizers.items():  # each piece explained by the first subword model lacking it
        pieces = [c for c in shown if c in missing[model] and c not in {cut.piece for cut in cuts}]
        if pieces and getattr(tokenizer, "kind", "char") != "char" and (words or {}).get(model) is not None:
            cuts += corpus_cuts(tokenizer, pieces, words[model])
    how = (cuts_sentence(cuts) if cuts else f"no training line was cut into {it}, though its letters may be there")
    model = "the model" if len(tokenizers) == 1 else "the models"
    untrained = f"{head}: {how}. So {model} learned nothing about {it}, and names with {it} look alike to {model}"
    return untrained + ("; the character models read them as PAD." if "char" in kinds else ".")


# --- question files and predictions -------------------------------------------------------------


@dataclass(frozen=True)
class QuestionFile:
    pairs: list[tuple[str, str]] = field(default_factory=list)
    problem: str | None = None  # one sentence: why the file cannot be used


def read_question_file(data: bytes, source: str = "the file") -> QuestionFile:
    """An uploaded `Where was NAME born?<TAB>PLACE` file -> pairs, or one sentence saying what is wrong."""
    if len(data) > MAX_UPLOAD_BYTES:
        return QuestionFile(problem=f"{source} is {len(data) / 1e6:.1f} MB; question files up to "
                                    f"{MAX_UPLOAD_BYTES // (1024 * 1024)} MB are accepted.")
    if not sniff(data).lines_like.get("questions"):  # not one question line: another kind of file (issue 41: a
        # classification file scored 0% with no word); with some, the parser below names the first bad line
        return QuestionFile(problem=refusal(data, set(), QUESTIONS_EXPECTED, source))
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
