"""One question put to a model: its greedy answer (the assignment's decoding), how sure it is, how it
ranks every known place, and where it looks when it starts to answer (one `Trace` of the prompt).

Candidates: log P(place + ⁇ | question + ⁇) for every known place, teacher forced and batched; the greedy
answer's probability is its confidence.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch

from core.lens.probe.evaluation import ANSWER_CHARS, context_length, predict_birthplaces
from core.lens.trace import Trace, model_device, trace_text
from core.model.attention import KVCache
from core.model.tokenizer import MASK_CHAR, Tokenizer
from core.model.transformer import Transformer

# Three numbers describe one answer; each view names the one it shows (issue 41: 36.90% in the table and 45.1% in
# the chart read as two numbers for one thing).
# the table's confidence, P(answer + ⁇ | question + ⁇); short, so the answers table keeps its names whole at 1024 px
WHOLE_ANSWER = "P(whole answer)"
AMONG_CANDIDATES = "share among the candidates"  # that probability normalised over the candidate list: the chart
FIRST_PIECE = "probability of the first piece"  # the answer's first token only: the logit lens


def check_generator(model: Transformer) -> None:
    if not model.config.causal or model.config.head != "lm":
        raise ValueError("Only causal language models (birthplace checkpoints) answer questions.")


@torch.no_grad()
def continuation_log_probs(model: Transformer, tokenizer: Tokenizer, prompts: Sequence[str],
                           continuations: Sequence[str], batch_size: int = 256) -> np.ndarray:
    """log P(continuation | prompt), summed over the continuation's characters, teacher forced.

    NaN where prompt + continuation is longer than one pass of the model covers (or the prompt is
    empty); 0 for an empty continuation. One shared prompt (every candidate of one question) is read
    once and its keys and values reused for every continuation; mixed prompts are right-padded to equal
    length (causal: padding after a position never changes it) and scored in a few batched passes.
    """
    check_generator(model)
    model.eval()
    pieces = {text: tokenizer.encode(text) for text in {*prompts, *continuations}}  # each distinct text once
    rows = [(pieces[p], pieces[c]) for p, c in zip(prompts, continuations, strict=True)]
    out = np.full(len(rows), np.nan)
    out[[i for i, (p, c) in enumerate(rows) if p and not c]] = 0.0  # an empty continuation is certain
    limit = context_length(model)
    fitting = [i for i, (p, c) in enumerate(rows) if p and c and len(p) + len(c) - 1 <= limit]
    if len(set(prompts[i] for i in fitting)) == 1:
        out[fitting] = _after_one_prompt(model, rows[fitting[0]][0], [rows[i][1] for i in fitting], batch_size)
        return out
    fitting.sort(key=lambda i: len(rows[i][0]) + len(rows[i][1]))  # similar lengths share a batch
    for start in range(0, len(fitting), batch_size):
        chunk = fitting[start: start + batch_size]
        out[chunk] = _padded(model, [rows[i] for i in chunk], tokenizer.pad_id)
    return out


def _padded(model: Transformer, rows: list[tuple[list[int], list[int]]], pad_id: int) -> np.ndarray:
    """Each row's prompt + continuation in one right-padded batch; the continuation's log-probs summed."""
    device = model_device(model)
    width = max(len(p) + len(c) - 1 for p, c in rows)
    idx = torch.full((len(rows), width), pad_id, dtype=torch.long)
    targets = torch.zeros((len(rows), width), dtype=torch.long)
    scored = torch.zeros((len(rows), width), dtype=torch.bool)
    for r, (p, c) in enumerate(rows):
        sequence = (p + c)[:-1]
        idx[r, :len(sequence)] = torch.tensor(sequence)
        # the logits at position t predict token t + 1: the continuation starts at len(p)
        targets[r, len(p) - 1: len(p) - 1 + len(c)] = torch.tensor(c, dtype=torch.long)
        scored[r, len(p) - 1: len(p) - 1 + len(c)] = True
    logits, _ = model(idx.to(device))
    return _summed(logits, targets.to(device), scored.to(device))


def _after_one_prompt(model: Transformer, prompt: list[int], continuations: list[list[int]],
                      batch_size: int) -> np.ndarray:
    """Every continuation after one prompt: the prompt is read once (keys and values cached); each batch
    reads only the continuations' characters, from the prompt's end. Equal to `_padded` row by row."""
    device = model_device(model)
    caches = [KVCache() for _ in model.blocks]
    h, _ = model.hidden_states(torch.tensor([prompt], device=device), caches=caches)
    first = torch.log_softmax(model.head.unembed(h[0, -1]).float(), dim=-1)  # predicts each first character
    out = np.array([float(first[c[0]]) for c in continuations])
    rest = sorted((i for i, c in enumerate(continuations) if len(c) > 1), key=lambda i: len(continuations[i]))
    size = min(batch_size, 64)  # similar lengths share a batch: little padding to compute
    for start in range(0, len(rest), size):
        chunk = rest[start: start + size]
        width = max(len(continuations[i]) - 1 for i in chunk)
        idx = torch.zeros((len(chunk), width), dtype=torch.long)  # after each row's end: never read
        targets = torch.zeros((len(chunk), width), dtype=torch.long)
        scored = torch.zeros((len(chunk), width), dtype=torch.bool)
        for r, i in enumerate(chunk):
            c = continuations[i]
            idx[r, :len(c) - 1] = torch.tensor(c[:-1])
            targets[r, :len(c) - 1] = torch.tensor(c[1:])
            scored[r, :len(c) - 1] = True
        shared = [c.expand(len(chunk)) for c in caches]
        h, _ = model.hidden_states(idx.to(device), start=len(prompt), caches=shared)
        out[chunk] += _summed(model.head.unembed(h), targets.to(device), scored.to(device))
    return out


def _summed(logits: torch.Tensor, targets: torch.Tensor, scored: torch.Tensor) -> np.ndarray:
    log_probs = torch.log_softmax(logits.float(), dim=-1)  # (B, T, V)
    picked = log_probs.gather(-1, targets.unsqueeze(-1)).squeeze(-1)  # (B, T)
    return (picked * scored).sum(dim=1).cpu().numpy()


@dataclass
class CandidateRanking:
    """Every known place scored as the answer to one question, best first."""

    question: str
    places: list[str]
    log_probs: np.ndarray  # log P(place + ⁇ | question + ⁇)
    skipped: list[str] = field(default_factory=list)  # too long for the model's context

    @property
    def probabilities(self) -> np.ndarray:
        """Normalised over the candidates: sums to 1 (a softmax of the log-probabilities)."""
        if not len(self.log_probs):
            return np.zeros(0)
        shifted = np.exp(self.log_probs - self.log_probs.max())
        return shifted / shifted.sum()

    @property
    def mass(self) -> float:
        """Total probability the model puts on the whole candidate list (the rest: other strings)."""
        if not len(self.log_probs):
            return 0.0
        top = float(self.log_probs.max())
        return float(math.exp(top) * np.exp(self.log_probs - top).sum())

    def rank_of(self, place: str) -> int | None:
        return self.places.index(place) + 1 if place in self.places else None

    def top(self, k: int = 10) -> pd.DataFrame:
        probs = self.probabilities
        return pd.DataFrame({"rank": range(1, min(k, len(self.places)) + 1), "place": self.places[:k],
                             "probability": probs[:k], "log_prob": self.log_probs[:k]})


def rank_candidates(model: Transformer, tokenizer: Tokenizer, question: str, places: Sequence[str],
                    batch_size: int = 256) -> CandidateRanking:
    """All candidates of one question in one or a few forward passes (`place⁇` after `question⁇`)."""
    places = list(dict.fromkeys(places))
    prompt = question + MASK_CHAR
    scores = continuation_log_probs(model, tokenizer, [prompt] * len(places), [p + MASK_CHAR for p in places],
                                    batch_size)
    keep = np.isfinite(scores)
    order = sorted(np.flatnonzero(keep), key=lambda i: (-scores[i], places[i]))
    return CandidateRanking(question=question, places=[places[i] for i in order],
                            log_probs=np.array([scores[i] for i in order], dtype=float),
                            skipped=[places[i] for i in np.flatnonzero(~keep)])


def answer_probabilities(model: Transformer, tokenizer: Tokenizer, questions: Sequence[str],
                         answers: Sequence[str]) -> np.ndarray:
    """The greedy answer's probability: the product of its characters' probabilities and of the closing
    ⁇ (when the answer closed within the 32 generated characters). NaN where it cannot be rescored."""
    continuations = [a + MASK_CHAR if len(a) < ANSWER_CHARS else a for a in answers]
    prompts = [q + MASK_CHAR for q in questions]
    log_probs = continuation_log_probs(model, tokenizer, prompts, continuations)
    unsure = np.array([MASK_CHAR in q for q in questions], dtype=bool)  # the answer split differently
    log_probs[unsure] = np.nan
    return np.exp(log_probs)


@dataclass
class ProbeAnswer:
    """One model's answer to one question, with its candidates and confidence."""

    question: str
    answer: str
    confidence: float
    ranking: CandidateRanking

    @property
    def answer_is_candidate(self) -> bool:
        """The answer is one of the places (scored, or too long to score with this question)."""
        return self.answer in self.ranking.places or self.answer in self.ranking.skipped


def ask(model: Transformer, tokenizer: Tokenizer, question: str, places: Sequence[str]) -> ProbeAnswer:
    answer = predict_birthplaces(model, tokenizer, [question])[0]
    ranking = rank_candidates(model, tokenizer, question, places)
    if answer in ranking.places and len(answer) < ANSWER_CHARS and MASK_CHAR not in question:
        # the ranking scored this very string (answer + ⁇ after question + ⁇): its confidence, no new pass
        confidence = math.exp(float(ranking.log_probs[ranking.places.index(answer)]))
    else:
        confidence = float(answer_probabilities(model, tokenizer, [question], [answer])[0])
    return ProbeAnswer(question=question, answer=answer, confidence=confidence, ranking=ranking)


def answers_frame(answers: Mapping[str, ProbeAnswer], truth: str | None = None,
                  verdicts: Mapping[str, str] | None = None) -> pd.DataFrame:
    """One row per model: its greedy answer, its verdict (where it can come from: corpus.verdict), confidence,
    and where the truth ranks among the candidates (the truth's columns only when it is known: never a column
    of blanks)."""
    rows = []
    for model, a in answers.items():
        row = {"model": model, "greedy answer": a.answer}
        if verdicts is not None:
            row["verdict"] = verdicts[model]
        row["confidence"] = a.confidence
        if truth:
            row["correct"] = a.answer == truth
        row["answer is a training label"] = a.answer_is_candidate
        if truth:
            rank = a.ranking.rank_of(truth)  # None: too long to score, or not a training label
            row["rank of the truth"] = f"{rank} of {len(a.ranking.places)}" if rank else "not a candidate"
        row["probability on the candidate list"] = a.ranking.mass
        rows.append(row)
    return pd.DataFrame(rows)


@dataclass
class AnswerAttention:
    """Where the model looks when it writes the answer's first character: the last row of the attention
    over question + ⁇ (the ⁇ position predicts the first answer character). A view over one Trace."""

    record: Trace

    @property
    def tokens(self) -> list[str]:
        return self.record.tokens  # the prompt as read (cut from the front to the model's context)

    @property
    def weights(self) -> np.ndarray:
        return self.record.attention[:, :, -1, :]  # (n_layer, n_head, T)

    @property
    def cut(self) -> int:
        return self.record.cut  # tokens dropped from the front

    @property
    def layer_means(self) -> np.ndarray:
        return self.weights.mean(axis=1)  # (n_layer, T)


def answer_attention(model: Transformer, tokenizer: Tokenizer, question: str) -> AnswerAttention:
    check_generator(model)
    # generation reads the last tokens of the prompt, so does this (the one cutting rule, keep="end")
    return AnswerAttention(trace_text(model, tokenizer, question + MASK_CHAR, context_length(model), "end"))
