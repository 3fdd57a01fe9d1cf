"""A language model on a text, token by token: which pieces surprise it, which documents it finds hard.

`score_tokens` reads a text in the windows `core.lens.lm_eval.score_ids` reads it in (consecutive windows of the
block size, the tail included), so every piece after the first is predicted once and the file's mean loss and
perplexity are `python -m core.train evaluate`'s (a test compares them). Per target piece it keeps the loss,
the rank the model gave the true piece (1 = its top guess; GLTR's buckets: top 1, top 10, top 100, beyond),
the model's top guess and the position in the block (how much context the window gave it). Documents are the
file's lines (or the whole file): each piece is assigned to its line when the tokenizer splits the text line by
line exactly as it splits it whole (byte-level BPE and characters do); otherwise the file is one document.
Two language models on the same pieces: `compare_lms`, token by token and by position in the block.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from core.data.datasets import DataError
from core.lens.attention import piece_label
from core.lens.lm_eval import TextScore, unknown_count
from core.lens.trace import Progress, model_device
from core.model.tokenizer import Tokenizer
from core.text import visible_token

BUCKETS = ("top 1", "top 10", "top 100", "beyond")  # GLTR (Gehrmann et al. 2019)
BUCKET_LIMITS = (1, 10, 100)
TOKEN_COLUMNS = ("file", "document", "position", "block position", "piece", "loss", "p(piece)", "rank", "bucket",
                 "top guess")
CONTEXT_PIECES = 12  # pieces of context shown before a surprising piece


class LanguageModelError(DataError):
    """A model that is not a left-to-right language model, or a text it cannot score; one sentence."""


def bucket_of(rank: int) -> str:
    for limit, name in zip(BUCKET_LIMITS, BUCKETS):
        if rank <= limit:
            return name
    return BUCKETS[-1]


def window_of(model) -> int:
    config = model.config
    if not config.causal or config.head != "lm":
        raise LanguageModelError("Token by token scoring needs a left-to-right language model (this one is an "
                                 "encoder or a classifier).")
    return config.block_size if model.max_length is None else min(config.block_size, model.max_length)


@dataclass
class TokenScores:
    """Per target piece (ids[1:]): -log p (nan where the target is PAD: not scored), rank of the true piece, the
    model's top guess, the position in its window (0 = predicted from one piece of context)."""

    ids: list[int]
    loss: np.ndarray  # (N - 1,)
    rank: np.ndarray  # (N - 1,)
    top: np.ndarray  # (N - 1,)
    block_position: np.ndarray  # (N - 1,)


@torch.no_grad()
def score_tokens(model, ids: Sequence[int], batch_size: int = 32, progress: Progress | None = None) -> TokenScores:
    """Every piece after the first, in score_ids' windows and batches (full windows batched, partial ones
    alone)."""
    ids = [int(i) for i in ids]
    window = window_of(model)
    pad = model.config.pad_id
    device = model_device(model)
    n = max(len(ids) - 1, 0)
    loss, rank = np.full(n, np.nan), np.zeros(n, dtype=np.int64)
    top, where = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
    starts = list(range(0, n, window))
    full = [s for s in starts if s + window + 1 <= len(ids)]
    partial = [s for s in starts if s + window + 1 > len(ids)]
    batches = [full[i: i + batch_size] for i in range(0, len(full), batch_size)] + [[s] for s in partial]
    model.eval()
    done = 0
    for batch in batches:
        chunks = torch.tensor([ids[s: s + window + 1] for s in batch], dtype=torch.long, device=device)
        x, y = chunks[:, :-1], chunks[:, 1:]  # (B, T)
        logits, _ = model(x)
        logits = logits.float()  # (B, T, V)
        nll = F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1), reduction="none").view(y.shape)
        true_logit = logits.gather(-1, y.unsqueeze(-1))  # (B, T, 1)
        ranks = (logits > true_logit).sum(-1) + 1  # (B, T)
        guesses = logits.argmax(-1)
        for row, s in enumerate(batch):
            width = y.size(1)
            span = slice(s, s + width)  # targets ids[s + 1: s + width + 1] are indices s .. s + width - 1 of ids[1:]
            scored = (y[row] != pad).cpu().numpy()
            values = nll[row].double().cpu().numpy()
            loss[span] = np.where(scored, values, np.nan)
            rank[span] = ranks[row].cpu().numpy()
            top[span] = guesses[row].cpu().numpy()
            where[span] = np.arange(width)
        done += len(batch)
        if progress is not None:
            progress(done, len(batches))
    return TokenScores(ids=ids, loss=loss, rank=rank, top=top, block_position=where)


def line_documents(tokenizer: Tokenizer, text: str, ids: Sequence[int]) -> np.ndarray | None:
    """For each id of the whole text, the index of the line it lies in (lines kept with their newline), or None
    when tokenising line by line does not give the whole text's pieces (then lines cannot be told apart)."""
    segments = text.splitlines(keepends=True)
    per_line = tokenizer.encode_batch(segments) if hasattr(tokenizer, "encode_batch") else [
        tokenizer.encode(s) for s in segments]
    joined = [i for line in per_line for i in line]
    if joined == list(ids):
        return np.repeat(np.arange(len(segments)), [len(line) for line in per_line])
    offsets = tokenizer.offsets(text) if hasattr(tokenizer, "offsets") else None
    if offsets is None or len(offsets) != len(ids):
        return None
    # a Hugging Face tokenizer that reads a line differently alone (LLaMA's <s> and its word-start mark): each piece
    # belongs to the line its first character is in; a special token (no characters) to the line before it
    starts = np.cumsum([0] + [len(s) for s in segments[:-1]])
    out, line = np.zeros(len(ids), dtype=np.int64), 0
    for n, (start, end) in enumerate(offsets):
        if end > start:
            line = int(np.searchsorted(starts, start, side="right")) - 1
        out[n] = line
    return out


@dataclass
class LanguageModelErrors:
    """One language model on one or more files. `tokens`: one row per target piece (TOKEN_COLUMNS); `documents`:
    one row per document (file, document, text, tokens scored, loss, perplexity); `files`: per file the
    TextScore `python -m core.train evaluate` prints; `pieces`: per file, every piece's display label."""

    model: str
    tokens: pd.DataFrame
    documents: pd.DataFrame
    files: list[TextScore]
    pieces: dict[str, list[str]]
    ids: dict[str, list[int]]
    one_document_per_file: list[str]  # files whose lines could not be told apart
    window: int = 0  # the model's positions: a longer file is scored in windows of this many pieces
    vocab: int = 0  # the model's vocabulary: a "top k" as large is every piece (0: not known)

    @property
    def loss(self) -> float:
        scored = self.tokens["loss"].dropna()
        return float(scored.mean()) if len(scored) else float("nan")

    @property
    def perplexity(self) -> float:
        return math.exp(min(self.loss, 50.0))

    def bucket_shares(self) -> pd.Series:
        scored = self.tokens[self.tokens["loss"].notna()]
        counts = scored["bucket"].value_counts().reindex(list(BUCKETS), fill_value=0)
        return counts / max(len(scored), 1)

    def surprising(self, n: int = 20) -> pd.DataFrame:
        """The `n` pieces with the highest loss, each with the pieces before it (and the one after)."""
        worst = self.tokens.dropna(subset=["loss"]).nlargest(n, "loss")
        rows = []
        for row in worst.itertuples():
            pieces = self.pieces[row.file]
            at = int(row.position)
            rows.append({"file": row.file, "position": at, "before": "".join(pieces[max(0, at - CONTEXT_PIECES): at]),
                         "piece": pieces[at], "after": "".join(pieces[at + 1: at + 4]), "loss": row.loss,
                         "rank": row.rank, "top guess": row._10})
        return pd.DataFrame(rows, columns=["file", "position", "before", "piece", "after", "loss", "rank",
                                           "top guess"])

    def context(self, file: str, position: int) -> tuple[list[int], list[str]]:
        """The ids and labels the model read when it predicted the piece at `position` of `file` (its window up to
        the piece before; the piece itself is ids[position])."""
        row = self.tokens[(self.tokens["file"] == file) & (self.tokens["position"] == position)]
        if row.empty:
            raise LanguageModelError(f"Position {position} of {file} is not a scored piece.")
        start = position - 1 - int(row["block position"].iloc[0])
        return self.ids[file][start:position], self.pieces[file][start:position]

    def _outside(self, shares: pd.Series) -> str:
        """' and outside its top 100 for 2%', with the largest GLTR bucket smaller than the vocabulary (in a top 100
        of 64 pieces every piece is: issue 63's "outside its top 100 for 0%"); '' when only top 1 fits."""
        limits = [k for k in BUCKET_LIMITS[1:] if not self.vocab or k < self.vocab]
        if not limits:
            return ""
        k = limits[-1]
        inside = sum(shares[name] for limit, name in zip(BUCKET_LIMITS, BUCKETS) if limit <= k)
        of = f" (of {self.vocab:,} pieces)" if self.vocab and k < BUCKET_LIMITS[-1] else ""
        return f" and outside its top {k}{of} for {1 - inside:.0%}"

    def caption(self) -> str:
        n = int(self.tokens["loss"].notna().sum())
        shares = self.bucket_shares()
        files = ", ".join(f.name for f in self.files)
        line = (f"{self.model} has perplexity {self.perplexity:.4g} (loss {self.loss:.4f}) on the {n:,} pieces of "
                f"{files}; the true piece is its top guess for {shares['top 1']:.0%} of them{self._outside(shares)}")
        if len(self.documents) > 1:
            hardest = self.documents.loc[self.documents["loss"].idxmax()]
            line += (f"; its hardest document is {hardest['file']} #{int(hardest['document'])} "
                     f"(perplexity {hardest['perplexity']:.4g})")
        longer = [f for f, ids in self.ids.items() if self.window and len(ids) - 1 > self.window]
        if longer:
            line += (f". {', '.join(longer)} {'is' if len(longer) == 1 else 'are'} longer than the model's "
                     f"{self.window:,} positions, so {'it is' if len(longer) == 1 else 'they are'} scored in windows "
                     f"of {self.window:,} pieces, each read afresh (as python -m core.train evaluate scores them)")
        return line + "."


def _documents(name: str, text: str, tokenizer: Tokenizer, ids: list[int], scores: TokenScores, unit: str
               ) -> tuple[np.ndarray, pd.DataFrame, bool]:
    """(document of each target piece, one row per document, whether lines were told apart)."""
    segments = text.splitlines(keepends=True)
    of_id = line_documents(tokenizer, text, ids) if unit == "line" and len(segments) > 1 else None
    if of_id is None:
        of_target = np.zeros(len(ids) - 1, dtype=np.int64)
        texts = [text]
    else:
        # numbered among the non-blank lines (a blank line's newline belongs to no document: -1)
        number = np.cumsum([bool(s.strip()) for s in segments]) - 1
        number = np.where([bool(s.strip()) for s in segments], number, -1)
        of_target = number[of_id[1:]]
        texts = [s.rstrip("\n\r") for s in segments if s.strip()]
    scored = np.isfinite(scores.loss) & (of_target >= 0)
    counts = np.bincount(of_target[scored], minlength=len(texts))[: len(texts)]
    sums = np.bincount(of_target[scored], weights=scores.loss[scored], minlength=len(texts))[: len(texts)]
    with np.errstate(invalid="ignore", divide="ignore"):
        means = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
    rows = [{"file": name, "document": d, "text": doc_text, "tokens scored": int(counts[d]), "loss": float(means[d]),
             "perplexity": math.exp(min(float(means[d]), 50.0)) if counts[d] else float("nan")}
            for d, doc_text in enumerate(texts)]
    return of_target, pd.DataFrame(rows), of_id is not None or unit == "file"


def score_lm(model, tokenizer: Tokenizer, texts: Sequence[tuple[str, str]], name: str = "the model",
             unit: str = "line", progress: Progress | None = None) -> LanguageModelErrors:
    """Each (file name, text) scored piece by piece; documents per line (`unit="line"`) or per file."""
    token_frames, doc_frames, files, pieces, all_ids, merged = [], [], [], {}, {}, []
    for file, text in texts:
        tokenized = tokenizer.tokenize(text)
        ids = list(tokenized.ids)
        if len(ids) < 2:
            raise LanguageModelError(f"{file} has fewer than two pieces; there is nothing to predict.")
        scores = score_tokens(model, ids, progress=progress)
        scored = np.isfinite(scores.loss)
        if not scored.any():
            raise LanguageModelError(f"No piece of {file} is in the model's vocabulary, so nothing can be scored.")
        labels = [visible_token(t) for t in tokenized.tokens] if len(tokenized.tokens) == len(ids) else [
            piece_label(tokenizer, i) for i in ids]
        guess = {int(i): piece_label(tokenizer, int(i)) for i in np.unique(scores.top)}
        of_target, docs, told = _documents(file, text, tokenizer, ids, scores, unit)
        if not told:
            merged.append(file)
        token_frames.append(pd.DataFrame({
            "file": file, "document": of_target, "position": np.arange(1, len(ids)),
            "block position": scores.block_position, "piece": labels[1:], "loss": scores.loss,
            "p(piece)": np.exp(-scores.loss), "rank": scores.rank, "bucket": [bucket_of(int(r)) for r in scores.rank],
            "top guess": [guess[int(i)] for i in scores.top]}, columns=list(TOKEN_COLUMNS)))
        doc_frames.append(docs)
        unknown, n_pieces = unknown_count(tokenizer, text)
        total = float(np.nansum(scores.loss))
        count = int(scored.sum())
        files.append(TextScore(name=file, loss=total / count, perplexity=math.exp(min(total / count, 50.0)),
                               tokens_scored=count, tokens=n_pieces, unknown=unknown))
        pieces[file], all_ids[file] = labels, ids
    return LanguageModelErrors(model=name, tokens=pd.concat(token_frames, ignore_index=True),
                               documents=pd.concat(doc_frames, ignore_index=True), files=files, pieces=pieces,
                               ids=all_ids, one_document_per_file=merged, window=window_of(model),
                               vocab=int(model.config.vocab_size))


# --- two language models on the same text ------------------------------------------------------------------

@dataclass
class LanguageModelComparison:
    first: LanguageModelErrors
    second: LanguageModelErrors
    tokens: pd.DataFrame  # file, position, piece, loss of each, difference (first - second), better

    def by_position(self) -> pd.DataFrame:
        """Mean loss of each model per position in the block (the first model's windows), with counts."""
        grouped = self.tokens.groupby("block position")
        return pd.DataFrame({"count": grouped.size(), self.first.model: grouped[f"loss ({self.first.model})"].mean(),
                             self.second.model: grouped[f"loss ({self.second.model})"].mean()}).reset_index()

    def caption(self) -> str:
        n = len(self.tokens)
        a, b = self.first.model, self.second.model
        better_a = int((self.tokens["better"] == a).sum())
        better_b = int((self.tokens["better"] == b).sum())
        mean_a, mean_b = self.tokens[f"loss ({a})"].mean(), self.tokens[f"loss ({b})"].mean()
        return (f"On {n:,} pieces, {a} gives the true piece the higher probability on {better_a:,} "
                f"({better_a / max(n, 1):.0%}) and {b} on {better_b:,} ({better_b / max(n, 1):.0%}); mean loss "
                f"{mean_a:.4f} for {a} and {mean_b:.4f} for {b}.")


def compare_lms(first: LanguageModelErrors, second: LanguageModelErrors) -> LanguageModelComparison:
    """Token by token on the same pieces (refused in one sentence when the two split the text differently)."""
    if first.ids != second.ids:
        raise LanguageModelError(f"{first.model} and {second.model} split the text into different pieces (they do "
                                 "not share a tokenizer), so they cannot be compared piece by piece.")
    a, b = first.tokens, second.tokens
    keep = a["loss"].notna() & b["loss"].notna()
    diff = a["loss"] - b["loss"]
    better = np.select([diff < 0, diff > 0], [first.model, second.model], "tie")
    tokens = pd.DataFrame({"file": a["file"], "position": a["position"], "block position": a["block position"],
                           "piece": a["piece"], f"loss ({first.model})": a["loss"],
                           f"loss ({second.model})": b["loss"], "difference": diff, "better": better})[keep]
    return LanguageModelComparison(first, second, tokens.reset_index(drop=True))
