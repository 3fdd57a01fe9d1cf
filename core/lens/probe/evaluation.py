"""Birthplace accuracy the assignment's way (but batched and cached), the most-frequent-place baseline,
and memorisation (does the pretrained model complete a person's own document with the place?).

Assignment-exact: prompt = question + ⁇, greedy decoding of 32 characters, the answer is the text
between the first and second ⁇ of the completion, exact string match. Prompts are batched by
length, so every row of a batch is exactly what a one-question-at-a-time loop would compute.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from core.data.world_tables import COUNTRIES
from core.lens.trace import Progress, model_device
from core.model.tokenizer import MASK_CHAR, Tokenizer
from core.model.transformer import Transformer

ANSWER_CHARS = 32


def context_length(model: Transformer) -> int:
    """The longest sequence one forward pass reads; generation crops to its last this many tokens."""
    return model.max_length or model.config.block_size


def answer_from_completion(completion: str) -> str:
    """CS224N: `completion.split(MASK)[1]`; the prompt itself ends with the first ⁇."""
    parts = completion.split(MASK_CHAR)
    return parts[1] if len(parts) > 1 else ""


@torch.no_grad()
def predict_birthplaces(model: Transformer, tokenizer: Tokenizer, questions: Sequence[str],
                        batch_size: int = 256, use_cache: bool = True,
                        progress: Progress | None = None) -> list[str]:
    """Greedy answers for each question, in order."""
    model.eval()
    device = model_device(model)
    prompts = [tokenizer.encode(q + MASK_CHAR) for q in questions]
    by_length: dict[int, list[int]] = {}
    for i, ids in enumerate(prompts):
        by_length.setdefault(len(ids), []).append(i)
    answers = [""] * len(questions)
    done = 0
    for _, members in sorted(by_length.items()):
        for start in range(0, len(members), batch_size):
            chunk = members[start: start + batch_size]
            idx = torch.tensor([prompts[i] for i in chunk], dtype=torch.long, device=device)
            # The answer ends at the second ⁇, so rows may stop there: identical answers, less work.
            out = model.generate(idx, ANSWER_CHARS, use_cache=use_cache, stop_id=tokenizer.mask_id)
            for row, i in enumerate(chunk):
                answers[i] = answer_from_completion(tokenizer.decode(out[row].tolist()))
            done += len(chunk)
            if progress:
                progress(done, len(questions))
    return answers


@torch.no_grad()
def predict_birthplaces_one_by_one(model: Transformer, tokenizer: Tokenizer,
                                   questions: Sequence[str]) -> list[str]:
    """The assignment's own loop: one question at a time, no cache. The benchmark's baseline."""
    model.eval()
    answers, device, context = [], model_device(model), context_length(model)
    for question in questions:
        idx = torch.tensor([tokenizer.encode(question + MASK_CHAR)], dtype=torch.long, device=device)
        for _ in range(ANSWER_CHARS):
            logits, _ = model(idx[:, -context:])
            idx = torch.cat((idx, logits[:, -1].argmax(-1, keepdim=True)), dim=1)
        answers.append(answer_from_completion(tokenizer.decode(idx[0].tolist())))
    return answers


@dataclass
class BirthplaceResult:
    """One evaluation on (question, place) pairs: the answers, the truths, and the one place the
    baseline answers for every question. Every count is derived here, so accuracy has one definition."""

    predictions: list[str]
    targets: list[str]
    baseline_place: str

    def __post_init__(self) -> None:
        if len(self.predictions) != len(self.targets):
            raise ValueError(f"{len(self.predictions)} predictions for {len(self.targets)} questions.")

    @property
    def hits(self) -> list[bool]:
        """Per question: the prediction is the target, exactly (the assignment's string match)."""
        return [p == t for p, t in zip(self.predictions, self.targets)]

    @property
    def correct(self) -> int:
        return sum(self.hits)

    @property
    def baseline_correct(self) -> int:
        return sum(t == self.baseline_place for t in self.targets)

    @property
    def total(self) -> int:
        return len(self.targets)

    @property
    def accuracy(self) -> float:
        return self.correct / max(self.total, 1)

    @property
    def baseline_accuracy(self) -> float:
        return self.baseline_correct / max(self.total, 1)

    def summary(self) -> str:
        return (f"Correct: {self.correct} out of {self.total}: {100 * self.accuracy:.2f}%\n"
                f"Most-frequent-place baseline ('{self.baseline_place}' for every question): "
                f"{self.baseline_correct} out of {self.total}: {100 * self.baseline_accuracy:.2f}%")


def most_frequent_place(places: Sequence[str]) -> str:
    """Ties break alphabetically so the baseline is deterministic."""
    counts = Counter(places)
    return min(counts, key=lambda p: (-counts[p], p)) if counts else "London"


def evaluate_birthplaces(model: Transformer, tokenizer: Tokenizer, pairs: Sequence[tuple[str, str]],
                         baseline_place: str | None = None, progress: Progress | None = None,
                         ) -> BirthplaceResult:
    """Accuracy on (question, place) pairs; the baseline answers one place for every question
    (the most frequent place of the training labels when given, else of this file)."""
    targets = [a for _, a in pairs]
    predictions = predict_birthplaces(model, tokenizer, [q for q, _ in pairs], progress=progress)
    return BirthplaceResult(predictions=predictions, targets=targets,
                            baseline_place=baseline_place or most_frequent_place(targets))


def document_completion_prompts(corpus: str, pairs: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """For each 'Where was NAME born?' pair whose NAME starts a corpus document that names PLACE after
    the name: (the document up to PLACE, PLACE). Pairs without such a document are skipped."""
    return [prompt for prompt in _completion_prompts(corpus, pairs) if prompt is not None]


def _completion_prompts(corpus: str, pairs: Sequence[tuple[str, str]]) -> list[tuple[str, str] | None]:
    documents = {}
    for line in corpus.split("\n"):
        if line.strip():
            documents.setdefault(line.split(". ", 1)[0], line)
    prompts: list[tuple[str, str] | None] = []
    for question, place in pairs:
        name = question.removeprefix("Where was ").removesuffix(" born?")
        document = documents.get(name)
        at = document.find(place, len(name) + 1) if document else -1
        prompts.append((document[:at], place) if at > 0 else None)
    return prompts


def _split_for_completion(tokenizer: Tokenizer, prefix: str, place: str) -> tuple[list[int], list[int]]:
    """(prompt ids, target ids): the document cut where the tokenizer cuts it. A character vocabulary
    cuts right before the place; a subword one reads the space before a word as part of the word
    ('␣London'), so the prompt ends before that space and the target includes it."""
    whole = tokenizer.encode(prefix + place)
    head = tokenizer.encode(prefix)
    if whole[: len(head)] != head:
        trimmed = prefix.rstrip()
        head = tokenizer.encode(trimmed)
        return head, tokenizer.encode(prefix[len(trimmed):] + place)
    return head, whole[len(head):]


@torch.no_grad()
def memorized(model: Transformer, tokenizer: Tokenizer, corpus: str,
              pairs: Sequence[tuple[str, str]]) -> list[bool | None]:
    """Per pair: does the model complete the person's own document (cut just before the place) with the
    place, greedily and token for token? None where the corpus has no document naming the place."""
    model.eval()
    context = context_length(model) - 1
    device = model_device(model)
    out: list[bool | None] = []
    for prompt in _completion_prompts(corpus, pairs):
        if prompt is None:
            out.append(None)
            continue
        head, target = _split_for_completion(tokenizer, *prompt)
        ids = torch.tensor([head[-(context - len(target)):]], dtype=torch.long, device=device)
        generated = model.generate(ids, len(target))
        out.append(generated[0, ids.size(1):].tolist() == target)
    return out


def memorization_rate(model: Transformer, tokenizer: Tokenizer, corpus: str,
                      pairs: Sequence[tuple[str, str]]) -> tuple[int, int]:
    """How many people's birthplaces a pretrained model completes, greedily, from their own document
    (cut just before the place): (memorised, people with such a document). Knowledge the pretrained
    model cannot produce from its own training text is knowledge finetuning cannot retrieve."""
    flags = [f for f in memorized(model, tokenizer, corpus, pairs) if f is not None]
    return sum(flags), len(flags)



def country_priors(train_places: Sequence[str]) -> dict[str, str]:
    """Country -> its most frequent birthplace among the training answers: the best guess from a name's
    country alone (in the generated world a name is drawn from its birth country's locale, so this is
    the most frequent train birthplace among people of that country). Ties alphabetical."""
    counts = Counter(train_places)
    priors = {}
    for country in COUNTRIES:
        seen = [city for city in country.city_names if counts[city]]
        if seen:
            priors[country.label] = min(seen, key=lambda city: (-counts[city], city))
    return priors


def country_of(place: str) -> str:
    """The demo world's country of a city ('' for a place outside its tables)."""
    return next((c.label for c in COUNTRIES if place in c.city_names), "")


def country_prior_answers(train_places: Sequence[str], truths: Sequence[str]) -> list[str]:
    """Per question, the country prior of the person's birth country (known from the true place; '' when
    the place is outside the world's tables)."""
    priors = country_priors(train_places)
    return [priors.get(country_of(truth), "") for truth in truths]


def country_prior_accuracy(train_places: Sequence[str], truths: Sequence[str]) -> float:
    answers = country_prior_answers(train_places, truths)
    return sum(a == t for a, t in zip(answers, truths, strict=True)) / max(len(truths), 1)
