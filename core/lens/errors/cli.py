"""`python -m core.lens.errors MODEL --eval FILE [-o OUT.csv] [--compare MODEL2] [--tokens]`

MODEL: this lab's checkpoint, a Hugging Face folder (a causal language model, or a ...ForSequenceClassification
whose id2label names the file's labels) or a hub name in the cache.

One row per example (a classifier's lines, a birthplace model's questions), per document or, with `--tokens`, per
piece (a language model) written to OUT.csv (never over an existing file without `--force`); the summary it
prints is `python -m core.train evaluate`'s line for the same file, then the caption the Errors page shows.
`--compare`: a second checkpoint on the same file (the right/wrong 2x2 and the disagreements for classifiers;
token by token for language models). A language model takes several files (`--eval A B C`: PA2's three test
files give the course's table by speaker); documents are lines unless `--documents file`.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import pandas as pd

from core.lens.errors.inputs import DOCUMENT_UNITS


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m core.lens.errors",
                                     description="Error analysis of a checkpoint on an evaluation file.")
    parser.add_argument("checkpoint", metavar="MODEL",
                        help="a .safetensors checkpoint of this lab (classifier, language model or birthplace "
                             "model), a Hugging Face folder (a causal LM or a ...ForSequenceClassification) or a hub "
                             "name in the cache")
    parser.add_argument("--eval", nargs="+", required=True, metavar="FILE",
                        help="LABEL<TAB>TEXT or a CSV with text,label columns (classifier), "
                             "plain text (language model; several files allowed), "
                             "'Where was NAME born?<TAB>PLACE' (birthplace model)")
    parser.add_argument("-o", "--output", metavar="OUT.csv", help="write the table here as CSV")
    parser.add_argument("--compare", metavar="CHECKPOINT2", help="a second checkpoint of the same task")
    parser.add_argument("--tokens", action="store_true", help="language models: one row per piece, not per document")
    parser.add_argument("--documents", choices=DOCUMENT_UNITS, default="line",
                        help="language models: a document is a line (default) or a whole file")
    parser.add_argument("--force", action="store_true", help="overwrite OUT.csv if it exists")
    return parser


class CommandError(ValueError):
    pass


def model_name(given: str) -> str:
    """A checkpoint's stem, a folder's name, or a hub name as typed."""
    path = Path(given)
    return path.stem if path.is_file() else path.name if path.is_dir() else given


def write_csv(frame: pd.DataFrame, target: str, force: bool) -> None:
    """Atomically (a temporary file renamed), and never over an existing file without --force."""
    from core.io.tables import table_csv

    path = Path(target)
    if path.exists() and not force:
        raise CommandError(f"{path} already exists; pass --force to overwrite it.")
    if not path.parent.is_dir():
        raise CommandError(f"The folder {path.parent} does not exist.")
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(table_csv(frame))
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)


def run(args, out=print) -> pd.DataFrame:
    from core.io.hf_cache import load_named
    from core.lens.errors import birthplace, classify, inputs, lm

    loaded = load_named(args.checkpoint)
    name = model_name(args.checkpoint)
    other = load_named(args.compare) if args.compare else None
    other_name = model_name(args.compare) if args.compare else ""
    if other is not None and other.task != loaded.task:
        raise CommandError(f"{name} is a {loaded.task} model and {other_name} a {other.task} model; compare two "
                           "models of the same task.")
    sources = [inputs.read_eval_path(path) for path in args.eval]
    if loaded.task != "lm" and len(sources) > 1:
        raise CommandError(f"A {loaded.task} model takes one --eval file, not {len(sources)}.")
    if loaded.task == "classify":
        pairs = inputs.classifier_pairs(sources[0], loaded.labels)
        first = classify.score_classifier(loaded.model, loaded.tokenizer, loaded.labels, pairs, name, sources[0].name)
        out(first.summary())
        out(first.caption())
        table = first.frame
        if other is not None:
            inputs.classifier_pairs(sources[0], other.labels)  # the second model must know the labels too
            second = classify.score_classifier(other.model, other.tokenizer, other.labels, pairs, other_name,
                                               sources[0].name)
            out(second.summary())
            out(second.caption())
            comparison = classify.compare_classifiers(first, second)
            out(comparison.caption())
            out(comparison.table().to_string())
            table = table.join(second.frame[["predicted", "right", "p(gold)", "p(predicted)", "loss"]],
                               rsuffix=f" ({other_name})")
        return table
    if loaded.task == "lm":
        texts = [(s.name, s.text) for s in sources]
        first = lm.score_lm(loaded.model, loaded.tokenizer, texts, name, args.documents)
        for score in first.files:
            out(score.line())
        out(first.caption())
        for merged in first.one_document_per_file:
            out(f"note: {merged} is one document (this tokenizer splits its lines differently from the whole text).")
        table = first.tokens if args.tokens else first.documents
        if other is not None:
            second = lm.score_lm(other.model, other.tokenizer, texts, other_name, args.documents)
            for score in second.files:
                out(score.line())
            comparison = lm.compare_lms(first, second)
            out(comparison.caption())
            table = comparison.tokens if args.tokens else first.documents.join(
                second.documents[["loss", "perplexity"]], rsuffix=f" ({other_name})")
        return table
    if loaded.task == "birthplace":
        pairs = inputs.birthplace_pairs(sources[0])
        baseline = loaded.metadata.get("baseline_place") or None
        first = birthplace.birthplace_errors(loaded.model, loaded.tokenizer, pairs, baseline, name, sources[0].name)
        out(first.summary())
        out(first.caption())
        table = first.frame
        if other is not None:
            second = birthplace.birthplace_errors(other.model, other.tokenizer, pairs, baseline, other_name,
                                                  sources[0].name)
            out(second.summary())
            out(second.caption())
            table = table.join(second.frame[["predicted", "right", "confidence"]], rsuffix=f" ({other_name})")
        return table
    raise CommandError(f"{name} is a {loaded.task} model; the error analysis reads classifiers, language models "
                       "and birthplace models.")


def main(argv: list[str] | None = None) -> int:
    from core.data.datasets import DataError
    from core.io.checkpoint import CheckpointError
    from core.lens.errors.classify import ClassifierError

    argv = sys.argv[1:] if argv is None else argv
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 2
    try:
        table = run(args, out=lambda line: print(line, flush=True))
        if args.output:
            write_csv(table, args.output, args.force)
            print(f"wrote {len(table):,} rows to {args.output}")
    except (CommandError, DataError, CheckpointError, ClassifierError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0
