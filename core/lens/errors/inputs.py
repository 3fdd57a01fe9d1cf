"""An evaluation file, read as the trainer reads it (`core.data.datasets`, `core.train.cli evaluate`), or one
sentence saying why it cannot be: `LABEL<TAB>TEXT` for classifiers, plain UTF-8 text for language models (one
document per line, or the whole file as one), the CS224N `Where was NAME born?<TAB>PLACE` TSV for birthplace
models. The bytes come from wherever the caller found them (bundled data, an upload, an allowed folder); the
size is checked before anything is decoded, and nothing here writes anywhere."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from core.data.datasets import DataError, parse_tsv_pairs
from core.text import shortened

MB = 1024 * 1024
MAX_EVAL_MB = 20  # a course test file is well under 1 MB; 20 MB of text is ~100k examples
MAX_EXAMPLES = 50_000  # classifier lines / birthplace questions scored at once
DOCUMENT_UNITS = ("line", "file")  # a language model's documents: one per line, or the whole file


class EvalFileError(DataError):
    """An evaluation file that cannot be used; str() is one sentence."""


@dataclass(frozen=True)
class EvalText:
    name: str  # the file's name, for messages and captions
    text: str
    digest: str  # sha256 of the bytes: results are cached per (checkpoint version, digest)
    parts: tuple[tuple[str, str], ...] = ()  # several files read together (a language model's): (name, text)

    def files(self) -> list[tuple[str, str]]:
        """(name, text) of each file: this one, or the files it joins (`join_files`)."""
        return list(self.parts) if self.parts else [(self.name, self.text)]


def join_files(sources: list[EvalText]) -> EvalText:
    """Several files as one evaluation (a language model scores each; PA2's three test files are the course's
    table by speaker); its digest is that of the files' digests in order."""
    if len(sources) == 1:
        return sources[0]
    digest = hashlib.sha256("".join(s.digest for s in sources).encode()).hexdigest()
    return EvalText(name=", ".join(s.name for s in sources), text="", digest=digest,
                    parts=tuple((s.name, s.text) for s in sources))


def file_digest(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()


def decode_eval(raw: bytes, name: str) -> EvalText:
    """The text of an evaluation file: refused (one sentence) when empty, too big, binary or not UTF-8."""
    name = Path(name).name or "the file"
    if len(raw) > MAX_EVAL_MB * MB:
        raise EvalFileError(f"{name} is {len(raw) / MB:.0f} MB; evaluation files up to {MAX_EVAL_MB} MB are read.")
    if not raw.strip():
        raise EvalFileError(f"{name} is empty.")
    if b"\0" in raw:
        raise EvalFileError(f"{name} contains NUL bytes: it is a binary file, not text.")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise EvalFileError(f"{name} is not UTF-8 text (byte {exc.start} cannot be decoded).") from None
    return EvalText(name=name, text=text, digest=file_digest(raw))


def read_eval_path(path: str | Path) -> EvalText:
    """A file on disk (the command line, the bundled data, an allowed folder), size checked before reading."""
    path = Path(path)
    if not path.is_file():
        raise EvalFileError(f"{path} does not exist or is not a file.")
    size = path.stat().st_size
    if size > MAX_EVAL_MB * MB:
        raise EvalFileError(f"{path.name} is {size / MB:.0f} MB; evaluation files up to {MAX_EVAL_MB} MB are read.")
    return decode_eval(path.read_bytes(), path.name)


CSV_COLUMNS = ("text", "label")  # a course's usual export (pandas to_csv, the datasets library's CSV)


def csv_pairs(source: EvalText) -> list[tuple[str, str]] | None:
    """(label, text) of a CSV whose header has `text` and `label` columns (any order, others ignored), or None
    when the file is not such a CSV (then it is read as LABEL<TAB>TEXT)."""
    import csv
    import io

    first = source.text.lstrip().split("\n", 1)[0]
    if "\t" in first or "," not in first:
        return None
    header = [h.strip().lower() for h in next(csv.reader([first]))]
    if not set(CSV_COLUMNS) <= set(header):
        return None
    try:
        rows = list(csv.DictReader(io.StringIO(source.text.lstrip()), fieldnames=header))[1:]
    except csv.Error as exc:
        raise EvalFileError(f"{source.name} is not a readable CSV ({exc}).") from None
    pairs = []
    for n, row in enumerate(rows, start=2):
        text, label = row.get("text"), row.get("label")
        if text is None or label is None:
            raise EvalFileError(f"{source.name} line {n} has no {'text' if text is None else 'label'} value.")
        if text.strip():
            pairs.append((label.strip(), " ".join(text.split())))
    if not pairs:
        raise EvalFileError(f"{source.name} has a text,label header but no rows.")
    return pairs


def is_question(text: str) -> bool:
    """A CS224N birthplace question ('Where was NAME born?'), as a classifier's file would never have as its label."""
    return text.startswith("Where was ") and text.rstrip().endswith("born?")


def match_labels(found: list[str], labels: list[str]) -> dict[str, str]:
    """Each label of the file -> the model's label of the same name: exactly, else ignoring case ('positive' and
    a config's 'POSITIVE'), else a class number ('1') where the model's labels are the Trainer's defaults
    ('LABEL_1'). Labels that match none are left out."""
    out = {}
    folded = {label.casefold(): label for label in labels}
    generic = all(label == f"LABEL_{i}" for i, label in enumerate(labels))
    for label in found:
        if label in labels:
            out[label] = label
        elif label.casefold() in folded:
            out[label] = folded[label.casefold()]
        elif generic and label.isdigit() and int(label) < len(labels):
            out[label] = labels[int(label)]
    return out


def classifier_pairs(source: EvalText, labels: list[str]) -> list[tuple[str, str]]:
    """(label, text) per line, as `ClassificationDataset` reads them (or a CSV with text and label columns);
    every label must be one the checkpoint knows, matched by name (`match_labels`: a Hugging Face folder's
    id2label). A line without a tab, or a file whose columns look swapped, is refused with its line number."""
    pairs = csv_pairs(source)
    if pairs is None:
        try:
            pairs = parse_tsv_pairs(source.text, source.name)
        except DataError as exc:
            raise EvalFileError(str(exc).replace("'TEXT<TAB>ANSWER'", "'LABEL<TAB>TEXT' (a classifier's file)")
                                ) from None
    if len(pairs) > MAX_EXAMPLES:
        raise EvalFileError(f"{source.name} has {len(pairs):,} lines; up to {MAX_EXAMPLES:,} are scored at once.")
    matched = match_labels(sorted({label for label, _ in pairs}), labels)
    unknown = [(n, label) for n, (label, _) in enumerate(pairs, start=1) if label not in matched]
    if unknown:
        known = set(labels)
        if all(is_question(label) for label, _ in pairs[:200]):
            raise EvalFileError(f"{source.name} is a birthplace questions file ('Where was NAME born?<TAB>PLACE'), "
                                "for a birthplace model; a classifier's file is 'LABEL<TAB>TEXT' per line.")
        if all(text in known for _, text in pairs):
            raise EvalFileError(f"{source.name} has the text first and the label second; a classifier's file is "
                                "'LABEL<TAB>TEXT' per line.")
        line, label = unknown[0]
        distinct = sorted({label for _, label in unknown})
        shown = ", ".join(repr(shortened(x, 40)) for x in distinct[:3]) + (" …" if len(distinct) > 3 else "")
        none = ("; none of the file's labels matches one of the model's by name"
                if len(distinct) == len({label for label, _ in pairs}) else "")
        raise EvalFileError(f"{source.name} has {len(distinct)} label(s) this checkpoint does not know ({shown}, "
                            f"first on line {line}){none}; it knows {', '.join(labels[:12])}"
                            f"{' …' if len(labels) > 12 else ''}.")
    return [(matched[label], text) for label, text in pairs]


def lm_documents(source: EvalText, unit: str = "line") -> list[str]:
    """The documents of a language model's text: its non-blank lines, or the whole file as one."""
    if unit not in DOCUMENT_UNITS:
        raise ValueError(f"unit must be one of {DOCUMENT_UNITS}, not {unit!r}.")
    if unit == "file":
        return [source.text]
    return [line for line in source.text.split("\n") if line.strip()]


def birthplace_pairs(source: EvalText) -> list[tuple[str, str]]:
    """`Where was NAME born?<TAB>PLACE` pairs (the probe's own reader: reserved characters, empty answers)."""
    from core.lens.probe.questions import read_question_file

    read = read_question_file(source.text.encode("utf-8"), source.name)
    if read.problem:
        raise EvalFileError(read.problem)
    return list(read.pairs)


# --- the bundled test files ---------------------------------------------------------------------------------

BUNDLED_NAMES = {"classify": "names_test.tsv", "birthplace": "birth_dev.tsv", "lm": "wiki.txt"}


@dataclass(frozen=True)
class BundledFile:
    label: str  # what the picker shows, e.g. "knowledge/names_test.tsv"
    path: Path
    held_out: float = 0.0  # > 0: only the whole lines of the last fraction of the file (the trainer's 'val')


def held_out_part(source: EvalText, fraction: float) -> EvalText:
    """The whole lines of the last `fraction` of a text by characters (the trainer holds out the last
    `val_fraction` of an LM's text the same way, core.train.recipes._split_text; a line cut in two is left out)."""
    from core.lens.perplexities import trainer_split

    split, skipped = trainer_split(source.text, fraction)  # the trainer's part, and the end of its cut line
    text = split[skipped:]
    if not text.strip():
        raise EvalFileError(f"The last {fraction:.0%} of {source.name} has no whole line.")
    return EvalText(name=f"{source.name} (last {fraction:.0%})", text=text, digest=file_digest(text.encode()))


def bundled_files(data_root: Path, task: str, metadata: dict | None = None) -> list[BundledFile]:
    """The project's test files for a task (data/*/names_test.tsv, birth_dev.tsv, wiki.txt), the ones the
    checkpoint was trained with first; a language model's training text is offered as its held-out part (its
    recorded `val_fraction`) before the whole file."""
    wanted = BUNDLED_NAMES.get(task)
    if wanted is None or not data_root.is_dir():
        return []
    metadata = metadata or {}
    used = {Path(str(d.get("path", ""))).parent.name for d in metadata.get("data") or [] if isinstance(d, dict)}
    folders = sorted((p for p in data_root.iterdir() if (p / wanted).is_file()),
                     key=lambda p: (p.name not in used, p.name))
    try:
        fraction = float(metadata.get("val_fraction") or 0.0)
    except (TypeError, ValueError):
        fraction = 0.0
    out = []
    for folder in folders:
        label = f"{folder.name}/{wanted}"
        if task == "lm" and folder.name in used and 0 < fraction < 1:
            out.append(BundledFile(f"{label}, last {fraction:.0%} (held out)", folder / wanted,  # whole at 1024 px
                                   fraction))
        out.append(BundledFile(label, folder / wanted))
    return out


def read_bundled(choice: BundledFile) -> EvalText:
    source = read_eval_path(choice.path)
    return held_out_part(source, choice.held_out) if choice.held_out else source
