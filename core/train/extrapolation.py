"""The command line: `python -m core.train.extrapolation extrapolation CHECKPOINT...` runs the page's plan
over each checkpoint's whole dev split (or a given text) and prints a table, sentences and the check;
`... record CHECKPOINT...` stores the page's default run in each checkpoint, so the page shows it at once."""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from core.data.datasets import DataError, read_text
from core.io import checkpoint as ckpt
from core.io.loaded import CheckpointInfo
from core.lens.extrapolation.plan import run_extrapolation, text_scorer
from core.lens.extrapolation.recorded import record
from core.lens.extrapolation.report import (
    check_note,
    extrapolation_summary,
    format_extrapolation_table,
    json_payload,
    recorded_val_loss,
)
from core.lens.extrapolation.scoring import (
    DEFAULT_LIMITS,
    EXTRAPOLATION_FACTORS,
    EXTRAPOLATION_PROTOCOLS,
    WINDOWS_PER_BATCH,
    DevText,
    ExtrapolationError,
    VariantExtrapolation,
    check_language_model,
    check_protocols,
    dev_text_from_metadata,
    token_stream,
)
from core.model.config import ConfigError
from core.model.device import pick_device


def parse_factors(text: str) -> list[float]:
    """'0.5,1,2' -> [0.5, 1.0, 2.0]; refuses anything that is not a positive number."""
    factors = []
    for piece in text.replace(" ", "").split(","):
        if not piece:
            continue
        try:
            value = float(piece.rstrip("xX"))
        except ValueError:
            raise ExtrapolationError(f"{piece!r} is not a length factor; write e.g. 0.5,1,2,4.") from None
        if not math.isfinite(value) or value <= 0:
            raise ExtrapolationError(f"Length factors must be positive; got {piece!r}.")
        factors.append(value)
    if not factors:
        raise ExtrapolationError("No length factors given; write e.g. 0.5,1,2,4.")
    return factors


def evaluate_checkpoint(path: str, text: DevText | None, factors: list[float], protocols: list[str],
                        max_tokens: int | None, batch_size: int, device: str) -> VariantExtrapolation:
    """One checkpoint through `run_extrapolation`, on `text` or else its recorded dev split (then checked)."""
    from tqdm import tqdm

    loaded = ckpt.load(path, device=device)
    name = Path(path).stem
    check_language_model(loaded.model, name)
    source = text or dev_text_from_metadata(loaded.metadata, name)
    ids, notes = token_stream(loaded.tokenizer, source.text, max_tokens)
    n_text = ids.numel() - 1 if max_tokens is None else len(loaded.tokenizer.tokenize(source.text).ids) - 1
    bar = tqdm(total=100, desc=name, unit="%", leave=False, dynamic_ncols=True, disable=None)

    def progress(fraction: float, what: str) -> None:
        bar.n = round(100 * fraction)
        bar.set_postfix_str(what, refresh=False)
        bar.refresh()

    stat = Path(path).stat()
    info = CheckpointInfo(Path(path), name, stat.st_size, stat.st_mtime, loaded.metadata)
    run = run_extrapolation([(info, loaded)], n_text, factors, protocols, {p: max_tokens for p in protocols},
                            text is None, text_scorer(source.text, batch_size), progress)
    bar.close()
    result = run.variants[0]
    result.text_source, result.stream_tokens, result.notes = source.source, ids.numel(), [*source.notes, *notes]
    if run.checked:  # the recorded dev split: the trainer's own validation must come back
        result.notes.append(check_note(name, recorded_val_loss(loaded.metadata), run.checks[name]))
    return result


# what a command refuses with one sentence on stderr and exit status 2 (a bad file, setting or checkpoint)
REFUSALS = (ExtrapolationError, DataError, ckpt.CheckpointError, ConfigError, OSError)


def extrapolation_command(args: argparse.Namespace) -> int:
    try:
        factors = parse_factors(args.lengths)
        protocols = check_protocols(p.strip() for p in args.protocols.split(",") if p.strip())
        text = DevText(read_text(args.text), f"the whole of {args.text}") if args.text else None
        device = pick_device(args.device)
        variants = []
        for path in args.checkpoints:
            result = evaluate_checkpoint(path, text, factors, protocols, args.max_tokens, args.batch_size, device)
            variants.append(result)
            print(f"{result.name}: {result.positional} positions, block {result.block_size}, "
                  f"{result.stream_tokens - 1:,} predictions from {result.text_source}", flush=True)
            for note in result.notes:
                print(f"  {note}")
    except REFUSALS as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print()
    print(format_extrapolation_table(variants), end="")
    print()
    for sentence in extrapolation_summary(variants):
        print(sentence)
    if args.json:
        payload = json_payload(variants, factors, protocols, args.max_tokens)
        Path(args.json).write_text(json.dumps(payload, indent=1, allow_nan=True) + "\n")
        print(f"wrote {args.json}")
    return 0


def record_command(args: argparse.Namespace) -> int:
    try:
        device = pick_device(args.device)
        for path in args.checkpoints:
            run = record(path, device)
            variant = run.variants[0]
            scored = sum(s.applicable for s in variant.scores)
            print(f"{variant.name}: recorded {len(variant.scores)} scores ({scored} applicable) and the 1x check "
                  f"(dev loss {run.checks[variant.name]:.4f}) in {path}", flush=True)
            for problem in run.problems:
                print(f"  {problem}")
    except REFUSALS as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m core.train.extrapolation", description="Evaluate checkpoints.")
    sub = parser.add_subparsers(dest="command", required=True)
    extra = sub.add_parser(
        "extrapolation", help="dev perplexity at multiples of the training length",
        description="Dev perplexity of language models at window lengths that are multiples of the training "
                    "block size. windows: non-overlapping windows of L tokens (each token sees only the "
                    "tokens before it in its window). sliding: every token predicted from the L tokens "
                    "before it (stride 1, exact; N-L forward passes). Lengths a model cannot encode (a "
                    "learned table has no row past its block size) print n/a, never a clamped number.")
    extra.add_argument("checkpoints", nargs="+", metavar="CHECKPOINT")
    extra.add_argument("--text", help="evaluate on this whole UTF-8 file instead of each checkpoint's dev "
                                      "split (the last val_fraction of its recorded training corpus)")
    extra.add_argument("--lengths", default=",".join(f"{f:g}" for f in EXTRAPOLATION_FACTORS),
                       help="window lengths as multiples of the block size (default %(default)s)")
    extra.add_argument("--protocols", default=",".join(EXTRAPOLATION_PROTOCOLS),
                       help="windows, sliding or both (default %(default)s)")
    extra.add_argument("--max-tokens", type=int, default=None,
                       help="score at most this many predictions from the start of the text (default: all)")
    extra.add_argument("--batch-size", type=int, default=WINDOWS_PER_BATCH, help="windows per forward pass")
    extra.add_argument("--device", default="auto", help="cpu, cuda or auto (default)")
    extra.add_argument("--json", help="also write every number (and per-position losses) to this JSON file")
    rec = sub.add_parser(
        "record", help="store the page's default run in each checkpoint's metadata",
        description="Score each language-model checkpoint on its own dev split with the page's default settings "
                    f"(every length, both protocols, {DEFAULT_LIMITS['windows']} / {DEFAULT_LIMITS['sliding']} "
                    "predictions for windows / sliding, and the whole-split check) and store the scores in its "
                    "metadata, tensors unchanged. The page then shows them at once, for as long as the text and "
                    "the weights are the ones they were measured on (both checked by digest).")
    rec.add_argument("checkpoints", nargs="+", metavar="CHECKPOINT")
    rec.add_argument("--device", default="auto", help="cpu, cuda or auto (default)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "extrapolation":
        return extrapolation_command(args)
    if args.command == "record":
        return record_command(args)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
