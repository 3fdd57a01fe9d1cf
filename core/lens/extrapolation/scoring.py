"""Scoring one window length: the two protocols, the score types, `score_length`, and the text scored.

Train short, test long (Press et al. 2022): dev loss of language models at window lengths that are
multiples of the training block size. This module measures one (model, protocol, length) on a token
stream, read from the validation split training used (`DevText`, found from a checkpoint's metadata);
`plan` runs many of them, `report` turns them into rows and sentences; the command line is
`python -m core.train.extrapolation`.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from core.io.loaded import CheckpointInfo
from core.lens.trace import Progress, model_device
from core.model.transformer import Transformer

EXTRAPOLATION_FACTORS = (0.5, 1.0, 1.5, 2.0, 3.0, 4.0)
EXTRAPOLATION_PROTOCOLS = ("windows", "sliding")
# Predictions scored per protocol unless a person asks for more: the page's defaults, and what
# `python -m core.train.extrapolation record` stores in a checkpoint (sliding is one pass per prediction).
DEFAULT_LIMITS = {"windows": 4096, "sliding": 512}
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
SPREAD_PARTS = 8  # the scored predictions are cut into this many consecutive parts for the spread


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
    # mean loss over each of SPREAD_PARTS consecutive equal parts of the scored predictions, in text order
    part_losses: list[float] | None = None

    @property
    def applicable(self) -> bool:
        return self.reason is None

    def spread(self) -> tuple[float, float] | None:
        """The perplexity's range from which predictions were scored: exp(loss -/+ 2 standard errors), the error
        estimated from the parts' losses (batch means: consecutive parts, so nearby predictions' correlation
        stays inside a part). None without parts (too few predictions, or a record from before them)."""
        parts = [p for p in self.part_losses or [] if math.isfinite(p)]
        if len(parts) < 2 or not math.isfinite(self.loss):
            return None
        mean = sum(parts) / len(parts)
        error = math.sqrt(sum((p - mean) ** 2 for p in parts) / (len(parts) - 1) / len(parts))
        return math.exp(min(self.loss - 2 * error, 50.0)), math.exp(min(self.loss + 2 * error, 50.0))

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


def past_the_limit(length: int, max_length: int | None) -> bool:
    """Whether a window of `length` tokens is longer than the model can encode (never clamped)."""
    return max_length is not None and length > max_length


def check_protocols(protocols: Iterable[str]) -> list[str]:
    """The protocols, refused with one sentence when one is unknown or none is given."""
    protocols = list(protocols)
    unknown = [p for p in protocols if p not in EXTRAPOLATION_PROTOCOLS]
    if unknown or not protocols:
        raise ExtrapolationError(f"Unknown protocol {', '.join(unknown) or '(none)'}; choose from "
                                 f"{', '.join(EXTRAPOLATION_PROTOCOLS)}.")
    return protocols


def check_language_model(model: Transformer, name: str = "This model") -> None:
    if model.config.head != "lm" or not model.config.causal:
        raise ExtrapolationError(f"{name} is not a causal language model; length extrapolation scores "
                                 "next-token predictions.")


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
    if not past_the_limit(length, limit):
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


@torch.no_grad()
def score_length(model: Transformer, ids: torch.Tensor, length: int, protocol: str,
                 factor: float | None = None, batch_size: int = WINDOWS_PER_BATCH,
                 progress: Progress | None = None) -> LengthScore:
    """One (length, protocol) measurement on a token stream; see the protocols above."""
    check_protocols([protocol])
    check_language_model(model)
    model.eval()
    device = model_device(model)
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
    each: list[torch.Tensor] = []  # every scored prediction's loss, in text order (for the spread)
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
            each.append(losses[scored])  # (B, L) masked -> (scored,), in text order
            if progress:
                progress(b + 1, n_batches)
        total, count, windows = pos_sum.sum(), int(pos_count.sum()), n_windows
        position_loss = (pos_sum / pos_count.clamp(min=1)).where(pos_count > 0, math.nan).tolist()
    else:
        first = min(length, n_pred)  # the first window scores all its predictions
        losses, scored = _token_losses(model, ids[:first].view(1, -1), ids[1: first + 1].view(1, -1))
        total, count, windows = total + losses.sum(), int(scored.sum()), 1
        each.append(losses[scored])
        n_batches = 1 + math.ceil(max(0, n_pred - length) / batch_size)
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
                each.append(loss[keep])
                count += int(keep.sum())
                windows += chunk.size(0)
                if progress:
                    progress(b + 2, n_batches)
    loss = float(total) / count if count else math.nan
    return LengthScore(protocol, factor, length, loss, count, windows,
                       None if count else "no scorable tokens (all targets are PAD)", position_loss,
                       part_losses(torch.cat(each)) if each else None)


def part_losses(losses: torch.Tensor, parts: int = SPREAD_PARTS) -> list[float] | None:
    """The mean of each of `parts` consecutive, near-equal parts of per-prediction losses (None: fewer than two
    predictions a part)."""
    if losses.numel() < 2 * parts:
        return None
    return [float(chunk.mean()) for chunk in torch.tensor_split(losses.double().cpu(), parts)]


_ROOT = Path(__file__).resolve().parents[3]


@dataclass
class DevText:
    text: str
    source: str  # what the text is, in words
    notes: list[str] = field(default_factory=list)


def resolve_data_path(path: str) -> Path | None:
    """A corpus path recorded in a checkpoint: absolute, relative to the working folder, or the repo."""
    candidate = Path(path)
    for option in ([candidate] if candidate.is_absolute() else [Path.cwd() / candidate, _ROOT / candidate]):
        if option.is_file():
            return option
    return None


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


def family_dev_text(members: Sequence[CheckpointInfo]) -> DevText:
    """The dev split of the first member's recorded corpus; a note when members recorded other corpora."""
    if not members:
        raise ExtrapolationError("No checkpoints to evaluate.")
    text = dev_text_from_metadata(members[0].metadata, members[0].name)
    first = _corpus_hashes(members[0])
    others = [m.name for m in members[1:] if _corpus_hashes(m) != first]
    if others:
        text.notes.append(f"{', '.join(others)} recorded a different training corpus than {members[0].name}; "
                          f"all are evaluated on {members[0].name}'s dev split.")
    return text


def _corpus_hashes(info: CheckpointInfo) -> list[Any]:
    data = info.metadata.get("data") or []
    return [(d.get("sha256"), d.get("path")) if isinstance(d, dict) else d for d in data]
