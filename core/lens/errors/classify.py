"""A classifier on an evaluation file, example by example: what it predicted, how sure it was, what it confused.

`score_classifier` reads each `LABEL<TAB>TEXT` line exactly as `ClassificationDataset` does (the text's pieces
cut to the block size, padded with PAD) and runs the batches `core.train.trainer.evaluate_loss` runs, so the
accuracy and mean loss here are the trainer's (a test compares them with `python -m core.train evaluate`).
`ClassifierErrors.frame` has one row per example; the confusion matrix, the caption and the slices
(core.lens.errors.slices) are read from it. Two classifiers on one file: `compare_classifiers` (the right/wrong
2x2 and the examples where they disagree). The selected example: `class_attribution` (integrated gradients
of the class's log-probability, core.lens.where_from's) and `predict_text` (an edited example re-predicted).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from core.lens.trace import Progress, model_device
from core.lens.where_from.saliency import IG_STEPS, InputAttribution, integrated_gradients
from core.model.tokenizer import Tokenizer
from core.text import visible_token

COLUMNS = ("text", "gold", "predicted", "right", "p(gold)", "p(predicted)", "loss", "pieces", "line")
OUTCOMES = ("all", "right", "wrong")
BATCH = 128  # evaluate_loss's batch size


class ClassifierError(ValueError):
    """A model that is not a classifier, or texts it cannot read; str() is one sentence."""


@dataclass
class ClassifierErrors:
    """One classifier on one file. `frame`: one row per example (COLUMNS; index = example number, 0-based);
    `probabilities`: (N, n_classes), the softmax of each example, columns in `labels` order."""

    model: str
    source: str
    labels: list[str]
    frame: pd.DataFrame
    probabilities: np.ndarray

    @property
    def count(self) -> int:
        return len(self.frame)

    @property
    def right(self) -> int:
        return int(self.frame["right"].sum())

    @property
    def accuracy(self) -> float:
        return self.right / max(self.count, 1)

    @property
    def loss(self) -> float:
        return float(self.frame["loss"].mean()) if self.count else float("nan")

    def confusion(self) -> pd.DataFrame:
        """Rows: gold label, columns: predicted label, every label of the checkpoint (zeros too); sums to N."""
        table = pd.crosstab(self.frame["gold"], self.frame["predicted"])
        return table.reindex(index=self.labels, columns=self.labels, fill_value=0)

    def mistakes(self) -> pd.DataFrame:
        """(gold, predicted, count) of every off-diagonal cell that is not empty, most frequent first."""
        wrong = self.frame[~self.frame["right"]]
        counted = wrong.groupby(["gold", "predicted"]).size().reset_index(name="count")
        return counted.sort_values(["count", "gold", "predicted"], ascending=[False, True, True],
                                   kind="stable").reset_index(drop=True)

    def caption(self) -> str:
        """'M gets N of T right (P%); its most common mistake is Y for X (k times).'"""
        line = f"{self.model} gets {self.right} of {self.count} right ({self.accuracy:.1%})"
        top = self.mistakes()
        if top.empty:
            return line + "; it makes no mistake on this file."
        first = top.iloc[0]
        ties = int((top["count"] == first["count"]).sum()) - 1
        tie = f", tied with {ties} other pair{'s' if ties > 1 else ''}" if ties else ""
        k = int(first["count"])
        return (line + f"; its most common mistake is {first['predicted']} for {first['gold']} "
                f"({k} time{'s' if k != 1 else ''}{tie}).")

    def summary(self) -> str:
        """The line `python -m core.train evaluate` prints for the same file."""
        return f"{self.source}: accuracy {self.accuracy:.4f}, loss {self.loss:.4f} ({self.count} lines)"


def _check(model) -> None:
    if getattr(model, "config", None) is None or model.config.head != "classifier":
        raise ClassifierError("This model is not a classifier (it has no class head).")


def padded_ids(tokenizer: Tokenizer, texts: Sequence[str], block_size: int) -> tuple[torch.Tensor, list[int]]:
    """(B, block_size) ids as ClassificationDataset makes them (cut, then PAD=0 after), and each text's length in
    pieces before the cut."""
    batch = getattr(tokenizer, "encode_batch", None)  # byte-level BPE: one call for the batch (the same ids)
    encoded = batch(list(texts)) if batch is not None else [tokenizer.encode(t) for t in texts]
    rows = [ids[:block_size] + [0] * (block_size - len(ids[:block_size])) for ids in encoded]
    return torch.tensor(rows, dtype=torch.long), [len(ids) for ids in encoded]


def is_hf(model) -> bool:
    """A Hugging Face ...ForSequenceClassification folder (core.io.hf), not this lab's classifier."""
    return getattr(model, "inner", None) is not None


def hf_batches(model, tokenizer: Tokenizer, texts: Sequence[str]):
    """A Hugging Face classifier's batches as the Trainer's evaluation reads them: each text's pieces with the
    tokenizer's special tokens, cut to the model's positions, padded with its PAD to the batch's longest and
    masked; without a PAD token (a decoder classifier whose config names none) one text per batch. Yields
    (ids (B, T), attention mask (B, T), each text's pieces before the cut, rows done)."""
    pad = model.config.pad_id
    single = pad < 0 or getattr(model.inner.config, "pad_token_id", None) is None
    batch = 1 if single else BATCH // 4
    limit = model.max_length
    for start in range(0, len(texts), batch):
        encoded = [tokenizer.encode(t) for t in texts[start: start + batch]]
        cut = [ids[:limit] for ids in encoded]
        width = max(1, max(len(ids) for ids in cut))
        idx = torch.tensor([ids + [max(pad, 0)] * (width - len(ids)) for ids in cut], dtype=torch.long)
        mask = torch.tensor([[1] * len(ids) + [0] * (width - len(ids)) for ids in cut], dtype=torch.long)
        yield idx, mask, [len(ids) for ids in encoded], start + len(cut)


@torch.no_grad()
def class_logits(model, tokenizer: Tokenizer, texts: Sequence[str], progress: Progress | None = None
                 ) -> tuple[torch.Tensor, list[int]]:
    """(N, n_classes) float logits of each text, read as the trainer reads them, and each text's pieces."""
    _check(model)
    model.eval()
    device = model_device(model)
    out, lengths = [], []
    if is_hf(model):
        for idx, mask, pieces, done in hf_batches(model, tokenizer, texts):
            logits = model.inner(input_ids=idx.to(device), attention_mask=mask.to(device)).logits  # (B, n_classes)
            out.append(logits.float().cpu())
            lengths += pieces
            if progress is not None:
                progress(done, len(texts))
        return (torch.cat(out) if out else torch.zeros(0, model.config.n_classes)), lengths
    for start in range(0, len(texts), BATCH):
        idx, pieces = padded_ids(tokenizer, texts[start: start + BATCH], model.config.block_size)
        logits, _ = model(idx.to(device))  # (B, n_classes)
        out.append(logits.float().cpu())
        lengths += pieces
        if progress is not None:
            progress(min(start + BATCH, len(texts)), len(texts))
    return (torch.cat(out) if out else torch.zeros(0, model.config.n_classes)), lengths


def score_classifier(model, tokenizer: Tokenizer, labels: Sequence[str], pairs: Sequence[tuple[str, str]],
                     name: str = "the model", source: str = "the file", progress: Progress | None = None
                     ) -> ClassifierErrors:
    """Every (label, text) pair scored: prediction, probabilities, loss (-log p(gold)), right or wrong."""
    labels = list(labels)
    index = {label: i for i, label in enumerate(labels)}
    texts = [text for _, text in pairs]
    gold = torch.tensor([index[label] for label, _ in pairs], dtype=torch.long)
    logits, pieces = class_logits(model, tokenizer, texts, progress)
    losses = F.cross_entropy(logits, gold, reduction="none") if len(pairs) else torch.zeros(0)
    probs = torch.softmax(logits.double(), -1).numpy()
    predicted = logits.argmax(-1)
    rows = np.arange(len(pairs))
    frame = pd.DataFrame({
        "text": texts, "gold": [labels[i] for i in gold.tolist()], "predicted": [labels[i] for i in predicted.tolist()],
        "right": (predicted == gold).numpy(), "p(gold)": probs[rows, gold.numpy()],
        "p(predicted)": probs[rows, predicted.numpy()], "loss": losses.double().numpy(), "pieces": pieces,
        "line": rows + 1}, columns=list(COLUMNS))
    return ClassifierErrors(model=name, source=source, labels=labels, frame=frame, probabilities=probs)


def filter_examples(frame: pd.DataFrame, gold: Sequence[str] = (), predicted: Sequence[str] = (),
                    outcome: str = "all", search: str = "") -> pd.DataFrame:
    """Rows whose gold label is one of `gold` (empty: any), predicted one of `predicted`, right/wrong, and whose
    text contains `search` (plain text, any case)."""
    keep = pd.Series(True, index=frame.index)
    if gold:
        keep &= frame["gold"].isin(list(gold))
    if predicted:
        keep &= frame["predicted"].isin(list(predicted))
    if outcome == "right":
        keep &= frame["right"]
    elif outcome == "wrong":
        keep &= ~frame["right"]
    if search.strip():
        keep &= frame["text"].str.contains(search.strip(), case=False, regex=False)
    return frame[keep]


def predict_text(model, tokenizer: Tokenizer, labels: Sequence[str], text: str) -> pd.Series:
    """The probability of each label for one (edited) text, read as the table's examples are."""
    logits, _ = class_logits(model, tokenizer, [text])
    return pd.Series(torch.softmax(logits[0].double(), -1).numpy(), index=list(labels), name="probability")


def class_attribution(model, tokenizer: Tokenizer, labels: Sequence[str], text: str, label: str,
                      steps: int = IG_STEPS) -> InputAttribution:
    """Gradient x input and integrated gradients of log p(label | text) per input piece (the pieces read, cut to
    the block size; no PAD: PAD positions never reach a real one's pooled state)."""
    _check(model)
    tokenized = tokenizer.tokenize(text)
    limit = model.max_length if is_hf(model) else model.config.block_size
    ids, raw = tokenized.ids[:limit], tokenized.tokens[:limit]
    if not ids:
        raise ClassifierError("The text has no pieces to attribute.")
    target = list(labels).index(label)

    def class_log_prob(model, idx, hooks):
        h, _ = model.hidden_states(idx, hooks=hooks)  # (B, T, C)
        logits, _ = model.head(h, idx, None)  # (B, n_classes)
        return torch.log_softmax(logits.double(), -1)[:, target]

    def hf_class_log_prob(model, idx, hooks):  # the scaled token embeddings go in as inputs_embeds
        if getattr(model.inner.config, "pad_token_id", None) is None:  # a decoder classifier reads one row a pass
            logits = torch.cat([model.inner(inputs_embeds=row[None]).logits for row in hooks.embedded])
        else:
            logits = model.inner(inputs_embeds=hooks.embedded, attention_mask=torch.ones_like(idx)).logits
        return torch.log_softmax(logits.double(), -1)[:, target]

    if is_hf(model):  # through the input embeddings: positions (and BERT's segment embedding) are added after them
        embed = model.inner.get_input_embeddings()
        gxi, ig, log_prob, baseline = integrated_gradients(model, ids, hf_class_log_prob, steps, embed=embed)
    else:
        gxi, ig, log_prob, baseline = integrated_gradients(model, ids, class_log_prob, steps)
    return InputAttribution(tokens=[visible_token(t) for t in raw], gradient_x_input=gxi, integrated_gradients=ig,
                            log_prob=log_prob, baseline_log_prob=baseline, steps=steps, answer_piece=label)


# --- two classifiers on one file -----------------------------------------------------------------------------

OUTCOME_NAMES = ("right", "wrong")


@dataclass
class ClassifierComparison:
    """Two models on one file, example by example (classifiers, or birthplace models: any result with a frame of
    text, gold, predicted, right and the prediction's probability, and a model name)."""

    first: ClassifierErrors
    second: ClassifierErrors

    def table(self) -> pd.DataFrame:
        """The right/wrong 2x2: rows the first model, columns the second; sums to N."""
        a = np.where(self.first.frame["right"], "right", "wrong")
        b = np.where(self.second.frame["right"], "right", "wrong")
        counts = pd.crosstab(pd.Series(a, name=self.first.model), pd.Series(b, name=self.second.model))
        return counts.reindex(index=list(OUTCOME_NAMES), columns=list(OUTCOME_NAMES), fill_value=0)

    def disagreements(self) -> pd.DataFrame:
        """The examples the two models predict differently, with both predictions and their probabilities."""
        a, b = self.first.frame, self.second.frame
        differ = a["predicted"] != b["predicted"]
        sure = "p(predicted)" if "p(predicted)" in a else "confidence"  # a birthplace model's answer probability
        return pd.DataFrame({"text": a["text"], "gold": a["gold"],
                             self.first.model: a["predicted"], f"p ({self.first.model})": a[sure],
                             self.second.model: b["predicted"], f"p ({self.second.model})": b[sure],
                             "who is right": np.select([a["right"], b["right"]], [self.first.model, self.second.model],
                                                "neither")})[differ]

    def caption(self) -> str:
        table = self.table()
        only_a, only_b = int(table.at["right", "wrong"]), int(table.at["wrong", "right"])
        both = int(table.at["right", "right"])
        n = int(table.values.sum())
        return (f"Of {n} examples, both are right on {both}; only {self.first.model} on {only_a}, only "
                f"{self.second.model} on {only_b}; they predict differently on {len(self.disagreements())}.")


def compare_classifiers(first: ClassifierErrors, second: ClassifierErrors) -> ClassifierComparison:
    if list(first.frame["text"]) != list(second.frame["text"]) or list(first.frame["gold"]) != list(
            second.frame["gold"]):
        raise ClassifierError("The two results are not on the same file.")
    return ClassifierComparison(first, second)
