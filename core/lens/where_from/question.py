"""A question as the model reads it: its pieces, where the subject (the name) is among them, which piece counts
as the answer, and the one Trace with activations every analysis of it reads. Also the few facts about a model
the analyses share (its output head's bias and soft cap, its final norm and head, whether it can be patched).

For a fabricated name there is no true answer: every view then traces the model's own first piece, and
`Question.note` says what that means.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from core.lens.attention import piece_label
from core.lens.probe.questions import name_from_question
from core.lens.trace import Trace, TraceError, cut_to_limit, model_device, trace
from core.model.tokenizer import MASK_CHAR
from core.model.transformer import Transformer
from core.text import quoted_token, visible_token


class WhereFromError(ValueError):
    """Input these views cannot trace; str() is one sentence for the user."""


# --------------------------------------------------------------------------- the question read


@dataclass
class Question:
    """A prompt as the model reads it, where the name is in it, and which piece counts as the answer."""

    question: str
    ids: list[int]  # question + MASK, cut from the front to the model's context
    tokens: list[str]  # display labels
    raw: list[str]  # the text each piece covers
    name: str
    name_positions: list[int]  # positions of the name's pieces (empty: no name found)
    answer_id: int  # the first piece of the answer
    answer_piece: str  # its display label
    truth: str | None  # the true birthplace, None when unknown (a fabricated name)
    own_answer: bool  # True: the answer traced is the model's own first piece, not a known truth
    cut: int = 0  # pieces dropped from the front
    prompt: str = ""  # the text the pieces spell ('' : the question + MASK, as read_question reads it)
    marked: bool = False  # a free prompt whose subject the user marked (read_prompt), not a birthplace question

    @property
    def text(self) -> str:
        """The text the pieces spell, the subject included (what a swap replaces the subject in)."""
        return self.prompt or self.question + MASK_CHAR

    @property
    def note(self) -> str:
        piece = self.answer_piece
        if self.marked:
            subject = f"; the subject corrupted is {self.name!r}"
            if self.own_answer:
                return f"The target traced is the model's own next piece {quoted_token(piece)}{subject}."
            return f"The target traced is {quoted_token(piece)}, the first piece of {self.truth!r}{subject}."
        if self.own_answer:
            return (f"No birthplace is known for {self.name or 'this text'}, so every view traces the model's own "
                    f"first piece {quoted_token(piece)}: what pushes the model to its guess (pieces of the name "
                    "that sound like a country, the question's wording), not where a stored fact is kept. A trace of a "
                    "guess looks like a trace of a fact; only the true answer tells them apart.")
        return f"The answer traced is the first piece {quoted_token(piece)} of the true birthplace {self.truth!r}."


def prompt_pieces(tokenizer, prompt: str) -> tuple[list[int], list[str]]:
    read = tokenizer.tokenize(prompt)
    return read.ids, read.tokens


def name_span(question: str, name: str) -> tuple[int, int] | None:
    start = question.find(name) if name else -1
    return (start, start + len(name)) if start >= 0 else None


def pieces_covering(raw_tokens: Sequence[str], span: tuple[int, int]) -> list[int]:
    """Positions of the pieces whose characters overlap `span` (raw tokens must spell the text in order)."""
    out, at = [], 0
    for i, piece in enumerate(raw_tokens):
        end = at + len(piece)
        if at < span[1] and end > span[0] and piece.strip():
            out.append(i)
        at = end
    return out


def name_pieces(tokenizer, prompt: str, ids: Sequence[int], raw: Sequence[str], span: tuple[int, int]) -> list[int]:
    """Positions of the pieces that spell the name at `span` (whitespace pieces left out): the pieces of the text
    before the name and up to its end, when the tokenizer splits the prompt there (it does at a space); else
    the pieces whose characters overlap the span (when the pieces spell the text); else none."""
    upto = tokenizer.encode(prompt[:span[1]])
    # the text before the name as it is, then without its last spaces: a subword tokenizer (GPT-2's, LLaMA's) reads
    # the space before a word as part of the word's piece, so 'the ' alone ends in a piece 'the cat' does not have
    for head in dict.fromkeys((prompt[:span[0]], prompt[:span[0]].rstrip())):
        before = tokenizer.encode(head)
        if list(ids[:len(before)]) == before and list(ids[:len(upto)]) == upto and len(upto) > len(before):
            return [p for p in range(len(before), len(upto)) if raw[p].strip()]
    if "".join(raw) == prompt:
        return pieces_covering(raw, span)
    return []


def context_of(model) -> int:
    return model.max_length or model.config.block_size


def answer_piece_id(tokenizer, prompt_ids: list[int], prompt: str, answer: str) -> int:
    """The first piece the model would write for `answer` after the prompt (tokenised in context)."""
    whole = tokenizer.encode(prompt + answer)
    if whole[:len(prompt_ids)] == prompt_ids and len(whole) > len(prompt_ids):
        return whole[len(prompt_ids)]
    alone = tokenizer.encode(answer)
    if not alone:
        raise WhereFromError(f"The answer {answer!r} has no pieces this model can read.")
    return alone[0]


def _read(model, tokenizer, text: str, what: str):
    """The pieces of a question or prompt as the model reads them (its last context_of(model) pieces: `window`),
    or one sentence when it reads none, or reads other pieces than those typed."""
    tokenized = tokenizer.tokenize(text)
    if not tokenized.ids:
        raise WhereFromError(f"The {what} has no pieces this model can read.")
    if tokenized.unknown:
        shown = ", ".join(repr(p) for p in tokenized.unknown[:5])
        raise WhereFromError(f"This model's vocabulary lacks {shown}, so what it reads is not the {what} typed.")
    return tokenized, cut_to_limit(len(tokenized.ids), context_of(model), "end")


def _own_next(model, ids: list[int]) -> int:
    """The model's own next piece after `ids` (its top logit)."""
    with torch.inference_mode():
        logits, _ = model(torch.tensor([ids], dtype=torch.long, device=model_device(model)))
    return int(logits[0, -1].argmax())


def read_question(model, tokenizer, question: str, truth: str | None = None) -> Question:
    """question ('Where was NAME born?', or any text) + MASK, the name's pieces in it, the answer's first piece:
    the truth's when given, else the model's own top piece after the prompt."""
    question = " ".join((question or "").split()).rstrip(MASK_CHAR)
    if not question:
        raise WhereFromError("Type a question such as 'Where was Ada Lovelace born?'.")
    prompt = question + MASK_CHAR if getattr(tokenizer, "mask_id", None) is not None else question
    tokenized, window = _read(model, tokenizer, prompt, "question")
    ids, raw = tokenized.ids[window], tokenized.tokens[window]
    name = name_from_question(question)
    span = name_span(prompt, name)
    positions = []
    if span is not None:
        found = name_pieces(tokenizer, prompt, tokenized.ids, tokenized.tokens, span)
        positions = [p - window.start for p in found if p >= window.start]
    truth = truth.strip() if truth else None
    answer_id = answer_piece_id(tokenizer, tokenized.ids, prompt, truth) if truth else _own_next(model, ids)
    return Question(question=question, ids=ids, tokens=[visible_token(t) for t in raw], raw=list(raw), name=name,
                    name_positions=positions, answer_id=answer_id, answer_piece=piece_label(tokenizer, answer_id),
                    truth=truth or None, own_answer=not truth, cut=window.start, prompt=prompt)


def target_text(prompt: str, target: str) -> str:
    """The target as written after the prompt: a word typed after a prompt ending in a word ('... city of' +
    'Seattle') is the next word, so it gets the space between them (' Seattle', as ROME's targets are written)."""
    if target[:1].isalnum() and prompt[-1:].isalnum():
        return " " + target
    return target


def read_prompt(model, tokenizer, prompt: str, subject: str | tuple[int, int], target: str | None = None
                ) -> Question:
    """Any prompt, with its subject marked, as a Question causal tracing reads: `subject` is the subject's text
    (its first occurrence in the prompt) or a span of piece positions (first, end) of the prompt as read; the
    target is the first piece of `target` after the prompt, or the model's own next piece. The prompt is read as
    typed (no MASK added: a birthplace model's page adds it before, as it reads the sentence)."""
    prompt = (prompt or "").strip()
    if not prompt:
        raise WhereFromError("Type a prompt, such as 'The Space Needle is located in the city of'.")
    tokenized, window = _read(model, tokenizer, prompt, "prompt")
    ids, raw = tokenized.ids[window], tokenized.tokens[window]
    if isinstance(subject, str):
        name = " ".join(subject.split())
        span = name_span(prompt, name)
        if span is None:
            raise WhereFromError(f"The subject {name[:80]!r} is not in the prompt, so there is nothing to corrupt; "
                                 "mark a part of the prompt.")
        found = name_pieces(tokenizer, prompt, tokenized.ids, tokenized.tokens, span)
        if not found:
            raise WhereFromError(f"The subject {name[:80]!r} does not fall on whole pieces of the prompt as this "
                                 "model reads it; mark it by its pieces.")
    else:
        first, end = int(subject[0]), int(subject[1])
        if not 0 <= first < end <= len(tokenized.ids):
            raise WhereFromError(f"The subject's pieces {first} to {end - 1} are not in the prompt's "
                                 f"{len(tokenized.ids)} pieces.")
        found = list(range(first, end))
        name = "".join(tokenized.tokens[first:end]).strip()
    positions = [p - window.start for p in found if p >= window.start]
    if not positions:
        raise WhereFromError(f"The subject {name[:80]!r} lies before the last {context_of(model)} pieces the model "
                             "reads, so corrupting it cannot change the next piece.")
    target = target.strip() if target and target.strip() else None
    answer_id = (answer_piece_id(tokenizer, tokenized.ids, prompt, target_text(prompt, target)) if target
                 else _own_next(model, ids))
    return Question(question=prompt, ids=ids, tokens=[visible_token(t) for t in raw], raw=list(raw), name=name,
                    name_positions=positions, answer_id=answer_id, answer_piece=piece_label(tokenizer, answer_id),
                    truth=target, own_answer=not target, cut=window.start, prompt=prompt, marked=True)


def record(model, q: Question) -> Trace:
    """One Trace of the question with activations (the one record every view here reads)."""
    try:
        return trace(model, q.ids, q.raw, activations=True)
    except TraceError as exc:
        raise WhereFromError(str(exc)) from None


def unembed_bias(model) -> torch.Tensor | None:
    """The output head's bias (Phi's has one; ours and most have none)."""
    return getattr(model, "unembed_bias", None)


def logit_softcap(model) -> float | None:
    """The cap a model puts on its output logits, logits = cap * tanh(z / cap) (Gemma 2; core.io.hf), or None."""
    return getattr(model, "logit_softcap", None)


def patchable(model) -> bool:
    """Whether causal tracing and input attribution may patch the model through its hook points: our own
    Transformer, or a Hugging Face pre-norm decoder (core.io.hf)."""
    return isinstance(model, Transformer) or bool(getattr(model, "patchable", False))


def readout_of(model):
    try:
        return model.readout()
    except (AttributeError, ValueError) as exc:
        raise WhereFromError(str(exc) if isinstance(exc, ValueError) else
                             "This model has no final LayerNorm and output head to read its stream through.") from None

