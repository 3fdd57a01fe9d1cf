"""Causal tracing of any prompt: a sentence, the subject marked in it, the model's own next piece or a typed
target, traced as ROME traces "The Space Needle is located in the city of" -> " Seattle" with the subject "The
Space Needle". The Attention page's "Where the next piece comes from" and `python -m core.lens.where_from MODEL
--prompts FILE` both call `trace_prompt`, so the command's grids are the page's.

A prompts file has one `PROMPT<TAB>SUBJECT[<TAB>TARGET]` per line."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from core.lens.attention import birthplace_prompt
from core.lens.trace import Progress
from core.lens.where_from.question import Question, WhereFromError, name_pieces, name_span, read_prompt
from core.lens.where_from.tracing import NOISE, SAMPLES, SEED, CausalTrace, causal_trace

MAX_PROMPTS = 1000  # prompts traced by one command (a 135M model takes tens of seconds each)


@dataclass
class PromptLine:
    prompt: str
    subject: str
    target: str | None
    line: int  # 1-based line number in the file
    problem: str = ""  # why this line cannot be traced ('' : it can)


def read_prompts(path: str | Path) -> list[PromptLine]:
    """`PROMPT<TAB>SUBJECT[<TAB>TARGET]` per line; a line without a subject comes back with its problem (the
    command writes it as that prompt's one sentence). Raises WhereFromError for a file that cannot be used."""
    from core.data.datasets import DataError, read_text

    try:
        text = read_text(path)
    except DataError as exc:
        raise WhereFromError(str(exc)) from None
    if "\0" in text:
        raise WhereFromError(f"{path} contains NUL bytes; it is not a text file.")
    out = []
    for number, line in enumerate(text.split("\n"), 1):
        line = line.rstrip("\r")
        if not line.strip():
            continue
        fields = line.split("\t")
        prompt, subject = fields[0].strip(), (fields[1].strip() if len(fields) > 1 else "")
        target = fields[2].strip() if len(fields) > 2 and fields[2].strip() else None
        problem = ("" if subject else
                   f"Line {number} has no subject: write PROMPT<TAB>SUBJECT[<TAB>TARGET].")
        if len(fields) > 3:
            problem = f"Line {number} has {len(fields)} tab-separated fields; write PROMPT<TAB>SUBJECT[<TAB>TARGET]."
        out.append(PromptLine(prompt, subject, target, number, problem))
    if not out:
        raise WhereFromError(f"{path} has no prompts.")
    if len(out) > MAX_PROMPTS:
        raise WhereFromError(f"{path} has {len(out)} prompts; up to {MAX_PROMPTS} are traced at once.")
    return out


def as_read(loaded, prompt: str) -> str:
    """The prompt as the model is asked it: a birthplace model's typed '?' gets its MASK (as the Attention page
    reads a sentence)."""
    return birthplace_prompt(prompt) if getattr(loaded, "task", "") == "birthplace" else prompt


def subject_guess(tokenizer, prompt: str) -> tuple[int, int] | None:
    """The pieces (first, end) of the name the prompt asks about (the probe's reading of a question: the
    name in 'Where was NAME born?'), for the page's first marking of the subject; None when it names none."""
    from core.lens.probe.questions import name_from_question

    name = name_from_question(prompt)
    span = name_span(prompt, name)
    if not name or span is None or len(name) >= len(prompt.strip(" ?\u2047")):  # not a question about someone
        return None
    read = tokenizer.tokenize(prompt)
    found = name_pieces(tokenizer, prompt, read.ids, read.tokens, span)
    return (found[0], found[-1] + 1) if found else None


def check_traceable(loaded, name: str) -> None:
    config = loaded.model.config
    if config.head != "lm" or not config.causal:
        raise WhereFromError(f"{name} is not a causal language model, so it has no next piece to trace.")


def trace_prompt(loaded, prompt: str, subject: str | tuple[int, int], target: str | None = None,
                 corruption: str = "noise", metric: str | None = None, noise: float = NOISE, samples: int = SAMPLES,
                 seed: int = SEED, swap_subjects: Sequence[str] = (), progress: Progress | None = None
                 ) -> tuple[Question, CausalTrace]:
    """The prompt read with its subject and target (core.lens.where_from.question.read_prompt) and its three
    restoration grids (core.lens.where_from.tracing.causal_trace; a swap draws from `swap_subjects`)."""
    q = read_prompt(loaded.model, loaded.tokenizer, as_read(loaded, prompt), subject, target)
    ct = causal_trace(loaded.model, loaded.tokenizer, q, corruption=corruption, metric=metric, noise=noise,
                      samples=samples, seed=seed, swap_names=swap_subjects, progress=progress)
    return q, ct


def prompt_record(q: Question, ct: CausalTrace) -> dict:
    """One JSON object: the prompt as read, its subject's pieces, the target traced, the grids and the sentence."""
    return {"prompt": q.question, "subject": q.name, "target": q.truth, "target piece": q.answer_piece,
            "own next piece": q.own_answer, "tokens": q.tokens, "subject positions": q.name_positions,
            "note": q.note, "causal trace": ct.to_json()}
