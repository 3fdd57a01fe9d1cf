"""Language-model scores on the files people are given: perplexity, tokens scored, unknown share.

`score_text` reads a text in consecutive windows of the model's block size, so every token after the
first is predicted exactly once, the tail included (a partial last window is scored too). Targets
that are PAD are not scored (a character tokenizer reads unknown characters as PAD; the model's own
loss ignores them the same way). A word tokenizer's `<unk>` IS scored, as in the courses; the unknown
share says how much of the text that is, because a large share makes perplexity look better than it is.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from core.data.datasets import DataError, read_text
from core.lens.trace import model_device
from core.model.tokenizer import Tokenizer

UNKNOWN_WARNING_SHARE = 0.05  # above this, perplexity is flattered enough to warn about


@dataclass
class TextScore:
    name: str
    loss: float  # mean negative log-likelihood per scored token (nats)
    perplexity: float
    tokens_scored: int
    tokens: int  # pieces in the text
    unknown: int  # pieces not in the vocabulary

    @property
    def unknown_share(self) -> float:
        return self.unknown / max(self.tokens, 1)

    def line(self) -> str:
        return (f"{self.name}: perplexity {self.perplexity:.4g} (loss {self.loss:.4f}), "
                f"{self.tokens_scored:,} tokens scored, unknown {self.unknown_share:.1%}")


def unknown_count(tokenizer: Tokenizer, text: str) -> tuple[int, int]:
    """(pieces not in the vocabulary, all pieces) of a text, counted per occurrence."""
    tokenized = tokenizer.tokenize(text)
    missing = set(tokenized.unknown)
    return sum(1 for piece in tokenized.tokens if piece in missing), len(tokenized.tokens)


def unknown_share(tokenizer: Tokenizer, text: str) -> float:
    unknown, pieces = unknown_count(tokenizer, text)
    return unknown / max(pieces, 1)


def unknown_warning(name: str, share: float) -> str | None:
    if share <= UNKNOWN_WARNING_SHARE:
        return None
    return (f"warning: {share:.1%} of {name} is outside the vocabulary (over {UNKNOWN_WARNING_SHARE:.0%}): "
            "it flatters perplexity and hides words from a classifier (see --level, --lowercase, --min-freq, "
            "--vocab-from).")


@torch.no_grad()
def score_ids(model, ids: list[int], batch_size: int = 32) -> tuple[float, int]:
    """(sum of -log p over scored targets, number scored) for one token stream."""
    config = model.config
    if not config.causal or config.head != "lm":
        raise DataError("Perplexity needs a left-to-right language model (this one is an encoder or a "
                        "classifier).")
    window = config.block_size if model.max_length is None else min(config.block_size, model.max_length)
    device = model_device(model)
    starts = list(range(0, max(len(ids) - 1, 0), window))
    total, count = 0.0, 0
    full = [s for s in starts if s + window + 1 <= len(ids)]
    partial = [s for s in starts if s + window + 1 > len(ids)]
    batches = [full[i: i + batch_size] for i in range(0, len(full), batch_size)] + [[s] for s in partial]
    model.eval()
    for batch in batches:
        chunks = torch.tensor([ids[s: s + window + 1] for s in batch], dtype=torch.long, device=device)
        x, y = chunks[:, :-1], chunks[:, 1:]  # (B, T)
        logits, _ = model(x)
        nll = F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), y.reshape(-1),
                              ignore_index=config.pad_id, reduction="sum")
        total += nll.item()
        count += int((y != config.pad_id).sum())
    return total, count


def score_text(model, tokenizer: Tokenizer, text: str, name: str = "the text") -> TextScore:
    ids = tokenizer.encode(text)
    if len(ids) < 2:
        raise DataError(f"{name} has fewer than two tokens; there is nothing to predict.")
    total, count = score_ids(model, ids)
    if count == 0:
        raise DataError(f"No token of {name} is in the model's vocabulary, so nothing can be scored.")
    unknown, pieces = unknown_count(tokenizer, text)
    loss = total / count
    return TextScore(name=name, loss=loss, perplexity=math.exp(min(loss, 50.0)), tokens_scored=count,
                     tokens=pieces, unknown=unknown)


def score_file(model, tokenizer: Tokenizer, path: str | Path) -> TextScore:
    return score_text(model, tokenizer, read_text(path), Path(path).name)


def split_names(paths: list[str]) -> list[str]:
    """One history split name per file: its stem without '_' (the trainer splits 'split_metric' at the
    first '_'), never 'train' or 'val', unique."""
    names: list[str] = []
    for path in paths:
        base = Path(path).stem.replace("_", "-").strip() or "file"
        if base in ("train", "val"):
            base = f"{base}-file"
        name, n = base, 2
        while name in names:
            name, n = f"{base}-{n}", n + 1
        names.append(name)
    return names
