"""One question put to a model: its greedy answer (the assignment's decoding), how sure it is, how it
ranks every known place, and where it looks when it starts to answer (one `Trace` of the prompt)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from core.lens.birthplace import ANSWER_CHARS, context_length, predict_birthplaces
from core.lens.probe.candidates import CandidateRanking, answer_probabilities, check_generator, rank_candidates
from core.lens.trace import Trace, trace_text
from core.model.tokenizer import MASK_CHAR, Tokenizer
from core.model.transformer import Transformer


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
