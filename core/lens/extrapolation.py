"""Length extrapolation (train short, test long; Press et al. 2022): dev loss of language models at
window lengths that are multiples of the training block size, with its command line:
`python -m core.lens.extrapolation extrapolation CHECKPOINT...`.
"""

from __future__ import annotations

import hashlib
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from core.lens.birthplace import Progress
from core.model.positional import scheme_label
from core.model.transformer import Transformer

# --- length extrapolation -------------------------------------------------------------------------
# Train short, test long (Press et al. 2022): dev perplexity of language models at window lengths
# that are multiples of the training block size, in two protocols. Both are exact, and both are
# described here once; the page and the CLI quote this text.
#
# windows   Non-overlapping windows, as training validates: the token stream is cut into
#           consecutive windows of L inputs, window k reads ids[kL : kL+L] and predicts
#           ids[kL+1 : kL+L+1]; the tail that does not fill a window is not scored. A token at
#           position p of its window is predicted from p+1 tokens (p = 0..L-1), so most tokens see
#           far less than L tokens of context. At L = block size over the whole dev text this is
#           exactly the trainer's validation loss.
# sliding   Every token with as much left context as fits (stride 1): the token after input
#           position t is predicted from ids[max(0, t-L+1) .. t]. Computed exactly, not with a
#           stride: the first window ids[0:L] scores its L predictions (with a causal model,
#           position t there sees exactly ids[0..t]); after that every window ids[t-L+1 .. t]
#           (t = L .. N-2) scores only its last prediction. That is N-L forward passes of L tokens
#           (batched), so it is expensive: limit it with max_tokens.
#
# The stream is the first max_tokens+1 tokens of the text, so at most max_tokens predictions are
# scored. Targets that are PAD (characters outside the vocabulary) are not scored, as in the
# model's own loss. Lengths past `model.max_length` (a learned table has no row for position 64 of a
# 64-row table) are never clamped: they return a "not applicable" score with the reason.

EXTRAPOLATION_FACTORS = (0.5, 1.0, 1.5, 2.0, 3.0, 4.0)
EXTRAPOLATION_PROTOCOLS = ("windows", "sliding")
PROTOCOL_DESCRIPTIONS = {  # the comment above, in the words the page and --help show
    "windows": "Non-overlapping windows of L tokens, as training validates: window k reads tokens kL..kL+L-1 "
               "and predicts each next token; the tail that does not fill a window is not scored. A token at "
               "position p of its window is predicted from p+1 tokens, so most tokens see far less than L "
               "tokens of context. At 1x over the whole dev text this is the validation loss of training.",
    "sliding": "Sliding window, stride 1, exact: every token is predicted from as many of the tokens before "
               "it as fit in L (tokens max(0, t-L+1)..t predict token t+1). The first window scores all its "
               "predictions, every later window only its last one: one forward pass of L tokens per "
               "prediction after the first L.",
}
WINDOWS_PER_BATCH = 64
_ROOT = Path(__file__).resolve().parents[2]


class ExtrapolationError(ValueError):
    """Something the extrapolation cannot run on; str() is one sentence for the user."""


@dataclass
class LengthScore:
    """Dev loss of one model at one window length under one protocol (NaN + reason: not applicable)."""

    protocol: str
    factor: float  # length / block size
    length: int  # window length in tokens
    loss: float  # mean cross-entropy (nats) over scored predictions; NaN when not applicable
    tokens: int  # predictions scored
    windows: int  # forward windows run
    reason: str | None = None
    position_loss: list[float] | None = None  # windows protocol: mean loss at window position p

    @property
    def applicable(self) -> bool:
        return self.reason is None

    @property
    def perplexity(self) -> float:
        return math.exp(min(self.loss, 50.0)) if math.isfinite(self.loss) else math.nan


@dataclass
class VariantExtrapolation:
    """Every LengthScore of one checkpoint, with what it was measured on."""

    name: str  # checkpoint name
    positional: str
    block_size: int
    max_length: int | None
    scores: list[LengthScore] = field(default_factory=list)
    text_source: str = ""
    stream_tokens: int = 0  # tokens in the evaluated stream (predictions = stream_tokens - 1)
    notes: list[str] = field(default_factory=list)

    def score(self, protocol: str, factor: float) -> LengthScore | None:
        for s in self.scores:
            if s.protocol == protocol and math.isclose(s.factor, factor):
                return s
        return None


def window_length(block_size: int, factor: float) -> int:
    return max(1, int(round(block_size * factor)))


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


def check_language_model(model: Transformer, name: str = "This model") -> None:
    if model.config.head != "lm" or not model.config.causal:
        raise ExtrapolationError(f"{name} is not a causal language model; length extrapolation scores "
                                 "next-token predictions.")


def resolve_data_path(path: str) -> Path | None:
    """A corpus path recorded in a checkpoint: absolute, relative to the working folder, or the repo."""
    candidate = Path(path)
    for option in ([candidate] if candidate.is_absolute() else [Path.cwd() / candidate, _ROOT / candidate]):
        if option.is_file():
            return option
    return None


@dataclass
class DevText:
    text: str
    source: str  # what the text is, in words
    notes: list[str] = field(default_factory=list)


def dev_text_from_metadata(metadata: dict[str, Any], name: str = "The checkpoint") -> DevText:
    """The validation split training used: `text[int(len(text) * (1 - val_fraction)):]` of the corpus
    recorded in the checkpoint's `data` metadata (the split of `core.train.recipes.train_lm`)."""
    data = metadata.get("data") or []
    if not data or not isinstance(data[0], dict) or not data[0].get("path"):
        raise ExtrapolationError(f"{name} records no training corpus; give a text to evaluate on.")
    recorded = str(data[0]["path"])
    path = resolve_data_path(recorded)
    if path is None:
        raise ExtrapolationError(f"The corpus {recorded} that {name} was trained on is not on this machine; "
                                 "give a text to evaluate on.")
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ExtrapolationError(f"{recorded} is not UTF-8 text.") from None
    notes = []
    if data[0].get("sha256") and hashlib.sha256(raw).hexdigest() != data[0]["sha256"]:
        notes.append(f"{recorded} has changed since {name} was trained (its sha256 differs), so the split "
                     "is not exactly the one training validated on.")
    try:
        val_fraction = float(metadata.get("val_fraction", 0.1))
    except (TypeError, ValueError):
        val_fraction = 0.1
    if "val_fraction" not in metadata:
        notes.append(f"{name} records no validation fraction; using the last 10% of {recorded}.")
    val_fraction = min(max(val_fraction, 0.0), 1.0)
    cut = int(len(text) * (1 - val_fraction))
    return DevText(text[cut:], f"the last {val_fraction:.0%} of {recorded} (characters {cut:,} to "
                               f"{len(text):,}), the validation split of training", notes)


def token_stream(tokenizer, text: str, max_tokens: int | None = None) -> tuple[torch.Tensor, list[str]]:
    """(ids of the first max_tokens+1 tokens, notes). At least two tokens are needed to score one."""
    tokenized = tokenizer.tokenize(text)
    ids = tokenized.ids if max_tokens is None else tokenized.ids[: max(0, int(max_tokens)) + 1]
    notes = []
    if tokenized.unknown:
        shown = " ".join(repr(u) for u in tokenized.unknown[:10])
        notes.append(f"{len(tokenized.unknown)} distinct piece(s) are not in the vocabulary ({shown}); "
                     "they are read as PAD and never scored.")
    if len(ids) < 2:
        raise ExtrapolationError("The text has fewer than two tokens; there is nothing to predict.")
    return torch.tensor(ids, dtype=torch.long), notes


def _not_applicable(model: Transformer, length: int) -> str | None:
    limit = model.max_length
    if limit is None or length <= limit:
        return None
    binding = [f"{model.config.positional} positions"] if model.pos.max_positions == limit else []
    if model.blocks and model.blocks[0].attn.max_positions == limit:
        binding.append(f"{model.config.attention} attention")
    return f"no positions past {limit} with {' and '.join(binding) or 'this model'}"


def _token_losses(model: Transformer, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-prediction cross-entropy (B, T) in float64 and the mask of scored (non-PAD) targets."""
    logits, _ = model(x)  # (B, T, V)
    losses = F.cross_entropy(logits.transpose(1, 2).double(), y, reduction="none")  # (B, T)
    scored = y != model.config.pad_id
    return losses * scored, scored


def _batches_windows(n_predictions: int, length: int, batch_size: int) -> int:
    return math.ceil((n_predictions // length) / batch_size)


def _batches_sliding(n_predictions: int, length: int, batch_size: int) -> int:
    return 1 + math.ceil(max(0, n_predictions - length) / batch_size)


@torch.no_grad()
def score_length(model: Transformer, ids: torch.Tensor, length: int, protocol: str,
                 factor: float | None = None, batch_size: int = WINDOWS_PER_BATCH,
                 progress: Progress | None = None) -> LengthScore:
    """One (length, protocol) measurement on a token stream; see the protocols above."""
    if protocol not in EXTRAPOLATION_PROTOCOLS:
        raise ExtrapolationError(f"Unknown protocol {protocol!r}; "
                                 f"choose {' or '.join(EXTRAPOLATION_PROTOCOLS)}.")
    check_language_model(model)
    model.eval()
    device = next(model.parameters()).device
    ids = ids.to(device)
    factor = length / model.config.block_size if factor is None else factor
    reason = _not_applicable(model, length)
    n_pred = ids.numel() - 1
    if reason is None and protocol == "windows" and n_pred < length:
        reason = f"the text has {n_pred + 1} tokens, fewer than one window of {length + 1}"
    if reason is not None:
        return LengthScore(protocol, factor, length, math.nan, 0, 0, reason)
    total, count, windows = torch.zeros((), dtype=torch.float64, device=device), 0, 0
    position_loss = None
    if protocol == "windows":
        n_windows = n_pred // length
        x = ids[: n_windows * length].view(n_windows, length)
        y = ids[1: n_windows * length + 1].view(n_windows, length)
        pos_sum = torch.zeros(length, dtype=torch.float64, device=device)
        pos_count = torch.zeros(length, dtype=torch.float64, device=device)
        n_batches = math.ceil(n_windows / batch_size)
        for b, start in enumerate(range(0, n_windows, batch_size)):
            losses, scored = _token_losses(model, x[start: start + batch_size], y[start: start + batch_size])
            pos_sum += losses.sum(0)
            pos_count += scored.sum(0)
            if progress:
                progress(b + 1, n_batches)
        total, count, windows = pos_sum.sum(), int(pos_count.sum()), n_windows
        position_loss = (pos_sum / pos_count.clamp(min=1)).where(pos_count > 0, math.nan).tolist()
    else:
        first = min(length, n_pred)  # the first window scores all its predictions
        losses, scored = _token_losses(model, ids[:first].view(1, -1), ids[1: first + 1].view(1, -1))
        total, count, windows = total + losses.sum(), int(scored.sum()), 1
        n_batches = _batches_sliding(n_pred, length, batch_size)
        if progress:
            progress(1, n_batches)
        if n_pred > length:
            # window s = ids[s : s+L] (s = 1 .. n_pred-L) predicts ids[s+L] from its last position
            all_windows = ids[:n_pred].unfold(0, length, 1)  # (n_pred-L+1, L), a view
            targets = ids[length + 1:]  # target of window s is ids[s+L]
            for b, s in enumerate(range(1, n_pred - length + 1, batch_size)):
                chunk = all_windows[s: s + batch_size]
                target = targets[s - 1: s - 1 + chunk.size(0)].view(-1, 1)
                logits, _ = model(chunk)  # (B, L, V); only the last position is scored
                loss = F.cross_entropy(logits[:, -1].double(), target.view(-1), reduction="none")
                keep = target.view(-1) != model.config.pad_id
                total = total + (loss * keep).sum()
                count += int(keep.sum())
                windows += chunk.size(0)
                if progress:
                    progress(b + 2, n_batches)
    loss = float(total) / count if count else math.nan
    return LengthScore(protocol, factor, length, loss, count, windows,
                       None if count else "no scorable tokens (all targets are PAD)", position_loss)


def evaluate_extrapolation(model: Transformer, ids: torch.Tensor,
                           factors: Sequence[float] = EXTRAPOLATION_FACTORS,
                           protocols: Sequence[str] = EXTRAPOLATION_PROTOCOLS, name: str = "model",
                           batch_size: int = WINDOWS_PER_BATCH, progress: Progress | None = None
                           ) -> VariantExtrapolation:
    """Every (protocol, factor) of one model on one token stream. progress(done, total) counts batches."""
    check_language_model(model, name)
    block = model.config.block_size
    plan = [(p, f, window_length(block, f)) for p in protocols for f in factors]
    n_pred = ids.numel() - 1
    batches = {"windows": _batches_windows, "sliding": _batches_sliding}
    sizes = [0 if _not_applicable(model, L) else batches[p](n_pred, L, batch_size) for p, _, L in plan]
    total, done = max(sum(sizes), 1), 0
    result = VariantExtrapolation(name, model.config.positional, block, model.max_length,
                                  stream_tokens=ids.numel())
    for (protocol, factor, length), size in zip(plan, sizes):
        def step(d: int, _t: int, base: int = done) -> None:
            if progress:
                progress(min(base + d, total), total)

        result.scores.append(score_length(model, ids, length, protocol, factor, batch_size, step))
        done += size
        if progress:
            progress(min(done, total), total)
    return result


REPRODUCTION_TOLERANCE = 1e-3  # nats: float noise between batchings is ~1e-6


def recorded_val_loss(metadata: dict[str, Any]) -> float | None:
    """The dev loss training recorded at its end (metrics.val_loss), if any."""
    value = (metadata.get("metrics") or {}).get("val_loss")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def reproduction_note(name: str, recorded: float | None, measured: float,
                      tolerance: float = REPRODUCTION_TOLERANCE) -> str | None:
    """None when the windows protocol at 1x over the whole dev split gives back the loss training recorded
    (it is the same computation); otherwise a sentence saying the numbers are not what training measured."""
    if recorded is None or not math.isfinite(measured) or abs(measured - recorded) <= tolerance:
        return None
    return (f"{name}: its weights give a dev loss of {measured:.4f} at the training length over the whole "
            f"dev split, but training recorded {recorded:.4f}; the code that runs it has changed since it "
            "was trained (or the file was altered), so its numbers here are not what training measured.")


def variant_labels(variants: Sequence[VariantExtrapolation]) -> list[str]:
    """'ALiBi', 'RoPE', ...; the checkpoint name is added when two variants share a scheme."""
    schemes = [scheme_label(v.positional) for v in variants]
    return [s if schemes.count(s) == 1 else f"{s} ({v.name})" for s, v in zip(schemes, variants)]


def _factor_text(factor: float) -> str:
    return f"{factor:g}x"


def extrapolation_rows(variants: Sequence[VariantExtrapolation]) -> list[dict[str, Any]]:
    """One tidy row per (variant, protocol, length): what the table and the CSV show."""
    rows = []
    for label, v in zip(variant_labels(variants), variants):
        for s in v.scores:
            rows.append({"variant": label, "checkpoint": v.name, "positional": v.positional,
                         "protocol": s.protocol, "factor": s.factor, "length": s.length,
                         "loss": s.loss, "perplexity": s.perplexity, "tokens scored": s.tokens,
                         "windows": s.windows, "note": s.reason or ""})
    return rows


def extrapolation_summary(variants: Sequence[VariantExtrapolation]) -> list[str]:
    """Sentences generated from the numbers: the perplexities at the longest length anything was measured
    at, which lengths had no number (and why), and the change from the training length. Says nothing
    the numbers do not say."""
    labels = variant_labels(variants)
    sentences = []
    protocols = list(dict.fromkeys(s.protocol for v in variants for s in v.scores))
    for protocol in protocols:
        what = ("sliding window" if protocol == "sliding" else "non-overlapping windows").capitalize()
        factors = sorted({s.factor for v in variants for s in v.scores if s.protocol == protocol
                          and s.applicable})
        if factors:
            longest = factors[-1]
            ok = sorted((s.perplexity, label, s) for label, v in zip(labels, variants)
                        if (s := v.score(protocol, longest)) is not None and s.applicable)
            parts = ", ".join(f"{label} {ppl:.3f}" for ppl, label, _ in ok)
            sentence = (f"{what}, at {_factor_text(longest)} the training length ({ok[0][2].length} tokens), "
                        f"dev perplexity: {parts}")
            sentences.append(sentence + (f"; lowest: {ok[0][1]}." if len(ok) > 1 else "."))
        for label, v in zip(labels, variants):
            missing = [s for s in v.scores if s.protocol == protocol and not s.applicable]
            if missing:
                where = ", ".join(_factor_text(s.factor) for s in missing)
                sentences.append(f"{what}: no number for {label} at {where} ({missing[0].reason}).")
        if factors and 1.0 in factors and factors[-1] > 1.0:
            changes = []
            for label, v in zip(labels, variants):
                base, far = v.score(protocol, 1.0), v.score(protocol, factors[-1])
                if base and far and base.applicable and far.applicable:
                    change = 100 * (far.perplexity / base.perplexity - 1)
                    changes.append(f"{label} {base.perplexity:.3f} -> {far.perplexity:.3f} ({change:+.1f}%)")
            if changes:
                sentences.append(f"{what}, from 1x to {_factor_text(factors[-1])}: "
                                 + "; ".join(changes) + ".")
    return sentences


def format_extrapolation_table(variants: Sequence[VariantExtrapolation], metric: str = "perplexity") -> str:
    """A plain-text table per protocol: rows are variants, columns lengths; 'n/a' is not applicable."""
    labels = variant_labels(variants)
    out = []
    protocols = list(dict.fromkeys(s.protocol for v in variants for s in v.scores))
    for protocol in protocols:
        factors = sorted({s.factor for v in variants for s in v.scores if s.protocol == protocol})
        block = variants[0].block_size
        head = ["variant"] + [f"{_factor_text(f)} ({window_length(block, f)})" for f in factors]
        body = []
        for label, v in zip(labels, variants):
            cells = [label]
            for f in factors:
                s = v.score(protocol, f)
                value = getattr(s, metric) if s is not None else math.nan
                cells.append(f"{value:.4f}" if s is not None and s.applicable else "n/a")
            body.append(cells)
        widths = [max(len(r[i]) for r in [head, *body]) for i in range(len(head))]
        out.append(f"{protocol} protocol, dev {metric} by window length (tokens):")
        for row in [head, *body]:
            out.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                                 for i, (c, w) in enumerate(zip(row, widths))))
        reasons = {f"{label}: {s.reason}" for label, v in zip(labels, variants) for s in v.scores
                   if s.protocol == protocol and not s.applicable}
        out.extend(f"  n/a = {r}" for r in sorted(reasons))
        out.append("")
    return "\n".join(out).rstrip() + "\n"


# --- command line ---------------------------------------------------------------------------------

def _extrapolation_main(args) -> int:
    from tqdm import tqdm

    from core.data.datasets import DataError, read_text
    from core.io import checkpoint as ckpt

    try:
        factors = parse_factors(args.lengths)
        protocols = [p.strip() for p in args.protocols.split(",") if p.strip()]
        unknown = [p for p in protocols if p not in EXTRAPOLATION_PROTOCOLS]
        if unknown or not protocols:
            raise ExtrapolationError(f"Unknown protocol {', '.join(unknown) or '(none)'}; choose from "
                                     f"{', '.join(EXTRAPOLATION_PROTOCOLS)}.")
        text = DevText(read_text(args.text), f"the whole of {args.text}") if args.text else None
        device = args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
        if device.startswith("cuda") and not torch.cuda.is_available():
            raise ExtrapolationError("CUDA is not available on this machine; use --device cpu.")
        variants = []
        for path in args.checkpoints:
            loaded = ckpt.load(path, device=device)
            name = Path(path).stem
            check_language_model(loaded.model, name)
            source = text or dev_text_from_metadata(loaded.metadata, name)
            ids, notes = token_stream(loaded.tokenizer, source.text, args.max_tokens)
            bar = tqdm(total=1, desc=name, leave=False, dynamic_ncols=True, disable=None)

            def progress(done: int, total: int, bar=bar) -> None:
                bar.total = total
                bar.n = done
                bar.refresh()

            result = evaluate_extrapolation(loaded.model, ids, factors, protocols, name, args.batch_size,
                                            progress)
            bar.close()
            result.text_source, result.notes = source.source, [*source.notes, *notes]
            if text is None:  # the recorded dev split: the trainer's own validation must come back
                full, _ = token_stream(loaded.tokenizer, source.text)
                check = score_length(loaded.model, full, loaded.config.block_size, "windows", 1.0,
                                     args.batch_size)
                recorded = recorded_val_loss(loaded.metadata)
                problem = reproduction_note(name, recorded, check.loss)
                result.notes.append(problem or ("check: the windows protocol at 1x over the whole dev split "
                                                f"gives {check.loss:.4f}, the dev loss training recorded."
                                                if recorded is not None else
                                                "check: no recorded dev loss to compare with."))
            variants.append(result)
            print(f"{name}: {result.positional} positions, block {result.block_size}, {ids.numel() - 1:,} "
                  f"predictions from {result.text_source}", flush=True)
            for note in result.notes:
                print(f"  {note}")
    except (ExtrapolationError, DataError, ckpt.CheckpointError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print()
    print(format_extrapolation_table(variants), end="")
    print()
    for sentence in extrapolation_summary(variants):
        print(sentence)
    if args.json:
        import json

        payload = {"factors": factors, "protocols": protocols, "max_tokens": args.max_tokens,
                   "rows": extrapolation_rows(variants),
                   "position_loss": {v.name: {str(s.length): s.position_loss for s in v.scores
                                              if s.position_loss is not None} for v in variants}}
        Path(args.json).write_text(json.dumps(payload, indent=1, allow_nan=True) + "\n")
        print(f"wrote {args.json}")
    return 0


def build_parser():
    import argparse

    parser = argparse.ArgumentParser(prog="python -m core.lens.extrapolation", description="Evaluate checkpoints.")
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
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "extrapolation":
        return _extrapolation_main(args)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
